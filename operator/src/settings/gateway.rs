//! The defaults of every gateway the operator creates: their flags (`--gateway-*`, each also an
//! environment variable the chart sets) and their validation into [`GatewaySettings`].
//!
//! Never reads a credential: the shared ingest ledger is named by Secret reference
//! (`--gateway-ledger-secret`), so its Redis URL (which may carry a password) is never printed,
//! rendered into a ConfigMap or passed as an argument.

use std::collections::{BTreeMap, BTreeSet};

use clap::Args;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use memgate_crds::memory_gateway::{GatewayAutoscaling, GatewayPodTemplate};
use memgate_crds::memory_provider::DEFAULT_PLUGIN_CLAIM;
use memgate_crds::validation::names::{is_dns_label, is_dns_subdomain, is_log_filter, is_quantity, is_secret_key};

use super::{ServeFlags, SettingsError, bad};

/// Flags of every gateway's defaults.
#[derive(Args, Debug, Clone)]
pub struct GatewayArgs {
    /// Container image of the gateways (`memgate-gateway` must be on its PATH).
    #[arg(long = "gateway-image", env = "MEMGATE_GATEWAY_IMAGE", default_value = concat!("memgate:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// Image pull policy of the gateways: Always, IfNotPresent or Never.
    #[arg(
        long = "gateway-image-pull-policy",
        env = "MEMGATE_GATEWAY_IMAGE_PULL_POLICY",
        default_value = "IfNotPresent"
    )]
    pub image_pull_policy: String,
    /// Gateway replicas per namespace (a namespace that ingests runs one unless a shared ledger is set).
    #[arg(long = "gateway-replicas", env = "MEMGATE_GATEWAY_REPLICAS", default_value_t = 2, value_parser = clap::value_parser!(i32).range(1..=20))]
    pub replicas: i32,
    /// Port the gateway serves MCP and Nexent on (also the Service port).
    #[arg(long = "gateway-port", env = "MEMGATE_GATEWAY_PORT", default_value_t = 8080, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
    /// Port of the gateway's admin listener (`/healthz`, `/readyz`, `/metrics`): probes and scrapes use it,
    /// so they keep working while the serving port is saturated. Not exposed by the Service.
    #[arg(long = "gateway-admin-port", env = "MEMGATE_GATEWAY_ADMIN_PORT", default_value_t = 9090, value_parser = clap::value_parser!(u16).range(1..))]
    pub admin_port: u16,
    /// CPU request of a gateway container.
    #[arg(long = "gateway-cpu-request", env = "MEMGATE_GATEWAY_CPU_REQUEST", default_value = "50m")]
    pub cpu_request: String,
    /// Memory request of a gateway container.
    #[arg(long = "gateway-memory-request", env = "MEMGATE_GATEWAY_MEMORY_REQUEST", default_value = "64Mi")]
    pub memory_request: String,
    /// CPU limit of a gateway container.
    #[arg(long = "gateway-cpu-limit", env = "MEMGATE_GATEWAY_CPU_LIMIT", default_value = "1")]
    pub cpu_limit: String,
    /// Memory limit of a gateway container (the listener's worst case at its default limits is
    /// about 320 MiB: 256 bodies of 1 MiB in flight plus 1024 connections' buffers).
    #[arg(long = "gateway-memory-limit", env = "MEMGATE_GATEWAY_MEMORY_LIMIT", default_value = "512Mi")]
    pub memory_limit: String,
    /// Most requests a gateway serves at once (`memgate-gateway serve --max-in-flight`); unset: the
    /// gateway's own default.
    #[arg(long = "gateway-max-in-flight", env = "MEMGATE_GATEWAY_MAX_IN_FLIGHT", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_in_flight: Option<u32>,
    /// Most open connections of a gateway's data port (`--max-connections`); unset: the gateway's own default.
    #[arg(long = "gateway-max-connections", env = "MEMGATE_GATEWAY_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: Option<u32>,
    /// Another `Host` name tenants use to reach a gateway, besides memgate-gateway[.<ns>[.svc[.cluster.local]]]
    /// (repeat, or comma-separated in the environment variable).
    #[arg(long = "gateway-extra-allowed-host", env = "MEMGATE_GATEWAY_EXTRA_ALLOWED_HOSTS", value_delimiter = ',')]
    pub extra_allowed_hosts: Vec<String>,
    /// Name of a Secret, expected in each gateway namespace, holding the shared ingest ledger URL
    /// (`redis://…`); without it (or where it is missing) a namespace that ingests runs one replica.
    #[arg(long = "gateway-ledger-secret", env = "MEMGATE_GATEWAY_LEDGER_SECRET")]
    pub ledger_secret: Option<String>,
    /// Key of the ledger URL in that Secret.
    #[arg(long = "gateway-ledger-secret-key", env = "MEMGATE_GATEWAY_LEDGER_SECRET_KEY", default_value = "url")]
    pub ledger_secret_key: String,
    /// Kill switch of every gateway's search (MCP and Nexent): `EXTERNAL_MEMORY_SEARCH_ENABLED`.
    #[arg(long = "gateway-search-enabled", env = "MEMGATE_GATEWAY_SEARCH_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub search_enabled: bool,
    /// Kill switch of every gateway's Nexent ingest: `EXTERNAL_MEMORY_INGEST_ENABLED`.
    #[arg(long = "gateway-ingest-enabled", env = "MEMGATE_GATEWAY_INGEST_ENABLED", default_value_t = true, action = clap::ArgAction::Set)]
    pub ingest_enabled: bool,
    /// Log filter of the gateways (`RUST_LOG`), e.g. `info` or `warn,memgate_gateway=info`.
    #[arg(long = "gateway-log-level", env = "MEMGATE_GATEWAY_LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// Audit events of every gateway (`memgate-gateway serve --audit-log`): `off`, or `stdout` (one
    /// JSON line per call on the container's standard output; operational logs are on standard error).
    #[arg(long = "gateway-audit-log", env = "MEMGATE_GATEWAY_AUDIT_LOG", value_enum, default_value_t = AuditLog::Off)]
    pub audit_log: AuditLog,
    /// Give each gateway a NetworkPolicy admitting TCP to its serving and admin ports only from pods
    /// of its own namespace and of `--gateway-network-policy-allowed-namespace`.
    #[arg(long = "gateway-network-policy", env = "MEMGATE_GATEWAY_NETWORK_POLICY", default_value_t = false, action = clap::ArgAction::Set)]
    pub network_policy: bool,
    /// Another namespace whose pods may reach every gateway under `--gateway-network-policy` (e.g. the
    /// agents' or Prometheus's; repeat, or comma-separated in the environment variable).
    #[arg(
        long = "gateway-network-policy-allowed-namespace",
        env = "MEMGATE_GATEWAY_NETWORK_POLICY_ALLOWED_NAMESPACES",
        value_delimiter = ','
    )]
    pub network_policy_allowed_namespaces: Vec<String>,
    /// Give each gateway running more than one replica a PodDisruptionBudget (`maxUnavailable: 1`).
    #[arg(long = "gateway-pod-disruption-budget", env = "MEMGATE_GATEWAY_POD_DISRUPTION_BUDGET", default_value_t = true, action = clap::ArgAction::Set)]
    pub pod_disruption_budget: bool,
    /// Secret (in each gateway namespace) the gateway pods pull their image with (repeat, or
    /// comma-separated in the environment variable).
    #[arg(long = "gateway-image-pull-secret", env = "MEMGATE_GATEWAY_IMAGE_PULL_SECRETS", value_delimiter = ',')]
    pub image_pull_secrets: Vec<String>,
    /// Nexent plugin PersistentVolumeClaim of a provider whose `spec.nexent.pluginClaim` is unset.
    #[arg(long = "gateway-default-plugin-claim", env = "MEMGATE_GATEWAY_DEFAULT_PLUGIN_CLAIM", default_value = DEFAULT_PLUGIN_CLAIM)]
    pub default_plugin_claim: String,
    /// ClusterRole granting exactly `create` on `tokenreviews`, bound to a gateway's ServiceAccount
    /// when its providers accept ServiceAccount tokens (the chart creates it; the operator may
    /// `bind` only this one).
    #[arg(
        long = "gateway-token-review-cluster-role",
        env = "MEMGATE_GATEWAY_TOKEN_REVIEW_CLUSTER_ROLE",
        default_value = "memgate-gateway-token-review"
    )]
    pub token_review_cluster_role: String,
    /// Any other flag of `memgate-gateway serve`, `name=value`, given to every gateway (repeat, or
    /// comma-separated in the environment variable); each is checked with the gateway's own parser.
    /// Refused: flags the operator renders or that take a file or a credential
    /// (`settings::serve_flags::NOT_PASSED_THROUGH`).
    #[arg(long = "gateway-serve-flag", env = "MEMGATE_GATEWAY_SERVE_FLAGS", value_delimiter = ',')]
    pub serve_flags: Vec<String>,
}

/// Defaults of every gateway the operator renders; a namespace's `MemoryGateway` overrides some of
/// them for its gateway ([`GatewaySettings::shaped_by`]).
#[derive(Debug, Clone, PartialEq)]
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
    /// Where the gateway writes audit events.
    pub audit_log: AuditLog,
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
    /// The ClusterRole (`tokenreviews: create` only) gateways with ServiceAccount callers are bound to.
    pub token_review_cluster_role: String,
    /// The data port's listener limits (`None`: the gateway's own default).
    pub listener: Listener,
    /// Other `memgate-gateway serve` flags, passed through.
    pub serve_flags: ServeFlags,
    /// The URL tenants use, when not the in-cluster Service URL (a `MemoryGateway`'s `publicURL`).
    pub public_url: Option<String>,
    /// A HorizontalPodAutoscaler instead of fixed replicas (a `MemoryGateway`'s).
    pub autoscaling: Option<GatewayAutoscaling>,
    /// Merged into the gateway pod (a `MemoryGateway`'s; empty by default).
    pub pod_template: GatewayPodTemplate,
    /// Pods of any namespace the NetworkPolicy also admits (a `MemoryGateway`'s).
    pub network_policy_pods: Vec<LabelSelector>,
}

/// Container resource requests and limits: resource name (`cpu`, `memory`, `ephemeral-storage`)
/// to Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    /// Requests.
    pub requests: BTreeMap<String, String>,
    /// Limits.
    pub limits: BTreeMap<String, String>,
}

/// `--gateway-audit-log`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditLog {
    /// No audit events.
    #[default]
    Off,
    /// Audit events on the gateway container's standard output.
    Stdout,
}

/// Listener limits of the data port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Listener {
    /// `--max-in-flight`.
    pub max_in_flight: Option<u32>,
    /// `--max-connections`.
    pub max_connections: Option<u32>,
}

/// Where the shared ingest ledger URL is: a key of a Secret in each gateway namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerSecret {
    /// Secret name.
    pub name: String,
    /// Key inside it.
    pub key: String,
}

impl TryFrom<GatewayArgs> for GatewaySettings {
    type Error = SettingsError;

    fn try_from(args: GatewayArgs) -> Result<Self, SettingsError> {
        check_image(&args.image)?;
        if !matches!(args.image_pull_policy.as_str(), "Always" | "IfNotPresent" | "Never") {
            return Err(bad("gateway-image-pull-policy", "must be Always, IfNotPresent or Never"));
        }
        for (flag, value) in [
            ("gateway-cpu-request", &args.cpu_request),
            ("gateway-memory-request", &args.memory_request),
            ("gateway-cpu-limit", &args.cpu_limit),
            ("gateway-memory-limit", &args.memory_limit),
        ] {
            if !is_quantity(value) {
                return Err(bad(flag, "must be a Kubernetes quantity such as 100m, 1, 64Mi or 1Gi"));
            }
        }
        if args.admin_port == args.port {
            return Err(bad(
                "gateway-admin-port",
                "must differ from --gateway-port (the admin port is never on the Service)",
            ));
        }
        for host in &args.extra_allowed_hosts {
            check_host(host)?;
        }
        let ledger = match args.ledger_secret {
            Some(name) => {
                if !is_dns_subdomain(&name) {
                    return Err(bad("gateway-ledger-secret", "must be a Secret name (lower-case DNS subdomain)"));
                }
                if !is_secret_key(&args.ledger_secret_key) {
                    return Err(bad(
                        "gateway-ledger-secret-key",
                        "must be a Secret key (letters, digits, '-', '_', '.')",
                    ));
                }
                Some(LedgerSecret { name, key: args.ledger_secret_key })
            }
            None => None,
        };
        if !is_log_filter(&args.log_level) {
            return Err(bad("gateway-log-level", "must be a log filter such as info or warn,memgate_gateway=debug"));
        }
        // Empty items of these lists are skipped: an empty environment variable (as a chart renders
        // an empty list) means none.
        let mut network_policy_namespaces = BTreeSet::new();
        for namespace in args.network_policy_allowed_namespaces {
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
        for name in args.image_pull_secrets {
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
        if !is_dns_subdomain(&args.default_plugin_claim) {
            return Err(bad(
                "gateway-default-plugin-claim",
                "must be a PersistentVolumeClaim name (lower-case DNS subdomain)",
            ));
        }
        if !is_dns_subdomain(&args.token_review_cluster_role) {
            return Err(bad(
                "gateway-token-review-cluster-role",
                "must be a ClusterRole name (lower-case DNS subdomain)",
            ));
        }
        let serve_flags = ServeFlags::parse(&args.serve_flags)?;
        Ok(GatewaySettings {
            serve_flags,
            token_review_cluster_role: args.token_review_cluster_role,
            image: args.image,
            image_pull_policy: args.image_pull_policy,
            replicas: args.replicas,
            port: args.port,
            admin_port: args.admin_port,
            resources: Resources {
                requests: BTreeMap::from([
                    ("cpu".to_string(), args.cpu_request),
                    ("memory".to_string(), args.memory_request),
                ]),
                limits: BTreeMap::from([
                    ("cpu".to_string(), args.cpu_limit),
                    ("memory".to_string(), args.memory_limit),
                ]),
            },
            extra_allowed_hosts: args.extra_allowed_hosts,
            ledger,
            search_enabled: args.search_enabled,
            ingest_enabled: args.ingest_enabled,
            log_level: args.log_level,
            audit_log: args.audit_log,
            network_policy: args.network_policy,
            network_policy_namespaces,
            pod_disruption_budget: args.pod_disruption_budget,
            image_pull_secrets,
            default_plugin_claim: args.default_plugin_claim,
            listener: Listener { max_in_flight: args.max_in_flight, max_connections: args.max_connections },
            public_url: None,
            autoscaling: None,
            pod_template: GatewayPodTemplate::default(),
            network_policy_pods: Vec::new(),
        })
    }
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
