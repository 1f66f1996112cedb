//! `memgate-gateway`: serves a config folder of memory providers over MCP and the Nexent API.
//!
//! ```text
//! memgate-gateway serve --config DIR [--listen ADDR] [--allowed-host H ...] [--kubeconfig PATH]
//!                       [--reload-interval-ms N] [--nexent-max-limit N] [--ledger redis://HOST:PORT]
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
use memgate_gateway::auth::{Authenticator, TokenReviewer};
use memgate_gateway::config::{ConfigHandle, load_dir, watch};
use memgate_gateway::engine::{Engine, EngineConfig};
use memgate_gateway::ingest::{Ledger, MemoryLedger, RedisLedger};
use memgate_gateway::server::{app, shutdown_signal};
use memgate_gateway::state::{AppState, DEFAULT_NEXENT_MAX_LIMIT, KillSwitches, Settings};
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
    Serve(ServeArgs),
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

#[derive(Args)]
struct ServeArgs {
    /// Config folder: MemoryProviders, DialectPresets, Secrets or SecretMounts as YAML.
    #[arg(long)]
    config: PathBuf,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// `Host` header value accepted on `/mcp/*` (repeat for several); default: loopback names only.
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Kubeconfig used for TokenReview; default: the in-cluster config when running in a pod.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// How often the config folder and mounted Secrets are checked for changes.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(10..))]
    reload_interval_ms: u64,
    /// Largest Nexent `limit` honoured (larger ones are capped).
    #[arg(long, default_value_t = DEFAULT_NEXENT_MAX_LIMIT, value_parser = clap::value_parser!(u32).range(1..=1000))]
    nexent_max_limit: u32,
    /// Ingest idempotency ledger shared by replicas: `redis://[:password@]host:port[/db]`; default:
    /// in-process (one replica). Prefer the environment variable when the URL holds a password.
    #[arg(long, env = "MEMGATE_INGEST_LEDGER", hide_env_values = true)]
    ledger: Option<String>,
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let telemetry = telemetry::init();
    let result = match cli.command {
        Command::Serve(args) => serve(args).await,
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

async fn serve(args: ServeArgs) -> Result<()> {
    let snapshot = load_dir(&args.config)
        .map_err(|err| anyhow::anyhow!("the config in {} cannot be served: {err}", args.config.display()))?;
    tracing::info!(providers = snapshot.providers.len(), disabled = snapshot.disabled.len(), "config loaded");
    let handle = Arc::new(ConfigHandle::new(snapshot));

    let engine = Engine::new(EngineConfig::default()).context("setting up the upstream HTTP client")?;
    let reviewer = kube_client(args.kubeconfig.as_deref()).await?.map(TokenReviewer::new);
    let switches = KillSwitches::from_env();
    tracing::info!(search_enabled = switches.search, ingest_enabled = switches.ingest, "kill switches");
    let settings = Settings { nexent_max_limit: args.nexent_max_limit, switches };
    let ledger: Arc<dyn Ledger> = match args.ledger.as_deref() {
        Some(url) => Arc::new(RedisLedger::new(url).map_err(|err| anyhow::anyhow!("--ledger: {err}"))?),
        None => Arc::new(MemoryLedger::default()),
    };
    tracing::info!(ledger = if args.ledger.is_some() { "redis" } else { "memory" }, "ingest ledger");
    let state = Arc::new(
        AppState::new(Arc::clone(&handle), engine, Authenticator::new(reviewer), settings).with_ledger(ledger),
    );

    let watcher = tokio::spawn(watch(handle, args.config.clone(), Duration::from_millis(args.reload_interval_ms)));
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    let address = listener.local_addr().context("reading the bound address")?;
    tracing::info!(address = %address, "listening");
    axum::serve(listener, app(state, args.allowed_hosts))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving HTTP")?;
    watcher.abort();
    tracing::info!("stopped");
    Ok(())
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
