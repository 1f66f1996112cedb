//! The flags of `memgate-gateway serve`: what an operator (or a person) can set on a gateway
//! process, with their defaults and the parsing of each value. The binary wires them up; the
//! operator renders them (operator/src/render/pod.rs); tests ask clap for them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use memgate_crds::source_file::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES};
use memgate_crds::validation::destination::Placement;

use crate::gateway_id::GatewayId;
use crate::ingest::DEFAULT_MAX_ENTRIES;
use crate::listener::{ListenerLimits, effective_max_connections, limits, open_file_limit};
use crate::mcp::valid_origin_entry;
use crate::state::DEFAULT_NEXENT_MAX_LIMIT;

/// Flags of `memgate-gateway serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Config folder: MemoryProviders, DialectPresets, Secrets or SecretMounts as YAML.
    #[arg(long)]
    pub config: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// `Host` header value accepted on `/mcp/*` (repeat for several); default: loopback names only.
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// `Origin` accepted on `/mcp/*` (`scheme://host[:port]`, repeat for several); default: none, so
    /// any request carrying an `Origin` header (a browser) is refused with 403.
    #[arg(long = "allowed-origin", value_parser = origin_entry)]
    pub allowed_origins: Vec<String>,
    /// Kubeconfig used for TokenReview; default: the in-cluster config when running in a pod.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How often the config folder and mounted Secrets are checked for changes.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..))]
    pub reload_interval_ms: u64,
    /// Largest Nexent `limit` honoured (larger ones are capped).
    #[arg(long, default_value_t = DEFAULT_NEXENT_MAX_LIMIT, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub nexent_max_limit: u32,
    /// Redis store shared by replicas, `redis[s]://[[user]:password@]host:port[/db]`: the ingest
    /// idempotency ledger and the providers' rate limits (`spec.limits`) live there; default:
    /// in-process (one replica). Prefer the environment variable when the URL holds a password.
    #[arg(long, env = "MEMGATE_INGEST_LEDGER", hide_env_values = true)]
    pub ledger: Option<String>,
    /// PEM file of the CA certificates a `rediss://` ledger is verified against (default: the
    /// system's roots).
    #[arg(long, env = "MEMGATE_INGEST_LEDGER_CA_FILE")]
    pub ledger_ca_file: Option<PathBuf>,
    /// Which gateway this is, `<namespace>/<name>` (the operator sets it): its keys in the shared
    /// ledger live under `memgate:<namespace>/<name>:`, and its audit events name it.
    #[arg(long, value_parser = GatewayId::parse)]
    pub gateway_id: Option<GatewayId>,
    /// Deadline of one Nexent ingest call: no unit starts after it (each started unit still gets its
    /// provider timeout); the rest fail the call with 504 `timeout`, retryable.
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub ingest_call_timeout_ms: u64,
    /// In-process ledger: most records kept per provider (never evicting one inside the retry window).
    #[arg(long, default_value_t = DEFAULT_MAX_ENTRIES as u64, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub ledger_max_entries_per_provider: u64,
    /// Most bytes read from one config file (only regular files are read); larger refuses the config.
    #[arg(long, default_value_t = DEFAULT_MAX_FILE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub config_max_file_bytes: u64,
    /// Most bytes read from the config folder and its mounted Secrets together per load.
    #[arg(long, default_value_t = DEFAULT_MAX_TOTAL_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub config_max_total_bytes: u64,
    /// The URL tenants use to reach this gateway (e.g. `https://memgate.example.com`, or the
    /// Service URL in a cluster): OIDC providers' resource URLs are `<URL>/mcp/<provider>` (their
    /// default token audience) and their protected resource metadata is served under it.
    #[arg(long, value_parser = parse_public_url)]
    pub public_url: Option<String>,
    /// Shortest time between two fetches of one issuer's keys (an unknown `kid` triggers a fetch
    /// at most this often).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..))]
    pub jwks_min_refresh_ms: u64,
    /// Where this gateway runs: `cluster` (what the operator renders) also refuses loopback and the
    /// cluster's API server as upstream and identity-provider destinations; `standalone` allows
    /// loopback, for a dev upstream on the same machine. Link-local and cloud-metadata
    /// destinations are refused either way, also when a name resolves to them.
    #[arg(long, value_enum, default_value_t = PlacementArg::Standalone)]
    pub placement: PlacementArg,
    /// The bounds of the listeners.
    #[command(flatten)]
    pub listener: ListenerArgs,
    /// The audit trail.
    #[command(flatten)]
    pub audit: AuditArgs,
}

/// The audit trail (see the README's "Audit and limits").
#[derive(Args, Debug, Clone)]
pub struct AuditArgs {
    /// Write one JSON audit event per search, ingest and MCP tool call to this file (appended,
    /// created 0600), or to standard output with `-` (operational logs stay on standard error);
    /// default: no audit events.
    #[arg(long, value_parser = crate::audit::Destination::parse)]
    pub audit_log: Option<crate::audit::Destination>,
    /// File holding a key (at least 16 bytes; a mounted Secret) for the events' `queryDigest`
    /// (HMAC-SHA256 of the normalised query); default: no digest.
    #[arg(long, requires = "audit_log")]
    pub audit_query_digest_key_file: Option<PathBuf>,
    /// Most events waiting for the writer; when full, events are dropped and counted, never the
    /// call delayed.
    #[arg(long, default_value_t = crate::audit::sink::DEFAULT_QUEUE_EVENTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub audit_queue_events: usize,
}

/// `--placement`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementArg {
    /// A person's machine.
    Standalone,
    /// A Kubernetes pod.
    Cluster,
}

impl From<PlacementArg> for Placement {
    fn from(arg: PlacementArg) -> Placement {
        match arg {
            PlacementArg::Standalone => Placement::Standalone,
            PlacementArg::Cluster => Placement::Cluster,
        }
    }
}

/// The bounds of the listeners (see the README's "Connections and limits").
#[derive(Args, Debug, Clone)]
pub struct ListenerArgs {
    /// Also serve `/healthz`, `/readyz` and `/metrics` on this address, with its own small connection
    /// cap, so probes and scrapes keep working while the data port is saturated.
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// Most open connections on the data port (lowered to keep 256 file descriptors free); more get
    /// a short 503 and are closed.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_connections: usize,
    /// Most requests served at once on the data port; more are answered 503 at once.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_IN_FLIGHT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub max_in_flight: usize,
    /// A complete request head must arrive within this after connecting (any protocol) or after the
    /// previous HTTP/1 response.
    #[arg(long, default_value_t = millis(limits::DEFAULT_HEADER_READ_TIMEOUT), value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub header_read_timeout_ms: u64,
    /// A connection with no request in flight is closed after this (HTTP/2 keep-alive).
    #[arg(long, default_value_t = millis(limits::DEFAULT_IDLE_TIMEOUT), value_parser = clap::value_parser!(u64).range(100..=3_600_000))]
    pub idle_timeout_ms: u64,
    /// A request body must arrive whole within this of its head (408 otherwise).
    #[arg(long, default_value_t = millis(limits::DEFAULT_BODY_READ_TIMEOUT), value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub body_read_timeout_ms: u64,
    /// A response must be sent within this of its head being ready, else the connection is dropped.
    #[arg(long, default_value_t = millis(limits::DEFAULT_WRITE_TIMEOUT), value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub write_timeout_ms: u64,
    /// Most bytes of request head per connection (HTTP/1 buffer, HTTP/2 header list).
    #[arg(long, default_value_t = limits::DEFAULT_MAX_HEADER_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(8192..=1_048_576))]
    pub max_header_bytes: usize,
    /// Most concurrent HTTP/2 streams per connection.
    #[arg(long, default_value_t = limits::DEFAULT_H2_MAX_STREAMS, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub h2_max_streams: u32,
    /// Most bytes of large answers (over 64 KiB each) held at once: upstream answers being read and
    /// answers clients have not read yet; a large answer beyond it gets 503 (retryable) instead of
    /// pinning memory.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_HELD_RESPONSE_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024 * 1024..=16 * 1024 * 1024 * 1024))]
    pub max_held_response_bytes: usize,
    /// Threads serving the data port's connections, each connection on one of them from accept to
    /// close (default: one per CPU the process may use; 0 serves them on the shared runtime).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1024))]
    pub connection_threads: Option<usize>,
    /// After a shutdown signal, how long in-flight requests get to finish.
    #[arg(long, default_value_t = millis(limits::DEFAULT_SHUTDOWN_TIMEOUT), value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub shutdown_timeout_ms: u64,
}

impl ListenerArgs {
    /// The data port's limits, its connection cap lowered to the open-file limit.
    pub fn limits(&self) -> ListenerLimits {
        ListenerLimits {
            max_connections: effective_max_connections(self.max_connections, open_file_limit()),
            max_in_flight: self.max_in_flight,
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms),
            body_read_timeout: Duration::from_millis(self.body_read_timeout_ms),
            write_timeout: Duration::from_millis(self.write_timeout_ms),
            max_header_bytes: self.max_header_bytes,
            h2_max_streams: self.h2_max_streams,
            max_held_response_bytes: self.max_held_response_bytes,
        }
    }
}

/// `duration` in whole milliseconds (for flag defaults).
const fn millis(duration: Duration) -> u64 {
    duration.as_secs() * 1000 + duration.subsec_millis() as u64
}

/// `--public-url`: http(s) with a host, optional path, no user info, query or fragment; the
/// trailing `/` is dropped.
pub fn parse_public_url(raw: &str) -> Result<String, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("not a URL: {e}"))?;
    let clean = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && !raw.contains('"')
        && !raw.contains('\\');
    if !clean {
        return Err("must be an http(s) URL with a host and no user info, query or fragment".into());
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// Parse one `--allowed-origin` value.
pub fn origin_entry(raw: &str) -> Result<String, String> {
    if valid_origin_entry(raw) {
        Ok(raw.trim().to_string())
    } else {
        Err("expected scheme://host[:port] (no path) or null".to_string())
    }
}
