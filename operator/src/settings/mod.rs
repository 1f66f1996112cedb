//! `memgate-operator run` settings: the command-line flags (each also an environment variable, so
//! a Helm chart can set either) and their validation into [`Settings`].
//!
//! Owns every default of the gateways the operator creates and of the operator process itself.
//! Never reads a credential: the shared ingest ledger is named by Secret reference
//! (`--gateway-ledger-secret`), so its Redis URL (which may carry a password) is never printed,
//! rendered into a ConfigMap or passed as an argument.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use memgate_crds::memory_provider::DEFAULT_PLUGIN_CLAIM;

/// Flags of `memgate-operator run`.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Container image of the gateways (`memgate-gateway` must be on its PATH).
    #[arg(long, env = "MEMGATE_GATEWAY_IMAGE", default_value = concat!("memgate:", env!("CARGO_PKG_VERSION")))]
    pub gateway_image: String,
    /// Image pull policy of the gateways: Always, IfNotPresent or Never.
    #[arg(long, env = "MEMGATE_GATEWAY_IMAGE_PULL_POLICY", default_value = "IfNotPresent")]
    pub gateway_image_pull_policy: String,
    /// Gateway replicas per namespace (a namespace that ingests runs one unless a shared ledger is set).
    #[arg(long, env = "MEMGATE_GATEWAY_REPLICAS", default_value_t = 2, value_parser = clap::value_parser!(i32).range(1..=20))]
    pub gateway_replicas: i32,
    /// Port the gateway serves MCP and Nexent on (also the Service port).
    #[arg(long, env = "MEMGATE_GATEWAY_PORT", default_value_t = 8080, value_parser = clap::value_parser!(u16).range(1..))]
    pub gateway_port: u16,
    /// Port of the gateway's admin listener (`/healthz`, `/readyz`, `/metrics`): probes and scrapes use it,
    /// so they keep working while the serving port is saturated. Not exposed by the Service.
    #[arg(long, env = "MEMGATE_GATEWAY_ADMIN_PORT", default_value_t = 9090, value_parser = clap::value_parser!(u16).range(1..))]
    pub gateway_admin_port: u16,
    /// CPU request of a gateway container.
    #[arg(long, env = "MEMGATE_GATEWAY_CPU_REQUEST", default_value = "50m")]
    pub gateway_cpu_request: String,
    /// Memory request of a gateway container.
    #[arg(long, env = "MEMGATE_GATEWAY_MEMORY_REQUEST", default_value = "64Mi")]
    pub gateway_memory_request: String,
    /// CPU limit of a gateway container.
    #[arg(long, env = "MEMGATE_GATEWAY_CPU_LIMIT", default_value = "1")]
    pub gateway_cpu_limit: String,
    /// Memory limit of a gateway container.
    #[arg(long, env = "MEMGATE_GATEWAY_MEMORY_LIMIT", default_value = "256Mi")]
    pub gateway_memory_limit: String,
    /// Another `Host` name tenants use to reach a gateway, besides memgate-gateway[.<ns>[.svc[.cluster.local]]]
    /// (repeat, or comma-separated in the environment variable).
    #[arg(long = "gateway-extra-allowed-host", env = "MEMGATE_GATEWAY_EXTRA_ALLOWED_HOSTS", value_delimiter = ',')]
    pub gateway_extra_allowed_hosts: Vec<String>,
    /// Name of a Secret, expected in each gateway namespace, holding the shared ingest ledger URL
    /// (`redis://…`); without it (or where it is missing) a namespace that ingests runs one replica.
    #[arg(long, env = "MEMGATE_GATEWAY_LEDGER_SECRET")]
    pub gateway_ledger_secret: Option<String>,
    /// Key of the ledger URL in that Secret.
    #[arg(long, env = "MEMGATE_GATEWAY_LEDGER_SECRET_KEY", default_value = "url")]
    pub gateway_ledger_secret_key: String,
    /// Kill switch of every gateway's search (MCP and Nexent): `EXTERNAL_MEMORY_SEARCH_ENABLED`.
    #[arg(long, env = "MEMGATE_GATEWAY_SEARCH_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_search_enabled: bool,
    /// Kill switch of every gateway's Nexent ingest: `EXTERNAL_MEMORY_INGEST_ENABLED`.
    #[arg(long, env = "MEMGATE_GATEWAY_INGEST_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_ingest_enabled: bool,
    /// Log filter of the gateways (`RUST_LOG`), e.g. `info` or `warn,memgate_gateway=info`.
    #[arg(long, env = "MEMGATE_GATEWAY_LOG_LEVEL", default_value = "info")]
    pub gateway_log_level: String,
    /// Give each gateway a NetworkPolicy admitting TCP to its serving and admin ports only from pods
    /// of its own namespace and of `--gateway-network-policy-allowed-namespace`.
    #[arg(long, env = "MEMGATE_GATEWAY_NETWORK_POLICY", default_value_t = false, action = clap::ArgAction::Set)]
    pub gateway_network_policy: bool,
    /// Another namespace whose pods may reach every gateway under `--gateway-network-policy` (e.g. the
    /// agents' or Prometheus's; repeat, or comma-separated in the environment variable).
    #[arg(
        long = "gateway-network-policy-allowed-namespace",
        env = "MEMGATE_GATEWAY_NETWORK_POLICY_ALLOWED_NAMESPACES",
        value_delimiter = ','
    )]
    pub gateway_network_policy_allowed_namespaces: Vec<String>,
    /// Give each gateway running more than one replica a PodDisruptionBudget (`maxUnavailable: 1`).
    #[arg(long, env = "MEMGATE_GATEWAY_POD_DISRUPTION_BUDGET", default_value_t = true, action = clap::ArgAction::Set)]
    pub gateway_pod_disruption_budget: bool,
    /// Secret (in each gateway namespace) the gateway pods pull their image with (repeat, or
    /// comma-separated in the environment variable).
    #[arg(long = "gateway-image-pull-secret", env = "MEMGATE_GATEWAY_IMAGE_PULL_SECRETS", value_delimiter = ',')]
    pub gateway_image_pull_secrets: Vec<String>,
    /// Nexent plugin PersistentVolumeClaim of a provider whose `spec.nexent.pluginClaim` is unset.
    #[arg(long, env = "MEMGATE_GATEWAY_DEFAULT_PLUGIN_CLAIM", default_value = DEFAULT_PLUGIN_CLAIM)]
    pub gateway_default_plugin_claim: String,
    /// Only watch and serve these namespaces (comma-separated); default: every namespace. A
    /// restricted operator leaves DialectPreset status to an unrestricted one.
    #[arg(long, env = "MEMGATE_WATCH_NAMESPACES", value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
    /// Address of the operator's own `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, env = "MEMGATE_OPERATOR_LISTEN", default_value = "0.0.0.0:8081")]
    pub listen: SocketAddr,
    /// Elect a leader on a Lease so that several operator replicas never reconcile at once.
    #[arg(long, env = "MEMGATE_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the Lease (normally the operator's own, from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// Name of the Lease.
    #[arg(long, env = "MEMGATE_LEADER_ELECTION_LEASE", default_value = "memgate-operator")]
    pub leader_election_lease: String,
    /// Seconds a leader's Lease stays valid without renewal: the longest a takeover waits.
    #[arg(long, env = "MEMGATE_LEASE_DURATION_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=300))]
    pub lease_duration_seconds: u64,
    /// Seconds before expiry at which the leader renews its Lease.
    #[arg(long, env = "MEMGATE_LEASE_GRACE_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=299))]
    pub lease_grace_seconds: u64,
    /// This process's identity in the Lease (default: `$POD_NAME`, else host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
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
}

impl Settings {
    /// True when this operator sees every namespace, and therefore owns DialectPreset status
    /// (a restricted one could not count the providers using a preset).
    pub fn cluster_wide(&self) -> bool {
        self.watch_namespaces.is_none()
    }
}

/// Defaults of every gateway the operator renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySettings {
    /// Container image.
    pub image: String,
    /// Image pull policy.
    pub image_pull_policy: String,
    /// Replicas (before the one-replica rule for ingest without a shared ledger).
    pub replicas: i32,
    /// Serving port (container and Service).
    pub port: u16,
    /// Admin port (probes and metrics; never on the Service).
    pub admin_port: u16,
    /// Requests and limits of the gateway container.
    pub resources: Resources,
    /// Extra `Host` names accepted on `/mcp/*`.
    pub extra_allowed_hosts: Vec<String>,
    /// Secret (by name, in the gateway's namespace) and key holding the shared ledger URL.
    pub ledger: Option<LedgerSecret>,
    /// `EXTERNAL_MEMORY_SEARCH_ENABLED`.
    pub search_enabled: bool,
    /// `EXTERNAL_MEMORY_INGEST_ENABLED`.
    pub ingest_enabled: bool,
    /// `RUST_LOG` of the gateway.
    pub log_level: String,
    /// Render a NetworkPolicy per gateway.
    pub network_policy: bool,
    /// Namespaces admitted by that NetworkPolicy besides the gateway's own.
    pub network_policy_namespaces: BTreeSet<String>,
    /// Render a PodDisruptionBudget per gateway running more than one replica.
    pub pod_disruption_budget: bool,
    /// `imagePullSecrets` of the gateway pods (Secret names, in order, without repeats).
    pub image_pull_secrets: Vec<String>,
    /// Plugin claim of a Nexent provider without `spec.nexent.pluginClaim`.
    pub default_plugin_claim: String,
}

/// Container resource requests and limits (Kubernetes quantities).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    /// CPU request.
    pub cpu_request: String,
    /// Memory request.
    pub memory_request: String,
    /// CPU limit.
    pub cpu_limit: String,
    /// Memory limit.
    pub memory_limit: String,
}

/// Where the shared ingest ledger URL is: a key of a Secret in each gateway namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerSecret {
    /// Secret name.
    pub name: String,
    /// Key inside it.
    pub key: String,
}

/// Lease settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub lease: String,
    /// Holder identity.
    pub identity: String,
    /// Lease validity without renewal.
    pub duration: Duration,
    /// Renew this long before expiry.
    pub grace: Duration,
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
        check_image(&args.gateway_image)?;
        if !matches!(args.gateway_image_pull_policy.as_str(), "Always" | "IfNotPresent" | "Never") {
            return Err(bad("gateway-image-pull-policy", "must be Always, IfNotPresent or Never"));
        }
        for (flag, value) in [
            ("gateway-cpu-request", &args.gateway_cpu_request),
            ("gateway-memory-request", &args.gateway_memory_request),
            ("gateway-cpu-limit", &args.gateway_cpu_limit),
            ("gateway-memory-limit", &args.gateway_memory_limit),
        ] {
            if !is_quantity(value) {
                return Err(bad(flag, "must be a Kubernetes quantity such as 100m, 1, 64Mi or 1Gi"));
            }
        }
        if args.gateway_admin_port == args.gateway_port {
            return Err(bad(
                "gateway-admin-port",
                "must differ from --gateway-port (the admin port is never on the Service)",
            ));
        }
        for host in &args.gateway_extra_allowed_hosts {
            check_host(host)?;
        }
        let ledger = match args.gateway_ledger_secret {
            Some(name) => {
                if !is_dns_subdomain(&name) {
                    return Err(bad("gateway-ledger-secret", "must be a Secret name (lower-case DNS subdomain)"));
                }
                if !is_secret_key(&args.gateway_ledger_secret_key) {
                    return Err(bad(
                        "gateway-ledger-secret-key",
                        "must be a Secret key (letters, digits, '-', '_', '.')",
                    ));
                }
                Some(LedgerSecret { name, key: args.gateway_ledger_secret_key })
            }
            None => None,
        };
        let log_ok = !args.gateway_log_level.is_empty()
            && args.gateway_log_level.len() <= 256
            && args.gateway_log_level.chars().all(|c| c.is_ascii_alphanumeric() || "_=,:.-".contains(c));
        if !log_ok {
            return Err(bad("gateway-log-level", "must be a log filter such as info or warn,memgate_gateway=debug"));
        }
        // Empty items of these lists are skipped: an empty environment variable (as a chart renders
        // an empty list) means none.
        let mut network_policy_namespaces = BTreeSet::new();
        for namespace in args.gateway_network_policy_allowed_namespaces {
            let namespace = namespace.trim().to_string();
            if namespace.is_empty() {
                continue;
            }
            if !is_dns_label(&namespace) {
                return Err(bad(
                    "gateway-network-policy-allowed-namespace",
                    format!("\"{namespace}\" is not a namespace name (lower-case DNS label)"),
                ));
            }
            network_policy_namespaces.insert(namespace);
        }
        let mut image_pull_secrets: Vec<String> = Vec::new();
        for name in args.gateway_image_pull_secrets {
            let name = name.trim().to_string();
            if name.is_empty() {
                continue;
            }
            if !is_dns_subdomain(&name) {
                return Err(bad(
                    "gateway-image-pull-secret",
                    format!("\"{name}\" is not a Secret name (lower-case DNS subdomain)"),
                ));
            }
            if !image_pull_secrets.contains(&name) {
                image_pull_secrets.push(name);
            }
        }
        if !is_dns_subdomain(&args.gateway_default_plugin_claim) {
            return Err(bad(
                "gateway-default-plugin-claim",
                "must be a PersistentVolumeClaim name (lower-case DNS subdomain)",
            ));
        }
        let watch_namespaces = if args.watch_namespaces.is_empty() {
            None
        } else {
            let mut set = BTreeSet::new();
            for namespace in args.watch_namespaces {
                let namespace = namespace.trim().to_string();
                if !is_dns_label(&namespace) {
                    return Err(bad("watch-namespaces", format!("\"{namespace}\" is not a namespace name")));
                }
                set.insert(namespace);
            }
            Some(set)
        };
        let leader = if args.leader_election {
            if !is_dns_label(&args.leader_election_namespace) {
                return Err(bad("leader-election-namespace", "must be a namespace name"));
            }
            if !is_dns_subdomain(&args.leader_election_lease) {
                return Err(bad("leader-election-lease", "must be a Lease name (lower-case DNS subdomain)"));
            }
            if args.lease_grace_seconds >= args.lease_duration_seconds {
                return Err(bad("lease-grace-seconds", "must be shorter than --lease-duration-seconds"));
            }
            let identity = args.identity.unwrap_or_else(default_identity);
            if identity.is_empty() || identity.len() > 128 || identity.chars().any(char::is_control) {
                return Err(bad("identity", "must be 1 to 128 characters without control characters"));
            }
            Some(LeaderSettings {
                namespace: args.leader_election_namespace,
                lease: args.leader_election_lease,
                identity,
                duration: Duration::from_secs(args.lease_duration_seconds),
                grace: Duration::from_secs(args.lease_grace_seconds),
            })
        } else {
            None
        };
        Ok(Settings {
            gateway: GatewaySettings {
                image: args.gateway_image,
                image_pull_policy: args.gateway_image_pull_policy,
                replicas: args.gateway_replicas,
                port: args.gateway_port,
                admin_port: args.gateway_admin_port,
                resources: Resources {
                    cpu_request: args.gateway_cpu_request,
                    memory_request: args.gateway_memory_request,
                    cpu_limit: args.gateway_cpu_limit,
                    memory_limit: args.gateway_memory_limit,
                },
                extra_allowed_hosts: args.gateway_extra_allowed_hosts,
                ledger,
                search_enabled: args.gateway_search_enabled,
                ingest_enabled: args.gateway_ingest_enabled,
                log_level: args.gateway_log_level,
                network_policy: args.gateway_network_policy,
                network_policy_namespaces,
                pod_disruption_budget: args.gateway_pod_disruption_budget,
                image_pull_secrets,
                default_plugin_claim: args.gateway_default_plugin_claim,
            },
            watch_namespaces,
            listen: args.listen,
            leader,
            resync: Duration::from_secs(args.resync_seconds),
            concurrency: usize::from(args.concurrency),
        })
    }
}

fn default_identity() -> String {
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "memgate-operator".into());
    format!("{host}-{}", std::process::id())
}

fn check_image(image: &str) -> Result<(), SettingsError> {
    let ok = !image.is_empty()
        && image.len() <= 512
        && image.chars().all(|c| c.is_ascii_alphanumeric() || "./:@_-".contains(c));
    if ok { Ok(()) } else { Err(bad("gateway-image", "must be an image reference such as registry/memgate:0.1.0")) }
}

/// A `Host` value: a DNS name or IP address, optionally with a port; no scheme, path or user info.
fn check_host(value: &str) -> Result<(), SettingsError> {
    let fail = || bad("gateway-extra-allowed-host", format!("\"{value}\" is not a host name or address (host[:port])"));
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        let (inside, after) = rest.split_once(']').ok_or_else(fail)?;
        (inside, after.strip_prefix(':').or(if after.is_empty() { None } else { Some("") }))
    } else if value.matches(':').count() > 1 {
        (value, None) // a bare IPv6 address
    } else {
        match value.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (value, None),
        }
    };
    if port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
        return Err(fail());
    }
    if host.parse::<std::net::IpAddr>().is_ok() || is_dns_subdomain(&host.to_ascii_lowercase()) {
        Ok(())
    } else {
        Err(fail())
    }
}

/// Kubernetes quantity: a decimal number with an optional binary or decimal suffix.
fn is_quantity(value: &str) -> bool {
    const SUFFIXES: [&str; 14] = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti"];
    let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let (number, suffix) = value.split_at(split);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    digits > 0 && number.matches('.').count() <= 1 && (SUFFIXES.contains(&suffix) || suffix == "Pi" || suffix == "Ei")
}

/// RFC 1123 label (namespace names).
pub(crate) fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// RFC 1123 subdomain (most object names).
pub(crate) fn is_dns_subdomain(value: &str) -> bool {
    !value.is_empty() && value.len() <= 253 && value.split('.').all(is_dns_label)
}

fn is_secret_key(value: &str) -> bool {
    !value.is_empty() && value.len() <= 253 && value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

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
