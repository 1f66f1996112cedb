//! The operator process under measurement: started as its ServiceAccount with production lease
//! timings (support's `Operator` shortens them and hides the pid), its memory and CPU read from
//! `/proc/<pid>`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};

use memgate_e2e::procfs::{self, Memory};

use crate::support;

/// A running `memgate-operator run`.
pub struct Operator {
    child: Child,
    pid: u32,
    log: PathBuf,
    /// `host:port` of `/metrics` and `/readyz`.
    pub address: String,
}

/// The operator binary: `$MEMGATE_RELEASE_DIR/memgate-operator` (bench/run.sh points it at copies
/// of the image's release build), else the one cargo built for this bench.
fn binary() -> PathBuf {
    match std::env::var_os("MEMGATE_RELEASE_DIR") {
        Some(dir) => PathBuf::from(dir).join("memgate-operator"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_memgate-operator")),
    }
}

impl Operator {
    /// Start the operator with `KUBECONFIG=kubeconfig` and `args` after `run`; wait until it listens.
    pub async fn start(kubeconfig: &Path, log: PathBuf, args: &[String]) -> Result<Operator> {
        let file = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(binary())
            .arg("run")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAMESPACE")
            .env_remove("POD_NAME")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .context("starting memgate-operator")?;
        let pid = child.id().context("the operator's pid")?;
        let mut operator = Operator { child, pid, log, address: String::new() };
        operator.address = operator.wait_listening().await?;
        Ok(operator)
    }

    async fn wait_listening(&mut self) -> Result<String> {
        let started = Instant::now();
        loop {
            if let Some(address) = support::listening_address(&self.log) {
                return Ok(address);
            }
            self.check_running()?;
            if started.elapsed() > support::PATIENCE {
                bail!("memgate-operator never logged its address; log {}", self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Fail when the process has exited.
    pub fn check_running(&mut self) -> Result<()> {
        match self.child.try_wait()? {
            None => Ok(()),
            Some(status) => bail!("memgate-operator exited ({status}); log {}", self.log.display()),
        }
    }

    /// Wait until `/readyz` answers 200 (every watch listed) and the process leads.
    pub async fn wait_leading(&mut self, patience: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            self.check_running()?;
            let ready = support::http_get(&self.address, "/readyz").await.is_ok_and(|b| b.trim() == "ok");
            if ready && self.metric("memgate_operator_leader").await? == 1.0 {
                return Ok(());
            }
            if started.elapsed() > patience {
                bail!("memgate-operator neither synced nor led within {patience:?}; log {}", self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> Result<String> {
        support::http_get(&self.address, "/metrics").await
    }

    /// One series of `/metrics` (0 when absent).
    pub async fn metric(&self, series: &str) -> Result<f64> {
        Ok(support::metric_value(&self.metrics().await?, series))
    }

    /// `VmRSS` and `VmHWM` now.
    pub fn memory(&self) -> Result<Memory> {
        Ok(procfs::memory(self.pid)?)
    }

    /// CPU seconds used so far (user + system).
    pub fn cpu_seconds(&self) -> Result<f64> {
        Ok(procfs::cpu_time(self.pid)?.as_secs_f64())
    }
}
