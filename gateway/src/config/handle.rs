//! The live config: the current snapshot, swapped atomically on reload.
//!
//! In-flight requests hold an `Arc` of the provider they started with, so a reload never drops or
//! changes a request that is already running. A reload that fails keeps the last good snapshot and
//! records why (readiness reports it, the log says it).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use super::build::build_snapshot;
use memgate_crds::source_file::ReadLimits;

use super::files::{LoadError, Sources, failure_fingerprint, read_sources_with};
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

/// Poll `dir` (and the Secret folders it names) every `interval`; rebuild when anything changed.
/// Each poll reads every file once: the same read gives the fingerprint and, when it changed, the
/// documents the new snapshot is built from. Files are read within `limits`. Runs until the task is
/// dropped.
pub async fn watch(handle: Arc<ConfigHandle>, dir: PathBuf, interval: Duration, limits: ReadLimits) {
    let (mut last, _) = read_blocking(dir.clone(), limits).await;
    loop {
        tokio::time::sleep(interval).await;
        let (now, read) = read_blocking(dir.clone(), limits).await;
        if now == last {
            continue;
        }
        last = now;
        let built = read.and_then(|sources| Ok(build_snapshot(&sources.documents, &sources.mounted)?));
        match built {
            Ok(snapshot) => {
                let providers = snapshot.providers.len();
                handle.replace(snapshot);
                tracing::info!(providers, "config reloaded");
            }
            Err(err) => {
                tracing::warn!(error = %err, "config reload failed; still serving the last good config");
                handle.record_failure(err.to_string());
            }
        }
    }
}

/// One read of the folder off the async threads, with its fingerprint.
async fn read_blocking(dir: PathBuf, limits: ReadLimits) -> (u64, Result<Sources, LoadError>) {
    let read = tokio::task::spawn_blocking(move || read_sources_with(&dir, limits)).await;
    match read {
        Ok(Ok(sources)) => (sources.fingerprint, Ok(sources)),
        Ok(Err(err)) => (failure_fingerprint(&err), Err(err)),
        Err(join) => {
            let err = LoadError::Io { path: "<config folder>".into(), message: join.to_string() };
            (failure_fingerprint(&err), Err(err))
        }
    }
}
