//! `memgate-operator run` settings: the command-line flags (each also an environment variable, so
//! a Helm chart can set either) and their validation into [`Settings`], by concern:
//!
//! | group | flags | module |
//! |---|---|---|
//! | gateway defaults | `--gateway-*` | [`gateway`] |
//! | operator runtime | `--watch-namespaces`, `--listen`, `--resync-seconds`, `--concurrency` | here |
//! | leader election | `--leader-election*`, `--lease-*`, `--identity` | [`leader`] |
//! | policy over providers | `--allowed-upstream-origin` | here |
//!
//! Owns every default of the gateways the operator creates and of the operator process itself;
//! a value is defaulted here and nowhere else. Never reads a credential.

pub mod gateway;
pub mod leader;
pub mod serve_flags;
mod shape;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use memgate_crds::validation::destination::AllowedDestinations;
use memgate_crds::validation::names::is_dns_label;

pub use gateway::{GatewayArgs, GatewaySettings, LedgerSecret, Listener, Resources};
pub use leader::{LeaderArgs, LeaderSettings};
pub use serve_flags::ServeFlags;

/// Flags of `memgate-operator run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// What every gateway is made of.
    #[command(flatten)]
    pub gateway: GatewayArgs,
    /// The operator process.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Leader election.
    #[command(flatten)]
    pub leader: LeaderArgs,
    /// What providers may do.
    #[command(flatten)]
    pub policy: PolicyArgs,
}

/// Flags of the platform team's policy over providers.
#[derive(Args, Debug, Clone)]
pub struct PolicyArgs {
    /// A destination providers may name as `spec.endpoint.origin` or `spec.access.oidc.issuer`: a
    /// host (`mem0.example.com`), every name below a suffix (`*.memory.svc`) or a network for hosts
    /// written as addresses (`10.0.0.0/8`); repeat, or comma-separated in the environment variable.
    /// Unset: any destination but the always-refused ones (link-local, cloud metadata, loopback,
    /// the API server). Set: a provider naming another is refused with `OriginNotAllowed`.
    #[arg(long = "allowed-upstream-origin", env = "MEMGATE_ALLOWED_UPSTREAM_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
}

/// Flags of the operator process itself.
#[derive(Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Only watch and serve these namespaces (comma-separated); default: every namespace. A
    /// restricted operator leaves DialectPreset status to an unrestricted one.
    #[arg(long, env = "MEMGATE_WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Address of the operator's own `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, env = "MEMGATE_OPERATOR_LISTEN", default_value = "0.0.0.0:8081")]
    pub listen: SocketAddr,
    /// Every namespace and preset is reconciled again this often, even without a change.
    #[arg(long, env = "MEMGATE_RESYNC_SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub resync_seconds: u64,
    /// Namespaces reconciled at the same time.
    #[arg(long, env = "MEMGATE_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
}

/// Validated settings of `memgate-operator run`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What every gateway is made of.
    pub gateway: GatewaySettings,
    /// `None`: every namespace; otherwise only these.
    pub watch_namespaces: Option<BTreeSet<String>>,
    /// Address of `/metrics`, `/healthz`, `/readyz`.
    pub listen: SocketAddr,
    /// `None`: no leader election (one replica only).
    pub leader: Option<LeaderSettings>,
    /// Periodic resync interval.
    pub resync: Duration,
    /// Parallel reconciles.
    pub concurrency: usize,
    /// Destinations providers may name (empty: no restriction beyond the always-refused ones).
    pub allowed_destinations: AllowedDestinations,
}

impl Settings {
    /// True when this operator sees every namespace, and therefore owns DialectPreset status
    /// (a restricted one could not count the providers using a preset).
    pub fn cluster_wide(&self) -> bool {
        self.watch_namespaces.is_none()
    }
}

/// A flag value that cannot be used; the message names the flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct SettingsError {
    /// The flag, without dashes.
    pub flag: &'static str,
    /// What is wrong.
    pub message: String,
}

fn bad(flag: &'static str, message: impl Into<String>) -> SettingsError {
    SettingsError { flag, message: message.into() }
}

impl TryFrom<RunArgs> for Settings {
    type Error = SettingsError;

    fn try_from(args: RunArgs) -> Result<Self, SettingsError> {
        let gateway = GatewaySettings::try_from(args.gateway)?;
        let runtime = args.runtime;
        let watch_namespaces = if runtime.watch_namespaces.is_empty() {
            None
        } else {
            let mut set = BTreeSet::new();
            for namespace in runtime.watch_namespaces {
                let namespace = namespace.trim().to_string();
                if !is_dns_label(&namespace) {
                    return Err(bad("watch-namespaces", format!("\"{namespace}\" is not a namespace name")));
                }
                set.insert(namespace);
            }
            Some(set)
        };
        let entries = args.policy.allowed_origins.iter().map(|e| e.trim()).filter(|e| !e.is_empty());
        let allowed_destinations = AllowedDestinations::parse(entries)
            .map_err(|entry| bad("allowed-upstream-origin", format!("\"{entry}\" is not a host, *.suffix or CIDR")))?;
        Ok(Settings {
            allowed_destinations,
            gateway,
            watch_namespaces,
            listen: runtime.listen,
            leader: args.leader.settings()?,
            resync: Duration::from_secs(runtime.resync_seconds),
            concurrency: usize::from(runtime.concurrency),
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use memgate_crds::memory_provider::DEFAULT_PLUGIN_CLAIM;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(args: &[&str]) -> Result<Settings, SettingsError> {
        let mut argv = vec!["memgate-operator"];
        argv.extend_from_slice(args);
        let cli = Cli::try_parse_from(argv).map_err(|e| bad("parse", e.to_string()))?;
        Settings::try_from(cli.run)
    }

    #[test]
    fn admin_port_must_differ_from_the_serving_port() {
        let err = parse(&["--gateway-port", "9000", "--gateway-admin-port", "9000"]).unwrap_err();
        assert_eq!(err.flag, "gateway-admin-port");
        assert!(parse(&["--gateway-port", "9000", "--gateway-admin-port", "9001"]).is_ok());
    }

    #[test]
    fn defaults_are_usable() {
        let settings = parse(&[]).expect("defaults");
        assert_eq!(settings.gateway.replicas, 2);
        assert_eq!(settings.gateway.port, 8080);
        assert_eq!(settings.gateway.admin_port, 9090);
        assert!(settings.gateway.ledger.is_none());
        assert!(settings.cluster_wide());
        assert!(settings.leader.is_some());
    }

    #[test]
    fn watch_namespaces_restrict_the_operator() {
        let settings = parse(&["--watch-namespaces", "team-a,team-b"]).expect("valid");
        assert!(!settings.cluster_wide());
        assert_eq!(settings.watch_namespaces.map(|s| s.len()), Some(2));
        assert_eq!(parse(&["--watch-namespaces", "Team_A"]).unwrap_err().flag, "watch-namespaces");
    }

    #[test]
    fn extra_allowed_hosts_must_be_host_names_or_addresses() {
        for good in ["memory.example.com", "127.0.0.1", "gw.internal:8080", "[::1]:8080", "::1"] {
            parse(&["--gateway-extra-allowed-host", good]).unwrap_or_else(|e| panic!("{good}: {e}"));
        }
        for bad_host in ["http://x", "a/b", "user@host", "host:0", "", "a b"] {
            let err = parse(&["--gateway-extra-allowed-host", bad_host]).unwrap_err();
            assert_eq!(err.flag, "gateway-extra-allowed-host", "{bad_host}");
        }
    }

    #[test]
    fn quantities_pull_policy_and_log_filter_are_checked() {
        assert_eq!(parse(&["--gateway-cpu-limit", "lots"]).unwrap_err().flag, "gateway-cpu-limit");
        assert_eq!(parse(&["--gateway-memory-request", "64XB"]).unwrap_err().flag, "gateway-memory-request");
        parse(&["--gateway-cpu-request", "0.5", "--gateway-memory-limit", "1Gi"]).expect("quantities");
        assert_eq!(parse(&["--gateway-image-pull-policy", "Sometimes"]).unwrap_err().flag, "gateway-image-pull-policy");
        assert_eq!(parse(&["--gateway-log-level", "info\nX=1"]).unwrap_err().flag, "gateway-log-level");
    }

    #[test]
    fn ledger_is_a_secret_reference_never_a_url() {
        let settings = parse(&["--gateway-ledger-secret", "memgate-ledger"]).expect("valid");
        assert_eq!(settings.gateway.ledger, Some(LedgerSecret { name: "memgate-ledger".into(), key: "url".into() }));
        let err = parse(&["--gateway-ledger-secret", "redis://:pw@redis:6379"]).unwrap_err();
        assert_eq!(err.flag, "gateway-ledger-secret");
        assert!(!err.to_string().contains("pw@"), "the message never echoes the value");
    }

    #[test]
    fn network_policy_and_pod_disruption_budget_defaults() {
        let settings = parse(&[]).expect("defaults");
        assert!(!settings.gateway.network_policy, "off unless asked for");
        assert!(settings.gateway.pod_disruption_budget, "on by default");
        assert!(settings.gateway.image_pull_secrets.is_empty());
        assert_eq!(settings.gateway.default_plugin_claim, DEFAULT_PLUGIN_CLAIM);
        let settings =
            parse(&["--gateway-network-policy", "true", "--gateway-pod-disruption-budget", "false"]).expect("valid");
        assert!(settings.gateway.network_policy && !settings.gateway.pod_disruption_budget);
    }

    #[test]
    fn allowed_namespaces_must_be_namespace_names() {
        let settings = parse(&[
            "--gateway-network-policy-allowed-namespace",
            "monitoring,agents",
            "--gateway-network-policy-allowed-namespace",
            "agents",
        ])
        .expect("valid");
        let namespaces: Vec<&str> = settings.gateway.network_policy_namespaces.iter().map(String::as_str).collect();
        assert_eq!(namespaces, ["agents", "monitoring"], "sorted, without repeats");
        let empty = parse(&["--gateway-network-policy-allowed-namespace", ""]).expect("an empty list");
        assert!(empty.gateway.network_policy_namespaces.is_empty());
        for bad_name in ["Team_A", "-a", "a.b", "a,B"] {
            let arg = format!("--gateway-network-policy-allowed-namespace={bad_name}");
            let err = parse(&[&arg]).unwrap_err();
            assert_eq!(err.flag, "gateway-network-policy-allowed-namespace", "{bad_name}");
            assert!(err.to_string().starts_with("--gateway-network-policy-allowed-namespace: "), "{err}");
        }
    }

    #[test]
    fn pull_secrets_and_default_claim_must_be_object_names() {
        let settings =
            parse(&["--gateway-image-pull-secret", "regcred,mirror.creds", "--gateway-image-pull-secret", "regcred"])
                .expect("valid");
        assert_eq!(settings.gateway.image_pull_secrets, ["regcred", "mirror.creds"], "in order, without repeats");
        assert_eq!(parse(&["--gateway-image-pull-secret", "Reg Cred"]).unwrap_err().flag, "gateway-image-pull-secret");
        let settings = parse(&["--gateway-default-plugin-claim", "team-plugins"]).expect("valid");
        assert_eq!(settings.gateway.default_plugin_claim, "team-plugins");
        for bad_claim in ["Plugins!", "", "a/b"] {
            let err = parse(&["--gateway-default-plugin-claim", bad_claim]).unwrap_err();
            assert_eq!(err.flag, "gateway-default-plugin-claim", "{bad_claim}");
            assert!(err.to_string().starts_with("--gateway-default-plugin-claim: "), "{err}");
        }
    }

    #[test]
    fn lease_grace_must_be_shorter_than_the_duration() {
        let err = parse(&["--lease-duration-seconds", "5", "--lease-grace-seconds", "5"]).unwrap_err();
        assert_eq!(err.flag, "lease-grace-seconds");
        assert!(parse(&["--leader-election", "false"]).expect("valid").leader.is_none());
    }
}
