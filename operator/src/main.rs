//! `memgate-operator`: reconciles MemoryProviders into gateways (`run`), prints the CRDs (`crds`)
//! and validates memgate YAML offline (`validate`).
//!
//! `run` logs JSON lines on stderr; its first event with `"message":"listening"` carries the
//! address of `/metrics`, `/healthz` and `/readyz`. It connects to the API server with the
//! in-cluster ServiceAccount, or `KUBECONFIG` / `~/.kube/config` outside a cluster.

mod offline;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use memgate_crds::source_file::{DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_TOTAL_BYTES, ReadLimits};
use memgate_crds::validation::destination::{AllowedDestinations, Placement};
use memgate_operator::http::{self, Health};
use memgate_operator::metrics::Metrics;
use memgate_operator::settings::{RunArgs, Settings};
use memgate_operator::{controller, telemetry};

/// The memgate operator.
#[derive(Parser)]
#[command(name = "memgate-operator", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reconcile MemoryProviders and DialectPresets into gateways until stopped.
    Run(Box<RunArgs>),
    /// Print both CustomResourceDefinitions as YAML.
    Crds,
    /// Validate DialectPresets and MemoryProviders in files or folders, offline.
    ///
    /// Exit status: 0 all valid, 1 any invalid, 2 unreadable or unparsable input.
    Validate {
        /// YAML files or folders (searched recursively for *.yaml and *.yml; only regular files are read).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Most bytes read from one file; a larger file is unreadable input (exit 2).
        #[arg(long, default_value_t = DEFAULT_MAX_FILE_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
        max_file_bytes: u64,
        /// Most bytes read from all files together; past it the run stops as unreadable input (exit 2).
        #[arg(long, default_value_t = DEFAULT_MAX_TOTAL_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
        max_total_bytes: u64,
        /// The objects are a standalone gateway's config folder (loopback destinations allowed), not
        /// for a cluster.
        #[arg(long)]
        standalone: bool,
        /// A destination the operator allows (its `--allowed-upstream-origin` list: a host, `*.suffix` or a
        /// CIDR; repeat): providers naming anything else are refused as the operator would.
        #[arg(long = "allowed-upstream-origin")]
        allowed_origins: Vec<String>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => {
            let telemetry = telemetry::init();
            let outcome = tokio::runtime::Runtime::new()
                .context("starting the async runtime")
                .and_then(|runtime| runtime.block_on(run(*args)));
            // Sends the reconcile spans still buffered (bounded by the export timeout).
            telemetry.shutdown();
            match outcome {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!(error = format!("{error:#}"), "memgate-operator stopped");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Crds => match memgate_crds::crd::render_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: rendering the CRDs failed: {err}");
                ExitCode::from(2)
            }
        },
        Command::Validate { paths, max_file_bytes, max_total_bytes, standalone, allowed_origins } => {
            let limits = ReadLimits { max_file_bytes, max_total_bytes };
            let allowed = match AllowedDestinations::parse(allowed_origins.iter().map(String::as_str)) {
                Ok(allowed) => allowed,
                Err(entry) => {
                    eprintln!("error: --allowed-upstream-origin \"{entry}\" is not a host, *.suffix or CIDR");
                    return ExitCode::from(2);
                }
            };
            let placement = if standalone { Placement::Standalone } else { Placement::Cluster };
            let report = offline::validate_paths(&paths, limits, &offline::Options { placement, allowed });
            for line in &report.lines {
                println!("{line}");
            }
            eprintln!("{}", report.summary());
            ExitCode::from(report.exit_code())
        }
    }
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let settings = Settings::try_from(args)?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API (in-cluster ServiceAccount, or KUBECONFIG)")?;
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let listener = tokio::net::TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("listening on {}", settings.listen))?;
    let address = listener.local_addr().context("reading the bound address")?;
    tracing::info!(address = %address, "listening");
    let app = http::app(Arc::clone(&metrics), Arc::clone(&health));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let outcome = controller::run(client, settings, metrics, health, shutdown_signal()).await;
    server.abort();
    outcome.context("reconciling")?;
    tracing::info!("stopped");
    Ok(())
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
