//! The live config: the current snapshot, swapped atomically on reload.
//!
//! In-flight requests hold an `Arc` of the provider they started with, so a reload never drops or
//! changes a request that is already running. A reload that fails keeps the last good snapshot and
//! records why (readiness reports it, the log says it).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use super::build::build_snapshot;
use memgate_crds::source_file::ReadLimits;

use super::files::{LoadError, Sources, failure_fingerprint, metadata_fingerprint, read_sources_with};
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

/// How often the watcher reads everything even though no metadata changed: once a minute (every
/// 30th poll at the default 2 s), for the rewrites [`metadata_fingerprint`] cannot see.
pub const FULL_READ_EVERY: Duration = Duration::from_secs(60);

/// Poll `dir` (and the Secret folders it names) every `interval`; rebuild when anything changed.
///
/// A poll first takes the [`metadata_fingerprint`] of everything the last read depended on (no
/// file is read). Only when it changed, the last read failed, or [`FULL_READ_EVERY`] has passed
/// since the last full read, the poll reads every file once within `limits`: that one read gives
/// the content fingerprint, which decides whether to rebuild (a touched but unchanged file does
/// not reload), and the documents the new snapshot is built from. The metadata is taken before the
/// read, so a change during the read is seen at the next poll. Runs until the task is dropped.
pub async fn watch(handle: Arc<ConfigHandle>, dir: PathBuf, interval: Duration, limits: ReadLimits) {
    let mut poll = Poll::default();
    let metadata = metadata_blocking(dir.clone(), Vec::new()).await;
    let (mut last, read) = read_blocking(dir.clone(), limits).await;
    poll.record(metadata, &read, Instant::now());
    loop {
        tokio::time::sleep(interval).await;
        let metadata = metadata_blocking(dir.clone(), poll.secret_dirs.clone()).await;
        if !poll.must_read(metadata, Instant::now()) {
            continue;
        }
        let (now, read) = read_blocking(dir.clone(), limits).await;
        poll.record(metadata, &read, Instant::now());
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

/// What the last full read of the folder left for deciding whether to read again.
#[derive(Debug, Default)]
struct Poll {
    /// The metadata fingerprint taken just before it (`None`: could not be taken).
    metadata: Option<u64>,
    /// Whether it succeeded (`false` before the first read).
    read_ok: bool,
    /// When it finished.
    at: Option<Instant>,
    /// The Secret folders the last successful read named.
    secret_dirs: Vec<PathBuf>,
}

impl Poll {
    /// Whether a poll whose metadata fingerprint is `metadata` must read the folder in full.
    fn must_read(&self, metadata: Option<u64>, now: Instant) -> bool {
        let stale = self.at.is_none_or(|at| now.saturating_duration_since(at) >= FULL_READ_EVERY);
        !self.read_ok || metadata.is_none() || metadata != self.metadata || stale
    }

    /// Note a full read, taken after the metadata fingerprint `metadata`.
    fn record(&mut self, metadata: Option<u64>, read: &Result<Sources, LoadError>, now: Instant) {
        self.metadata = metadata;
        self.at = Some(now);
        self.read_ok = read.is_ok();
        if let Ok(sources) = read {
            self.secret_dirs.clone_from(&sources.secret_dirs);
        }
    }
}

/// The metadata fingerprint off the async threads; `None` when it could not be taken.
async fn metadata_blocking(dir: PathBuf, secret_dirs: Vec<PathBuf>) -> Option<u64> {
    tokio::task::spawn_blocking(move || metadata_fingerprint(&dir, &secret_dirs).ok()).await.ok().flatten()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read_ok() -> Result<Sources, LoadError> {
        Ok(Sources { secret_dirs: vec![PathBuf::from("/secrets/a")], ..Sources::default() })
    }

    #[test]
    fn a_poll_reads_only_when_metadata_changed_the_last_read_failed_or_a_minute_passed() {
        let start = Instant::now();
        let mut poll = Poll::default();
        assert!(poll.must_read(Some(1), start), "nothing read yet");
        poll.record(Some(1), &read_ok(), start);
        assert_eq!(poll.secret_dirs, [PathBuf::from("/secrets/a")]);
        let soon = start + Duration::from_secs(2);
        assert!(!poll.must_read(Some(1), soon), "unchanged");
        assert!(poll.must_read(Some(2), soon), "metadata changed");
        assert!(poll.must_read(None, soon), "metadata could not be taken");
        assert!(poll.must_read(Some(1), start + FULL_READ_EVERY), "safety net");

        let failed = Err(LoadError::Io { path: "a.yaml".into(), message: "gone".into() });
        poll.record(Some(1), &failed, soon);
        assert!(poll.must_read(Some(1), soon), "the last read failed");
        assert_eq!(poll.secret_dirs, [PathBuf::from("/secrets/a")], "kept from the last successful read");
    }
}
