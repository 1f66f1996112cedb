//! `memgate-gateway`: serves a config folder of memory providers over MCP and the Nexent API.
//!
//! ```text
//! memgate-gateway serve --config DIR [--listen ADDR] [--admin-listen ADDR] [--allowed-host H ...]
//!                       [--allowed-origin ORIGIN ...] [--kubeconfig PATH] [--reload-interval-ms N]
//!                       [--nexent-max-limit N] [--ledger redis://HOST:PORT]
//!                       [--public-url URL] [--jwks-min-refresh-ms N]
//!                       [--ledger-max-entries-per-provider N] [--ingest-call-timeout-ms N]
//!                       [--config-max-file-bytes N] [--config-max-total-bytes N]
//!                       [--max-connections N] [--max-in-flight N] [--header-read-timeout-ms N]
//!                       [--idle-timeout-ms N] [--body-read-timeout-ms N] [--write-timeout-ms N]
//!                       [--max-header-bytes N] [--h2-max-streams N] [--shutdown-timeout-ms N]
//! memgate-gateway write-nexent-plugins --config DIR --dest DIR --gateway-url URL
//! memgate-gateway dev-upstream --listen ADDR --api-key KEY     (development aid, not for production)
//! ```
//!
//! Exits non-zero, printing every config problem, when the initial config cannot be loaded. Logs
//! are JSON lines on stderr; the first event with `"message":"listening"` carries the bound
//! address. Environment: `EXTERNAL_MEMORY_SEARCH_ENABLED` / `EXTERNAL_MEMORY_INGEST_ENABLED` (kill
//! switches, default on), `RUST_LOG` (log filter, default `info`), `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (OTLP/HTTP trace export, off when unset; see [`telemetry`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use memgate_crds::source_file::ReadLimits;
use memgate_gateway::auth::keys::KeyStore;
use memgate_gateway::auth::{Authenticator, TokenReviewer};
use memgate_gateway::config::{ConfigHandle, load_dir, load_watched, watch};
use memgate_gateway::engine::{Engine, EngineConfig};
use memgate_gateway::gateway_id::GatewayId;
use memgate_gateway::held_bytes::HeldBytes;
use memgate_gateway::ingest::{DEFAULT_MAX_ENTRIES, DEFAULT_RESULT_TTL, Ledger, MemoryLedger, RedisLedger};
use memgate_gateway::limits::{self, SharedBuckets};
use memgate_gateway::listener::{ConnectionThreads, Listener, threads};
use memgate_gateway::mcp::McpHttpConfig;
use memgate_gateway::redis_store::RedisStore;
use memgate_gateway::serve_args::ServeArgs;
use memgate_gateway::server::{admin_app, data_routes, shutdown_signal};
use memgate_gateway::state::{AppState, KillSwitches, Settings};
use memgate_gateway::telemetry;

#[derive(Parser)]
#[command(name = "memgate-gateway", version, about = "Serves memory providers over MCP and the Nexent API")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the providers of a config folder, reloading it when files change.
    Serve(Box<ServeArgs>),
    /// Run a small in-memory server speaking the self-hosted Mem0 REST routes, for trying memgate
    /// and for tests. Not for production: nothing is persisted and scoring is lexical.
    DevUpstream(DevUpstreamArgs),
    /// Write one Nexent plugin directory per provider serving Nexent into Nexent's plugin folder
    /// (only directories memgate owns are replaced or removed); prints a JSON report.
    WriteNexentPlugins(WritePluginsArgs),
}

#[derive(Args)]
struct WritePluginsArgs {
    /// Config folder, as for `serve`.
    #[arg(long)]
    config: PathBuf,
    /// Nexent's plugin folder (`MEMORY_PROVIDER_PLUGINS_DIR`); must exist.
    #[arg(long)]
    dest: PathBuf,
    /// The gateway's base URL as Nexent's backend reaches it (the plugins' default `gateway_url`).
    #[arg(long)]
    gateway_url: String,
}

#[derive(Args)]
struct DevUpstreamArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:18888")]
    listen: SocketAddr,
    /// Key callers must send as `X-API-Key` (or `Authorization: Bearer`).
    #[arg(long, env = "MEMGATE_DEV_UPSTREAM_API_KEY", hide_env_values = true)]
    api_key: String,
}

/// jemalloc instead of glibc's malloc: per call the gateway allocates and frees many small
/// buffers and a few larger ones, and glibc's fastbin consolidation on each larger request cost
/// about 10 % of the samples at 32 connections. Measured side by side (README "Benchmarks"): less
/// CPU per request at 32 connections, peak and idle RSS within the targets (mimalloc, tried
/// earlier, doubled RSS under large answers).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let telemetry = telemetry::init();
    let result = match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::DevUpstream(args) => dev_upstream(args).await,
        Command::WriteNexentPlugins(args) => write_nexent_plugins(args),
    };
    // Sends the spans still buffered (blocks up to the export timeout, so off the async workers).
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    result
}

fn write_nexent_plugins(args: WritePluginsArgs) -> Result<()> {
    use memgate_gateway::plugin;
    let snapshot = load_dir(&args.config)
        .map_err(|err| anyhow::anyhow!("the config in {} cannot be used: {err}", args.config.display()))?;
    let gateway_url = plugin::gateway_url(&args.gateway_url)?;
    let plugins = plugin::render_all(&snapshot, &gateway_url)?;
    let report = plugin::write_plugins(&args.dest, &plugins)?;
    for name in &report.foreign {
        tracing::warn!(directory = %name, "plugin directory not written: the name is taken by a directory memgate does not own");
    }
    if !report.locked {
        tracing::warn!("the plugin folder could not be locked; wrote without the lock");
    }
    tracing::info!(
        written = report.written.len(),
        unchanged = report.unchanged.len(),
        removed = report.removed.len(),
        foreign = report.foreign.len(),
        "nexent plugins written"
    );
    println!("{}", serde_json::to_string(&report).context("encoding the report")?);
    Ok(())
}

async fn dev_upstream(args: DevUpstreamArgs) -> Result<()> {
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    let address = listener.local_addr().context("reading the bound address")?;
    tracing::info!(address = %address, "listening");
    tokio::select! {
        served = memgate_gateway::dev_upstream::serve(listener, args.api_key) => served.context("serving the dev upstream"),
        () = shutdown_signal() => Ok(()),
    }
}

/// `state` auditing as `--audit-log` asks (unchanged without it).
fn with_audit(state: AppState, args: &ServeArgs) -> Result<AppState> {
    use memgate_gateway::audit::{AuditLog, Auditor, DigestKey};
    let Some(destination) = &args.audit.audit_log else { return Ok(state) };
    let key = match &args.audit.audit_query_digest_key_file {
        Some(path) => {
            let raw = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(DigestKey::new(&raw).map_err(|err| anyhow::anyhow!("--audit-query-digest-key-file: {err}"))?)
        }
        None => None,
    };
    let log = AuditLog::start(destination, args.audit.audit_queue_events, state.metrics().audit_counters())
        .context("opening the audit log")?;
    tracing::info!(query_digest = key.is_some(), "audit events on");
    let gateway = args.gateway_id.as_ref().map(ToString::to_string);
    Ok(state.with_auditor(Auditor::new(log, key, gateway)))
}

async fn serve(args: ServeArgs) -> Result<()> {
    let limits =
        ReadLimits { max_file_bytes: args.config_max_file_bytes, max_total_bytes: args.config_max_total_bytes };
    let (snapshot, loaded) = load_watched(&args.config, limits)
        .map_err(|err| anyhow::anyhow!("the config in {} cannot be served: {err}", args.config.display()))?;
    tracing::info!(providers = snapshot.providers.len(), disabled = snapshot.disabled.len(), "config loaded");
    let handle = Arc::new(ConfigHandle::new(snapshot));

    let placement = args.placement.into();
    // One budget of large answer bytes: upstream answers being read and answers not yet sent.
    let held = HeldBytes::new(args.listener.max_held_response_bytes);
    let engine = Engine::new(EngineConfig { placement, ..EngineConfig::default() })
        .context("setting up the upstream HTTP client")?
        .with_held_bytes(held.clone());
    let kube = kube_client(args.kubeconfig.as_deref()).await?;
    let reviewer = kube.clone().map(TokenReviewer::new);
    let keys = KeyStore::with_placement(kube, Duration::from_millis(args.jwks_min_refresh_ms), placement)
        .context("setting up the identity provider HTTP client")?;
    if args.public_url.is_none() {
        tracing::info!("no --public-url: OIDC providers need explicit audiences and publish no resource metadata");
    }
    let auth = Authenticator::new(reviewer).with_keys(keys).with_public_url(args.public_url.clone());
    let switches = KillSwitches::from_env();
    tracing::info!(search_enabled = switches.search, ingest_enabled = switches.ingest, "kill switches");
    let ingest_call_timeout = Duration::from_millis(args.ingest_call_timeout_ms);
    let settings = Settings { nexent_max_limit: args.nexent_max_limit, switches, ingest_call_timeout };
    let ca = match &args.ledger_ca_file {
        Some(path) => Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?),
        None => None,
    };
    let ledger: Arc<dyn Ledger> = match args.ledger.as_deref() {
        Some(url) => {
            let ledger = RedisLedger::with_ca(url, ca.clone()).map_err(|err| anyhow::anyhow!("--ledger: {err}"))?;
            Arc::new(match &args.gateway_id {
                Some(id) => ledger.for_gateway(id),
                None => ledger,
            })
        }
        None => {
            let per_provider = usize::try_from(args.ledger_max_entries_per_provider).unwrap_or(DEFAULT_MAX_ENTRIES);
            Arc::new(MemoryLedger::new(DEFAULT_RESULT_TTL, per_provider))
        }
    };
    tracing::info!(ledger = if args.ledger.is_some() { "redis" } else { "memory" }, "ingest ledger");
    let mut state = AppState::new(Arc::clone(&handle), engine, auth, settings).with_ledger(ledger);
    if let Some(url) = args.ledger.as_deref() {
        let store = RedisStore::open(url, ca, limits::shared::COMMAND_TIMEOUT)
            .map_err(|err| anyhow::anyhow!("--ledger: {err}"))?;
        let prefix = args.gateway_id.as_ref().map_or_else(|| "memgate:".to_string(), GatewayId::redis_prefix);
        state = state.with_shared_limits(SharedBuckets::new(store, &prefix));
    }
    let state = Arc::new(with_audit(state, &args)?);

    let interval = Duration::from_millis(args.reload_interval_ms);
    let watcher = tokio::spawn(watch(handle, args.config.clone(), interval, limits, loaded));
    let bounds = args.listener.limits();
    if bounds.max_connections < args.listener.max_connections {
        tracing::warn!(
            max_connections = bounds.max_connections,
            "--max-connections lowered to keep file descriptors free under the open-file limit"
        );
    }
    let drain = Duration::from_millis(args.listener.shutdown_timeout_ms);
    let admin = match args.listener.admin_listen {
        Some(address) => {
            let socket = bind(address).await?;
            tracing::info!(address = %socket.local_addr().context("reading the bound address")?, "admin listening");
            Some(Listener::new("admin", socket, admin_app(Arc::clone(&state)), bounds.admin()))
        }
        None => None,
    };
    let socket = bind(args.listen).await?;
    let address = socket.local_addr().context("reading the bound address")?;
    tracing::info!(
        address = %address,
        max_connections = bounds.max_connections,
        max_in_flight = bounds.max_in_flight,
        "listening"
    );
    let mcp_http = McpHttpConfig { allowed_hosts: args.allowed_hosts, allowed_origins: args.allowed_origins };
    let (router, direct) = data_routes(state, mcp_http);
    let mut data = Listener::new("data", socket, router, bounds).with_held_bytes(held).with_direct(direct);
    let count = args.listener.connection_threads.unwrap_or_else(threads::default_count);
    if count > 0 {
        let threads = ConnectionThreads::start("data", count).context("starting the connection threads")?;
        tracing::info!(connection_threads = threads.len(), "connections served on their own threads");
        data = data.with_connection_threads(threads);
    }

    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    });
    let serve_admin = async {
        if let Some(admin) = admin {
            admin.run(stopping.clone(), drain).await;
        }
    };
    tokio::join!(data.run(stopping.clone(), drain), serve_admin);
    watcher.abort();
    tracing::info!("stopped");
    Ok(())
}

async fn bind(address: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(address).await.with_context(|| format!("listening on {address}"))
}

/// The client for TokenReview: from `--kubeconfig` (which must work), else in-cluster when in a pod
/// and usable, else none (ServiceAccount callers are then refused with 503).
async fn kube_client(kubeconfig: Option<&Path>) -> Result<Option<kube::Client>> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => match kube::Config::incluster() {
            Ok(config) => config,
            Err(_) => {
                // E.g. no ServiceAccount token mounted: providers without ServiceAccount access still work.
                tracing::warn!("in-cluster Kubernetes config unusable: ServiceAccount tokens cannot be reviewed");
                return Ok(None);
            }
        },
        None => {
            tracing::info!("no Kubernetes API configured: ServiceAccount tokens cannot be reviewed");
            return Ok(None);
        }
    };
    Ok(Some(kube::Client::try_from(config).context("building the Kubernetes client")?))
}
