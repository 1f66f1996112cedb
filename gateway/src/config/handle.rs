//! The live config: the current snapshot, swapped atomically on reload.
//!
//! In-flight requests hold an `Arc` of the provider they started with, so a reload never drops or
//! changes a request that is already running. A reload that fails keeps the last good snapshot and
//! records why (readiness reports it, the log says it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use super::build::build_snapshot;
use memgate_crds::source_file::ReadLimits;

use super::files::{
    LoadError, Sources, content_fingerprint, failure_fingerprint, metadata_fingerprint, read_sources_with,
};
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

/// What the first load of a folder leaves for its [`watch`]er, so the watcher starts from that
/// load instead of reading and parsing the folder a second time.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The metadata fingerprint taken just before the load (`None`: could not be taken).
    metadata: Option<u64>,
    /// The load's content fingerprint ([`Sources::fingerprint`]).
    fingerprint: u64,
    /// The Secret folders it named.
    secret_dirs: Vec<PathBuf>,
}

/// Load `dir` within `limits` for serving: the snapshot, and what [`watch`] starts from.
pub fn load_watched(dir: &Path, limits: ReadLimits) -> Result<(Snapshot, Loaded), LoadError> {
    let metadata = metadata_fingerprint(dir, &[]).ok();
    let sources = read_sources_with(dir, limits)?;
    let snapshot = build_snapshot(&sources.documents, &sources.mounted)?;
    Ok((snapshot, Loaded { metadata, fingerprint: sources.fingerprint, secret_dirs: sources.secret_dirs }))
}

/// Poll `dir` (and the Secret folders it names) every `interval`; rebuild when anything changed.
/// `loaded` is what the load that built the handle's snapshot left ([`load_watched`]).
///
/// A poll first takes the [`metadata_fingerprint`] of everything the last read depended on (no
/// file is read). Only when it changed, the last read failed, or [`FULL_READ_EVERY`] has passed
/// since the last full read, the poll reads every file. After a successful read it first only
/// hashes the bytes ([`content_fingerprint`]): the same fingerprint (a touched but unchanged
/// file, the once-a-minute read) ends the poll with nothing parsed. Otherwise it reads every file
/// once within `limits`: that read gives the content fingerprint, which decides whether to rebuild,
/// and the documents the new snapshot is built from. The metadata is taken before the read, so a
/// change during the read is seen at the next poll. Runs until the task is dropped.
pub async fn watch(handle: Arc<ConfigHandle>, dir: PathBuf, interval: Duration, limits: ReadLimits, loaded: Loaded) {
    let mut poll = Poll::default();
    let mut last = loaded.fingerprint;
    poll.record(loaded.metadata, true, Some(&loaded.secret_dirs), Instant::now());
    loop {
        tokio::time::sleep(interval).await;
        let metadata = metadata_blocking(dir.clone(), poll.secret_dirs.clone()).await;
        if !poll.must_read(metadata, Instant::now()) {
            continue;
        }
        if poll.read_ok && fingerprint_blocking(dir.clone(), limits, poll.secret_dirs.clone()).await == Some(last) {
            poll.record(metadata, true, None, Instant::now());
            continue;
        }
        let (now, read) = read_blocking(dir.clone(), limits).await;
        poll.record(metadata, read.is_ok(), read.as_ref().ok().map(|s| s.secret_dirs.as_slice()), Instant::now());
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

    /// Note a read, taken after the metadata fingerprint `metadata`: whether it succeeded, and the
    /// Secret folders it named when it parsed the config (`None`: the last ones still hold).
    fn record(&mut self, metadata: Option<u64>, ok: bool, secret_dirs: Option<&[PathBuf]>, now: Instant) {
        self.metadata = metadata;
        self.at = Some(now);
        self.read_ok = ok;
        if let Some(dirs) = secret_dirs.filter(|_| ok) {
            self.secret_dirs = dirs.to_vec();
        }
    }
}

/// The metadata fingerprint off the async threads; `None` when it could not be taken.
async fn metadata_blocking(dir: PathBuf, secret_dirs: Vec<PathBuf>) -> Option<u64> {
    tokio::task::spawn_blocking(move || metadata_fingerprint(&dir, &secret_dirs).ok()).await.ok().flatten()
}

/// The [`content_fingerprint`] off the async threads; `None` when the folder could not be read.
async fn fingerprint_blocking(dir: PathBuf, limits: ReadLimits, secret_dirs: Vec<PathBuf>) -> Option<u64> {
    tokio::task::spawn_blocking(move || content_fingerprint(&dir, limits, &secret_dirs).ok()).await.ok().flatten()
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

    #[test]
    fn a_poll_reads_only_when_metadata_changed_the_last_read_failed_or_a_minute_passed() {
        let start = Instant::now();
        let mut poll = Poll::default();
        assert!(poll.must_read(Some(1), start), "nothing read yet");
        poll.record(Some(1), true, Some(&[PathBuf::from("/secrets/a")]), start);
        assert_eq!(poll.secret_dirs, [PathBuf::from("/secrets/a")]);
        let soon = start + Duration::from_secs(2);
        assert!(!poll.must_read(Some(1), soon), "unchanged");
        assert!(poll.must_read(Some(2), soon), "metadata changed");
        assert!(poll.must_read(None, soon), "metadata could not be taken");
        assert!(poll.must_read(Some(1), start + FULL_READ_EVERY), "safety net");

        poll.record(Some(1), true, None, soon);
        assert_eq!(poll.secret_dirs, [PathBuf::from("/secrets/a")], "an unparsed read keeps the folders");
        poll.record(Some(1), false, Some(&[]), soon);
        assert!(poll.must_read(Some(1), soon), "the last read failed");
        assert_eq!(poll.secret_dirs, [PathBuf::from("/secrets/a")], "kept from the last successful read");
    }

    use crate::config::test_fixtures::PROVIDER;

    /// [`PROVIDER`] with its Secret.
    fn config() -> String {
        format!(
            "{PROVIDER}---\napiVersion: v1\nkind: Secret\nmetadata: {{name: mem0-api, namespace: agents}}\nstringData: {{api-key: dev-key}}\n"
        )
    }

    /// Polls until `done` holds for the handle, for at most 10 s.
    async fn until(handle: &ConfigHandle, done: impl Fn(&ConfigHandle) -> bool) -> bool {
        for _ in 0..1000 {
            if done(handle) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn the_watcher_starts_from_the_first_load_and_rebuilds_only_on_new_content() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("gateway.yaml");
        std::fs::write(&file, config()).expect("write");
        let (snapshot, loaded) = load_watched(dir.path(), ReadLimits::default()).expect("loads");
        let handle = Arc::new(ConfigHandle::new(snapshot));
        let task = tokio::spawn(watch(
            Arc::clone(&handle),
            dir.path().to_path_buf(),
            Duration::from_millis(5),
            ReadLimits::default(),
            loaded,
        ));
        // Rewritten with the same bytes (new metadata): read, hashed, and not rebuilt.
        std::fs::remove_file(&file).expect("rm");
        std::fs::write(&file, config()).expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(handle.status().generation, 1, "the same content is not a reload");

        std::fs::write(&file, config().replace("qwen-code", "other-agent")).expect("write");
        assert!(until(&handle, |h| h.status().generation == 2).await, "new content is served");
        let served = handle.snapshot();
        assert_eq!(
            served.provider("repo-memory").expect("served").target.scope.agent_id.as_deref(),
            Some("other-agent")
        );

        std::fs::write(&file, "kind: [unclosed\n").expect("write");
        assert!(until(&handle, |h| h.status().last_error.is_some()).await, "a broken file is reported");
        assert_eq!(handle.status().generation, 2, "and the last good config kept");
        std::fs::write(&file, config()).expect("write");
        assert!(until(&handle, |h| h.status().generation == 3).await, "a fixed file is served again");
        task.abort();
    }
}
