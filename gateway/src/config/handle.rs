//! The live config: the current snapshot, swapped atomically on reload.
//!
//! In-flight requests hold an `Arc` of the provider they started with, so a reload never drops or
//! changes a request that is already running. A reload that fails keeps the last good snapshot and
//! records why (readiness reports it, the log says it).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use super::files::{fingerprint, load_dir};
use super::model::Snapshot;

/// What the last reload attempt did.
#[derive(Debug, Clone)]
pub struct ReloadStatus {
    /// Snapshots installed so far (1 after start).
    pub generation: u64,
    /// When the current snapshot was installed.
    pub loaded_at: SystemTime,
    /// Why the newest config on disk is not being served, if it is not.
    pub last_error: Option<String>,
}

/// The current snapshot and reload status.
#[derive(Debug)]
pub struct ConfigHandle {
    current: RwLock<Arc<Snapshot>>,
    status: RwLock<ReloadStatus>,
}

impl ConfigHandle {
    /// Start with `snapshot`.
    pub fn new(snapshot: Snapshot) -> Self {
        ConfigHandle {
            current: RwLock::new(Arc::new(snapshot)),
            status: RwLock::new(ReloadStatus { generation: 1, loaded_at: SystemTime::now(), last_error: None }),
        }
    }

    /// The snapshot to serve a request with.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The last reload outcome.
    pub fn status(&self) -> ReloadStatus {
        self.status.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Install a new snapshot.
    pub fn replace(&self, snapshot: Snapshot) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(snapshot);
        let mut status = self.status.write().unwrap_or_else(|p| p.into_inner());
        status.generation += 1;
        status.loaded_at = SystemTime::now();
        status.last_error = None;
    }

    /// Record a failed reload; the current snapshot stays.
    pub fn record_failure(&self, error: String) {
        self.status.write().unwrap_or_else(|p| p.into_inner()).last_error = Some(error);
    }
}

/// Poll `dir` (and the Secret folders it names) every `interval`; reload when anything changed.
/// Runs until the task is dropped.
pub async fn watch(handle: Arc<ConfigHandle>, dir: PathBuf, interval: Duration) {
    let mut last = fingerprint_blocking(dir.clone()).await;
    loop {
        tokio::time::sleep(interval).await;
        let now = fingerprint_blocking(dir.clone()).await;
        if now == last {
            continue;
        }
        last = now;
        let load_dir_path = dir.clone();
        let loaded = tokio::task::spawn_blocking(move || load_dir(&load_dir_path)).await;
        match loaded {
            Ok(Ok(snapshot)) => {
                let providers = snapshot.providers.len();
                handle.replace(snapshot);
                tracing::info!(providers, "config reloaded");
            }
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "config reload failed; still serving the last good config");
                handle.record_failure(err.to_string());
            }
            Err(join) => tracing::error!(error = %join, "config reload task failed"),
        }
    }
}

async fn fingerprint_blocking(dir: PathBuf) -> u64 {
    tokio::task::spawn_blocking(move || fingerprint(&dir)).await.unwrap_or_default()
}
