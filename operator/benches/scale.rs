//! Operator scale benchmark (not a test): `cargo bench -p memgate-operator --bench scale`.
//!
//! Starts its own kube-apiserver + etcd with the audit log on, runs the release operator as its
//! ServiceAccount (bound to `operator/rbac/operator-rbac.yaml`, cluster-wide, production lease
//! timings), creates MemoryProviders and their Secrets as fast as the admin can, simulates the
//! gateway rollouts, then leaves the state unchanged for a while. It measures the time until every
//! provider is Accepted and ResolvedRefs, then Ready; every request of the operator (from the audit
//! log), by phase, verb and resource; the operator's memory and CPU. Progress goes to stderr, the
//! tables to stdout.
//!
//! Sizes from the environment: `MEMGATE_BENCH_PROVIDERS` (500), `MEMGATE_BENCH_NAMESPACES` (50),
//! `MEMGATE_BENCH_QUIET_SECONDS` (60), `MEMGATE_BENCH_RESYNC_SECONDS` (30, so the quiet window
//! holds resyncs), `MEMGATE_BENCH_CONCURRENCY` (16 creates in flight), `MEMGATE_BENCH_PATIENCE_SECONDS`
//! (900, per phase); `MEMGATE_BENCH_KEEP=1` keeps the audit and operator logs. Needs the
//! control-plane binaries (`KUBEBUILDER_ASSETS` or the cache of
//! `e2e/control-plane/provide.sh`).

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "scale/audit.rs"]
mod audit;
#[path = "scale/process.rs"]
mod process;
#[path = "scale/report.rs"]
mod report;
#[path = "scale/tracker.rs"]
mod tracker;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use memgate_e2e::ControlPlane;
use serde_json::json;

use crate::process::Operator;
use crate::report::{Mark, Outcome};
use crate::tracker::Tracker;
use memgate_e2e::procfs::Memory;

/// The operator's lease timings when no flag is given (the benchmark passes none).
const LEASE_SECONDS: (u64, u64) = (15, 5);

/// How long after the last provider is Ready before the quiet window opens (trailing Events).
const SETTLE: Duration = Duration::from_secs(5);

/// How often the namespaces with providers not Ready yet are checked for a Deployment changed
/// since its simulated rollout (which is then simulated again).
const RESIMULATE_AFTER: Duration = Duration::from_secs(5);

/// The sizes of one run.
#[derive(Debug, Clone)]
pub struct Sizes {
    /// MemoryProviders (each with its own Secret).
    pub providers: usize,
    /// Namespaces they are spread over, round robin.
    pub namespaces: usize,
    /// Seconds of unchanged state measured at the end.
    pub quiet: Duration,
    /// The operator's `--resync-seconds`.
    pub resync_seconds: u64,
    /// Creates in flight at once.
    pub concurrency: usize,
    /// Longest any one phase may take.
    pub patience: Duration,
}

impl Sizes {
    fn from_env() -> Result<Sizes> {
        let sizes = Sizes {
            providers: env_number("MEMGATE_BENCH_PROVIDERS", 500)?,
            namespaces: env_number("MEMGATE_BENCH_NAMESPACES", 50)?,
            quiet: Duration::from_secs(env_number("MEMGATE_BENCH_QUIET_SECONDS", 60)?),
            resync_seconds: env_number("MEMGATE_BENCH_RESYNC_SECONDS", 30)?,
            concurrency: env_number("MEMGATE_BENCH_CONCURRENCY", 16)?,
            patience: Duration::from_secs(env_number("MEMGATE_BENCH_PATIENCE_SECONDS", 900)?),
        };
        ensure!(sizes.namespaces >= 1 && sizes.providers >= sizes.namespaces, "need providers >= namespaces >= 1");
        ensure!(sizes.resync_seconds >= 1 && sizes.concurrency >= 1, "resync and concurrency must be at least 1");
        Ok(sizes)
    }
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> Result<T> {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().map_err(|_| anyhow::anyhow!("{name}={value:?} is not a whole number")),
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(e) => bail!("{name}: {e}"),
    }
}

fn progress(message: &str) {
    eprintln!("scale: {message}");
}

fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sizes = Sizes::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting Tokio")?;
    let outcome = runtime.block_on(run(&sizes))?;
    print!("{}", report::render(&sizes, &outcome));
    Ok(())
}

/// The whole run: control plane, operator, phases, audit log.
async fn run(sizes: &Sizes) -> Result<Outcome> {
    let load_before = report::load_average();
    let dir = tempfile::Builder::new().prefix("memgate-scale-").tempdir()?;
    let (cp, audit_log) = start_control_plane(dir.path()).await?;
    let admin = cp.client()?;
    support::install_crds(&admin).await?;
    let home = cp.new_namespace("memgate-bench").await?;
    let mut namespaces = Vec::with_capacity(sizes.namespaces);
    for i in 0..sizes.namespaces {
        namespaces.push(cp.new_namespace(&format!("team-{i:03}")).await?);
    }
    let (cluster_role, role) = support::rbac()?;
    let kubeconfig = support::operator_identity(&cp, &admin, &home, cluster_role, role, dir.path()).await?;
    let username = format!("system:serviceaccount:{home}:memgate-operator");
    let tracker = Tracker::start(&admin);

    progress(&format!("starting the operator as {username}"));
    let mut marks = Vec::new();
    let args = operator_args(&home, sizes);
    let started = Instant::now();
    let start_at = Timestamp::now();
    let mut operator = Operator::start(&kubeconfig, dir.path().join("operator.log"), &args).await?;
    marks.push(Mark::at("startup", start_at, started, &operator).await?);
    operator.wait_leading(sizes.patience).await?;
    progress(&format!("operator synced and leading after {:.1} s", started.elapsed().as_secs_f64()));

    let created = Mark::now("create", &operator).await?;
    marks.push(created.clone());
    let creates_issued = create_all(&admin, &namespaces, sizes).await?;
    progress(&format!("{} providers and Secrets created in {:.1} s", sizes.providers, creates_issued.as_secs_f64()));
    tracker.wait("Accepted=True and ResolvedRefs=True", |p| p.accepted >= sizes.providers, sizes.patience).await?;
    operator.check_running()?;
    let accepted = Mark::now("rollout", &operator).await?;
    progress(&format!("all Accepted and ResolvedRefs after {:.1} s", accepted.seconds_since(&created)));
    marks.push(accepted.clone());

    let resimulated = roll_out(&admin, &tracker, &namespaces, sizes).await?;
    let ready = Mark::now("settle", &operator).await?;
    progress(&format!("all Ready {:.1} s after the first rollout", ready.seconds_since(&accepted)));
    marks.push(ready.clone());
    tokio::time::sleep(SETTLE).await;

    marks.push(Mark::now("quiet", &operator).await?);
    progress(&format!("quiet window: {} s of unchanged state", sizes.quiet.as_secs()));
    tokio::time::sleep(sizes.quiet).await;
    operator.check_running()?;
    marks.push(Mark::now("end", &operator).await?);
    ensure!(tracker.progress().ready >= sizes.providers, "a provider left Ready during the quiet window");

    // The API server writes each event before answering; a short pause lets the last ones land.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = audit::read(&audit_log, &username)?;
    progress(&format!("{} operator requests in the audit log", log.requests.len()));
    if std::env::var_os("MEMGATE_BENCH_KEEP").is_some() {
        let kept = dir.keep();
        progress(&format!("kept the audit log and the operator log in {}", kept.display()));
    }
    Ok(Outcome {
        marks,
        log,
        creates_issued,
        resimulated,
        final_metrics: operator.metrics().await?,
        load_before,
        load_after: report::load_average(),
        memory_at_rest: operator.memory().unwrap_or(Memory::default()),
        lease_seconds: LEASE_SECONDS,
    })
}

/// A control plane whose API server audits every ServiceAccount request to a file; that file.
async fn start_control_plane(dir: &Path) -> Result<(ControlPlane, std::path::PathBuf)> {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, audit::POLICY)?;
    let log = dir.join("audit.log");
    progress("starting kube-apiserver + etcd with the audit log on");
    let cp = ControlPlane::builder()
        .apiserver_arg(format!("--audit-policy-file={}", policy.display()))
        .apiserver_arg(format!("--audit-log-path={}", log.display()))
        .apiserver_arg("--audit-log-format=json")
        .apiserver_arg("--audit-log-mode=blocking")
        // lumberjack would rotate at its default of 100 MB; one file holds the whole run.
        .apiserver_arg("--audit-log-maxsize=100000")
        .start()
        .await?;
    Ok((cp, log))
}

fn operator_args(home: &str, sizes: &Sizes) -> Vec<String> {
    ["--leader-election-namespace", home, "--resync-seconds", &sizes.resync_seconds.to_string()]
        .map(String::from)
        .to_vec()
}

/// Provider `i` and its Secret go to namespace `i mod namespaces`.
async fn create_all(admin: &Client, namespaces: &[String], sizes: &Sizes) -> Result<Duration> {
    let started = Instant::now();
    futures::stream::iter(0..sizes.providers)
        .map(Ok)
        .try_for_each_concurrent(sizes.concurrency, |i| async move {
            let namespace = &namespaces[i % namespaces.len()];
            let secret = format!("mem0-api-{i:04}");
            let value = format!("bench-key-{i:04}");
            support::apply(admin, support::secret(namespace, &secret, &[("api-key", &value)])).await?;
            support::apply(admin, support::provider(namespace, &format!("memory-{i:04}"), &secret, json!({}))).await?;
            anyhow::Ok(())
        })
        .await?;
    Ok(started.elapsed())
}

/// Simulate every namespace's rollout, again for those not Ready after a while, until all are;
/// how many simulations were repeated.
async fn roll_out(admin: &Client, tracker: &Tracker, namespaces: &[String], sizes: &Sizes) -> Result<usize> {
    let started = Instant::now();
    simulate(admin, namespaces, sizes.concurrency).await?;
    let mut repeated = 0;
    loop {
        let all_ready = |p: &tracker::Progress| p.ready >= sizes.providers;
        if tracker.wait("Ready=True", all_ready, RESIMULATE_AFTER).await.is_ok() {
            return Ok(repeated);
        }
        if started.elapsed() > sizes.patience {
            bail!("not every provider was Ready within {:?}: {:?}", sizes.patience, tracker.progress());
        }
        let mut stale = Vec::new();
        for namespace in tracker.namespaces_not_ready() {
            if rollout_stale(admin, &namespace).await? {
                stale.push(namespace);
            }
        }
        if !stale.is_empty() {
            progress(&format!("simulating the rollout again in {} namespaces", stale.len()));
            repeated += stale.len();
            simulate(admin, &stale, sizes.concurrency).await?;
        }
    }
}

/// Whether the gateway Deployment of `namespace` changed since its rollout was last simulated.
async fn rollout_stale(admin: &Client, namespace: &str) -> Result<bool> {
    let Some(deployment) = support::get(admin, "Deployment", Some(namespace), "memgate-gateway").await? else {
        return Ok(false);
    };
    let generation = deployment.metadata.generation.unwrap_or_default();
    let observed = deployment.data.pointer("/status/observedGeneration").and_then(serde_json::Value::as_i64);
    Ok(observed.unwrap_or_default() < generation)
}

async fn simulate(admin: &Client, namespaces: &[String], concurrency: usize) -> Result<()> {
    futures::stream::iter(namespaces)
        .map(Ok)
        .try_for_each_concurrent(concurrency, |namespace| support::simulate_rollout(admin, namespace))
        .await
}
