//! Reading a config folder and the Secret volumes it names (the only file I/O of the config).
//!
//! Every file goes through [`memgate_crds::source_file`], the bounded reader `memgate-operator
//! validate` uses too: only regular files are read (a device, FIFO or socket, also behind a
//! symlink, is refused without being read or blocking), each file at most
//! [`ReadLimits::max_file_bytes`] and all of one load together at most
//! [`ReadLimits::max_total_bytes`]; a mounted Secret key file at most [`MAX_SECRET_FILE_BYTES`].
//! Any of these refuses the whole load, naming the file.
//!
//! [`metadata_fingerprint`] tells a watcher, without reading any file, whether a load could give
//! anything new.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::Metadata;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::path::{Path, PathBuf};

use memgate_crds::manifest::{documents, is_secret_mount};
use memgate_crds::source_file::{ReadLimits, SourceError, SourceReader, collect_yaml_files};
use serde_json::Value;

use super::build::{BuildError, SourcedDocument, build_snapshot};
use super::model::Snapshot;

/// Why a config folder could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file or folder could not be read.
    #[error("{path}: unreadable: {message}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        message: String,
    },
    /// A file is not YAML.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A `SecretMount` document is malformed.
    #[error("{source_name}: SecretMount: {message}")]
    SecretMount {
        /// Where the document is.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// The documents are not a valid config.
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Everything read from a config folder.
#[derive(Debug, Default)]
pub struct Sources {
    /// Documents with `file#index` sources.
    pub documents: Vec<SourcedDocument>,
    /// Data of Secrets mounted as folders, by `(namespace, name)`.
    pub mounted: BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    /// Hash of the path and bytes of every file read (YAML and mounted Secret keys): changes
    /// whenever any of them changes, so a watcher can compare it without reading anything twice.
    pub fingerprint: u64,
    /// The Secret folders read, in the order their `SecretMount`s came (for [`metadata_fingerprint`]).
    pub secret_dirs: Vec<PathBuf>,
}

/// Largest mounted Secret key file read: 1 MiB, the most a Kubernetes Secret holds.
pub const MAX_SECRET_FILE_BYTES: u64 = 1024 * 1024;

/// Read and build the config in `dir` with the default [`ReadLimits`].
pub fn load_dir(dir: &Path) -> Result<Snapshot, LoadError> {
    load_dir_with(dir, ReadLimits::default())
}

/// Read and build the config in `dir`, reading within `limits`.
pub fn load_dir_with(dir: &Path, limits: ReadLimits) -> Result<Snapshot, LoadError> {
    let sources = read_sources_with(dir, limits)?;
    Ok(build_snapshot(&sources.documents, &sources.mounted)?)
}

/// [`read_sources_with`] with the default [`ReadLimits`].
pub fn read_sources(dir: &Path) -> Result<Sources, LoadError> {
    read_sources_with(dir, ReadLimits::default())
}

/// Read every `*.yaml`/`*.yml` under `dir` (recursively, each folder once, skipping hidden entries
/// such as the `..data` folders of Kubernetes volume mounts) and every Secret folder a
/// `SecretMount` names, within `limits` (see the module docs).
///
/// The fingerprint hashes every YAML file (path and text, in [`collect_yaml_files`]'s order) and
/// then every Secret folder in the order its `SecretMount` came: [`content_fingerprint`] gives the
/// same number from the same bytes without parsing any of them.
pub fn read_sources_with(dir: &Path, limits: ReadLimits) -> Result<Sources, LoadError> {
    let mut sources = Sources::default();
    let mut hasher = DefaultHasher::new();
    let mut reader = SourceReader::new(limits);
    let mut mounts = Vec::new();
    for (file, text) in read_yaml_files(dir, &mut reader, &mut hasher)? {
        let name = file.display().to_string();
        let docs = documents(&text).map_err(|e| LoadError::Parse { path: name.clone(), message: e.to_string() })?;
        for (index, value) in docs {
            let source_name = format!("{name}#{index}");
            if let Some(mount) = secret_mount(&source_name, &value, dir)? {
                mounts.push(mount);
            }
            sources.documents.push((source_name, value));
        }
    }
    for (key, path) in mounts {
        let data = read_secret_folder(&path, &mut reader, &mut hasher)?;
        sources.mounted.insert(key, data);
        sources.secret_dirs.push(path);
    }
    sources.fingerprint = hasher.finish();
    Ok(sources)
}

/// The fingerprint [`read_sources_with`] would give for `dir` if its `SecretMount`s named
/// `secret_dirs` (in that order), from the same bytes read within the same `limits` but with
/// nothing parsed.
///
/// When the YAML files are unchanged since a read that named `secret_dirs`, so are their
/// `SecretMount`s: an equal fingerprint then means the whole load is unchanged, and a watcher can
/// skip parsing it (with many providers, parsing is most of a reload's memory and CPU). When the
/// YAML changed, the fingerprint differs (the YAML's bytes are hashed first) and a full read follows.
pub fn content_fingerprint(dir: &Path, limits: ReadLimits, secret_dirs: &[PathBuf]) -> Result<u64, LoadError> {
    let mut hasher = DefaultHasher::new();
    let mut reader = SourceReader::new(limits);
    read_yaml_files(dir, &mut reader, &mut hasher)?;
    for path in secret_dirs {
        read_secret_folder(path, &mut reader, &mut hasher)?;
    }
    Ok(hasher.finish())
}

/// Every YAML file under `dir` with its text, each hashed by path and text into `hasher`.
fn read_yaml_files(
    dir: &Path,
    reader: &mut SourceReader,
    hasher: &mut DefaultHasher,
) -> Result<Vec<(PathBuf, String)>, LoadError> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Err(LoadError::Io { path: dir.display().to_string(), message: "not a folder".into() });
    }
    collect_yaml_files(dir, &mut files, &mut BTreeSet::new()).map_err(|e| io_error(dir, &e))?;
    let mut texts = Vec::with_capacity(files.len());
    for file in files {
        let text = reader.read_text(&file).map_err(|e| source_error(&file, &e))?;
        (&file, &text).hash(hasher);
        texts.push((file, text));
    }
    Ok(texts)
}

/// A hash of the metadata of everything a load of `dir` that named the Secret folders
/// `secret_dirs` depended on, reading no file: the YAML files [`collect_yaml_files`] lists (so a
/// new or removed file counts) and the keys of each Secret folder (as [`read_sources_with`] lists
/// them: not hidden), each by path and metadata with symlinks followed (device, inode, mode, size,
/// mtime and ctime with nanoseconds), plus the target of the `..data` symlink of `dir`, of each
/// folder holding a listed file and of each Secret folder (the kubelet updates a ConfigMap or
/// Secret volume by writing a new `..<timestamp>/` folder and renaming a new `..data` symlink over
/// the old one; keys are `key -> ..data/key`).
///
/// Equal fingerprints mean nothing was replaced, renamed, added, removed or written to, with one
/// exception: Linux takes file times from a coarse clock (one tick, 1 to 10 ms) and some
/// filesystems keep whole seconds only, so a file rewritten in place with the same size within one
/// tick of its last change can keep all of its metadata. A watcher should therefore also read in
/// full now and then. A key that cannot be looked at (a dangling symlink) counts as its error kind,
/// as the load skips it; any other error is returned (a load would fail too).
pub fn metadata_fingerprint(dir: &Path, secret_dirs: &[PathBuf]) -> io::Result<u64> {
    let mut hasher = DefaultHasher::new();
    let mut files = Vec::new();
    collect_yaml_files(dir, &mut files, &mut BTreeSet::new())?;
    let mut folders = BTreeSet::from([dir.to_path_buf()]);
    for file in &files {
        file.hash(&mut hasher);
        hash_metadata(&std::fs::metadata(file)?, &mut hasher);
        folders.extend(file.parent().map(Path::to_path_buf));
    }
    for folder in &folders {
        hash_data_link(folder, &mut hasher);
    }
    for folder in secret_dirs {
        folder.hash(&mut hasher);
        hash_data_link(folder, &mut hasher);
        let mut keys = Vec::new();
        for entry in std::fs::read_dir(folder)? {
            let entry = entry?;
            if !entry.file_name().to_string_lossy().starts_with('.') {
                keys.push(entry.path());
            }
        }
        keys.sort();
        for key in keys {
            key.hash(&mut hasher);
            match std::fs::metadata(&key) {
                Ok(metadata) => hash_metadata(&metadata, &mut hasher),
                Err(err) => err.kind().hash(&mut hasher),
            }
        }
    }
    Ok(hasher.finish())
}

#[cfg(unix)]
fn hash_metadata(metadata: &Metadata, hasher: &mut DefaultHasher) {
    use std::os::unix::fs::MetadataExt;
    let m = metadata;
    (m.dev(), m.ino(), m.mode(), m.size(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()).hash(hasher);
}

#[cfg(not(unix))]
fn hash_metadata(metadata: &Metadata, hasher: &mut DefaultHasher) {
    (metadata.len(), metadata.modified().ok(), metadata.is_file()).hash(hasher);
}

/// Where `folder/..data` points (nothing when it is not a symlink).
fn hash_data_link(folder: &Path, hasher: &mut DefaultHasher) {
    std::fs::read_link(folder.join("..data")).ok().hash(hasher);
}

/// The fingerprint of a folder that could not be read: the error's text (which names the file),
/// so the same failure is not reported again until something changes.
pub fn failure_fingerprint(err: &LoadError) -> u64 {
    let mut hasher = DefaultHasher::new();
    err.to_string().hash(&mut hasher);
    hasher.finish()
}

/// `(namespace, name)` of a Secret and the folder it is mounted at.
type MountedSecret = ((String, String), PathBuf);

fn secret_mount(source_name: &str, value: &Value, dir: &Path) -> Result<Option<MountedSecret>, LoadError> {
    if !is_secret_mount(value) {
        return Ok(None);
    }
    let bad =
        |message: &str| LoadError::SecretMount { source_name: source_name.to_string(), message: message.to_string() };
    let name =
        value.pointer("/metadata/name").and_then(Value::as_str).ok_or_else(|| bad("metadata.name is required"))?;
    let namespace = value.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
    let path = value.get("path").and_then(Value::as_str).ok_or_else(|| bad("path is required"))?;
    let path = if Path::new(path).is_absolute() { PathBuf::from(path) } else { dir.join(path) };
    Ok(Some(((namespace.to_string(), name.to_string()), path)))
}

/// A mounted Secret: one file per key (symlinks followed; hidden entries and anything that is not a
/// regular file skipped), each at most [`MAX_SECRET_FILE_BYTES`], counted against the load's total.
fn read_secret_folder(
    path: &Path,
    reader: &mut SourceReader,
    hasher: &mut DefaultHasher,
) -> Result<BTreeMap<String, Vec<u8>>, LoadError> {
    let mut data = BTreeMap::new();
    for entry in std::fs::read_dir(path).map_err(|e| io_error(path, &e))? {
        let entry = entry.map_err(|e| io_error(path, &e))?;
        let key = entry.file_name().to_string_lossy().into_owned();
        let file = entry.path();
        if key.starts_with('.') || !file.is_file() {
            continue;
        }
        // Re-checked when opened: a file swapped for a FIFO or device after `is_file` is refused.
        let bytes = reader.read_bytes(&file, MAX_SECRET_FILE_BYTES).map_err(|e| source_error(&file, &e))?;
        (&file, &bytes).hash(hasher);
        data.insert(key, bytes);
    }
    Ok(data)
}

fn io_error(path: &Path, err: &std::io::Error) -> LoadError {
    // The OS message ("Too many open files (os error 24)"), not just the error kind.
    LoadError::Io { path: path.display().to_string(), message: err.to_string() }
}

fn source_error(path: &Path, err: &SourceError) -> LoadError {
    let message = match err {
        SourceError::Io(message) => message.clone(),
        SourceError::FileTooLarge { .. } => format!("{err} (--config-max-file-bytes)"),
        SourceError::TotalTooLarge { .. } => format!("{err} (--config-max-total-bytes)"),
        other => other.to_string(),
    };
    LoadError::Io { path: path.display().to_string(), message }
}

#[cfg(test)]
mod tests {
    use memgate_crds::manifest::{SECRET_MOUNT_API_VERSION, SECRET_MOUNT_KIND};

    use super::*;

    use crate::config::test_fixtures::PROVIDER;

    /// `file` in `dir` holds [`PROVIDER`] and a SecretMount of `dir/secrets`, whose key `api-key`
    /// holds "one"; returns that folder.
    fn with_mounted_secret(dir: &Path, file: &str) -> PathBuf {
        let secrets = dir.join("secrets");
        std::fs::create_dir_all(&secrets).expect("mkdir");
        std::fs::write(secrets.join("api-key"), "one").expect("write");
        let mount = format!(
            "apiVersion: {SECRET_MOUNT_API_VERSION}\nkind: {SECRET_MOUNT_KIND}\nmetadata: {{name: mem0-api, namespace: agents}}\npath: secrets\n"
        );
        std::fs::write(dir.join(file), format!("{PROVIDER}---\n{mount}")).expect("write");
        secrets
    }

    /// The operator's rendered layout: objects plus a SecretMount pointing at a Secret volume.
    #[test]
    fn rendered_layout_with_secret_mount_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secrets = dir.path().join("secrets/agents/mem0-api");
        std::fs::create_dir_all(&secrets).expect("mkdir");
        std::fs::write(secrets.join("api-key"), "mounted-key").expect("write");
        std::fs::create_dir_all(dir.path().join("..data")).expect("hidden");
        std::fs::write(dir.path().join("..data/ignored.yaml"), "not: [valid").expect("write");
        let mount = format!(
            "apiVersion: {SECRET_MOUNT_API_VERSION}\nkind: {SECRET_MOUNT_KIND}\nmetadata: {{name: mem0-api, namespace: agents}}\npath: secrets/agents/mem0-api\n"
        );
        std::fs::write(dir.path().join("gateway.yaml"), format!("{PROVIDER}---\n{mount}")).expect("write");
        let snapshot = load_dir(dir.path()).expect("loads");
        assert_eq!(snapshot.provider("repo-memory").expect("served").target.credential.expose(), "mounted-key");
    }

    #[test]
    fn fingerprint_changes_with_any_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fingerprint = |dir: &Path| read_sources(dir).expect("readable").fingerprint;
        std::fs::write(dir.path().join("a.yaml"), PROVIDER).expect("write");
        let before = fingerprint(dir.path());
        assert_eq!(before, fingerprint(dir.path()));
        std::fs::write(dir.path().join("a.yaml"), PROVIDER.replace("qwen-code", "other")).expect("write");
        assert_ne!(before, fingerprint(dir.path()));
    }

    #[test]
    fn fingerprint_covers_mounted_secret_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secrets = with_mounted_secret(dir.path(), "gateway.yaml");
        let before = read_sources(dir.path()).expect("readable").fingerprint;
        std::fs::write(secrets.join("api-key"), "two").expect("write");
        assert_ne!(before, read_sources(dir.path()).expect("readable").fingerprint);
    }

    #[test]
    fn content_fingerprint_is_a_full_reads_without_parsing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secrets = with_mounted_secret(dir.path(), "a.yaml");
        std::fs::write(dir.path().join("b.yaml"), "kind: Other\n").expect("write");
        let full = read_sources(dir.path()).expect("readable");
        assert_eq!(full.secret_dirs, std::slice::from_ref(&secrets));
        let content =
            |dirs: &[PathBuf]| content_fingerprint(dir.path(), ReadLimits::default(), dirs).expect("readable");
        assert_eq!(content(&full.secret_dirs), full.fingerprint, "the same bytes, the same fingerprint");
        assert_ne!(content(&[]), full.fingerprint, "the Secret folder counts");

        std::fs::write(secrets.join("api-key"), "two").expect("write");
        let changed = read_sources(dir.path()).expect("readable").fingerprint;
        assert_ne!(changed, full.fingerprint);
        assert_eq!(content(&full.secret_dirs), changed, "a changed Secret key is seen without parsing");

        // Not YAML at all: hashed, never parsed, so the fingerprint differs and a full read reports it.
        std::fs::write(dir.path().join("b.yaml"), "kind: [unclosed\n").expect("write");
        assert!(read_sources(dir.path()).is_err());
        assert_ne!(content(&full.secret_dirs), changed);
        let small = ReadLimits { max_file_bytes: 16, max_total_bytes: 1024 };
        let err = content_fingerprint(dir.path(), small, &full.secret_dirs).unwrap_err().to_string();
        assert!(err.contains("--config-max-file-bytes"), "the same limits as a full read: {err}");
    }

    #[cfg(unix)]
    #[test]
    fn devices_fifos_and_oversized_files_refuse_the_load_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.yaml"), PROVIDER).expect("write");
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.yaml")).expect("symlink");
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("zero.yaml") && err.contains("not a regular file (a device)"), "{err}");
        std::fs::remove_file(dir.path().join("zero.yaml")).expect("rm");
        let made = std::process::Command::new("mkfifo").arg(dir.path().join("pipe.yml")).status().expect("mkfifo");
        assert!(made.success());
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("pipe.yml") && err.contains("a FIFO"), "{err}");
        std::fs::remove_file(dir.path().join("pipe.yml")).expect("rm");
        let small = ReadLimits { max_file_bytes: 64, max_total_bytes: 1024 };
        let err = load_dir_with(dir.path(), small).unwrap_err().to_string();
        assert!(err.contains("a.yaml") && err.contains("--config-max-file-bytes"), "{err}");
        let total = ReadLimits { max_file_bytes: 4096, max_total_bytes: 600 };
        std::fs::write(dir.path().join("b.yaml"), "x: 1\n".repeat(100)).expect("write");
        let err = load_dir_with(dir.path(), total).unwrap_err().to_string();
        assert!(err.contains("b.yaml") && err.contains("--config-max-total-bytes"), "{err}");
    }

    /// Wait until a file written now gets later times than `path` has (the kernel's file clock ticks
    /// every few milliseconds), so a rewrite of `path` gets new times.
    #[cfg(unix)]
    fn wait_for_clock_tick(path: &Path) {
        use std::os::unix::fs::MetadataExt;
        let times = |p: &Path| {
            let m = std::fs::metadata(p).expect("stat");
            (m.mtime(), m.mtime_nsec()).max((m.ctime(), m.ctime_nsec()))
        };
        let last = times(path);
        let probe = path.with_extension("tick");
        for _ in 0..1000 {
            std::fs::write(&probe, "").expect("write");
            if times(&probe) > last {
                std::fs::remove_file(&probe).expect("rm");
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("the file clock did not advance");
    }

    /// Publish `files` into the volume at `root` as the kubelet's atomic writer does: a new
    /// `..<generation>/` folder, a `..data` symlink renamed over the old one, `key -> ..data/key`
    /// links, the old folder removed.
    #[cfg(unix)]
    fn kubelet_publish(root: &Path, generation: &str, files: &[(&str, &str)]) {
        use std::os::unix::fs::symlink;
        let folder = format!("..{generation}");
        std::fs::create_dir_all(root.join(&folder)).expect("mkdir");
        for (key, text) in files {
            std::fs::write(root.join(&folder).join(key), text).expect("write");
        }
        let old = std::fs::read_link(root.join("..data")).ok();
        symlink(&folder, root.join("..data_tmp")).expect("symlink");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("rename");
        for (key, _) in files {
            if std::fs::symlink_metadata(root.join(key)).is_err() {
                symlink(format!("..data/{key}"), root.join(key)).expect("symlink");
            }
        }
        if let Some(old) = old {
            std::fs::remove_dir_all(root.join(old)).expect("rm old");
        }
    }

    #[test]
    fn metadata_fingerprint_is_stable_and_sees_new_and_removed_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fingerprint = || metadata_fingerprint(dir.path(), &[]).expect("readable");
        std::fs::write(dir.path().join("a.yaml"), PROVIDER).expect("write");
        let first = fingerprint();
        assert_eq!(first, fingerprint());
        std::fs::write(dir.path().join("b.yml"), PROVIDER).expect("write");
        let with_b = fingerprint();
        assert_ne!(first, with_b);
        // Files a load does not read do not count.
        std::fs::write(dir.path().join("notes.txt"), "x").expect("write");
        std::fs::write(dir.path().join(".hidden.yaml"), "x").expect("write");
        assert_eq!(with_b, fingerprint());
        std::fs::remove_file(dir.path().join("b.yml")).expect("rm");
        assert_eq!(first, fingerprint(), "back to the first set of files");
    }

    /// A rewrite with different bytes of the same length is seen through the mtime, through the
    /// ctime alone (mtime set back) and through the inode (replaced by rename, mtime set back).
    #[cfg(unix)]
    #[test]
    fn metadata_fingerprint_sees_same_size_rewrites() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a.yaml");
        let fingerprint = || metadata_fingerprint(dir.path(), &[]).expect("readable");
        std::fs::write(&file, "x: 1\n").expect("write");
        let before = fingerprint();

        wait_for_clock_tick(&file);
        std::fs::write(&file, "x: 2\n").expect("write");
        let mtime_changed = fingerprint();
        assert_ne!(before, mtime_changed, "in-place rewrite: new mtime");

        let old = std::fs::metadata(&file).expect("stat");
        wait_for_clock_tick(&file);
        std::fs::write(&file, "x: 3\n").expect("write");
        let handle = std::fs::File::options().write(true).open(&file).expect("open");
        handle.set_modified(old.modified().expect("mtime")).expect("set mtime");
        let now = std::fs::metadata(&file).expect("stat");
        assert_eq!((now.ino(), now.len(), now.modified().ok()), (old.ino(), old.len(), old.modified().ok()));
        let ctime_changed = fingerprint();
        assert_ne!(mtime_changed, ctime_changed, "only the ctime differs");

        let old = std::fs::metadata(&file).expect("stat");
        let temporary = dir.path().join("a.tmp");
        std::fs::write(&temporary, "x: 4\n").expect("write");
        let handle = std::fs::File::options().write(true).open(&temporary).expect("open");
        handle.set_modified(old.modified().expect("mtime")).expect("set mtime");
        std::fs::rename(&temporary, &file).expect("rename");
        let now = std::fs::metadata(&file).expect("stat");
        assert_ne!(now.ino(), old.ino());
        assert_ne!(ctime_changed, fingerprint(), "replaced by rename: new inode");
    }

    /// ConfigMap and Secret volumes updated the kubelet's way, in the config folder and in a Secret
    /// folder a `SecretMount` names.
    #[cfg(unix)]
    #[test]
    fn metadata_fingerprint_sees_kubelet_swaps_of_config_and_secret_volumes() {
        let config = tempfile::tempdir().expect("tempdir");
        let secret = tempfile::tempdir().expect("tempdir");
        let mount = format!(
            "apiVersion: {SECRET_MOUNT_API_VERSION}\nkind: {SECRET_MOUNT_KIND}\nmetadata: {{name: mem0-api, namespace: agents}}\npath: {}\n",
            secret.path().display()
        );
        let gateway = |agent: &str| format!("{}---\n{mount}", PROVIDER.replace("qwen-code", agent));
        kubelet_publish(config.path(), "2026_01_01_00_00_00.000000001", &[("gateway.yaml", &gateway("qwen-code"))]);
        kubelet_publish(secret.path(), "2026_01_01_00_00_00.000000002", &[("api-key", "key-one")]);
        let sources = read_sources(config.path()).expect("readable");
        assert_eq!(sources.secret_dirs, [secret.path().to_path_buf()]);
        assert_eq!(sources.documents.len(), 2, "the `..data` copy is not read again");
        let fingerprint = || metadata_fingerprint(config.path(), &sources.secret_dirs).expect("readable");
        let first = fingerprint();
        assert_eq!(first, fingerprint());

        kubelet_publish(secret.path(), "2026_01_01_00_01_00.000000003", &[("api-key", "key-two")]);
        let secret_swapped = fingerprint();
        assert_ne!(first, secret_swapped, "Secret volume swapped");
        let key = &read_sources(config.path()).expect("readable").mounted[&("agents".into(), "mem0-api".into())];
        assert_eq!(key["api-key"], b"key-two");

        kubelet_publish(config.path(), "2026_01_01_00_02_00.000000004", &[("gateway.yaml", &gateway("other-cli"))]);
        assert_ne!(secret_swapped, fingerprint(), "config volume swapped (same size)");
        let text = &read_sources(config.path()).expect("readable").documents[0].1;
        assert_eq!(text.pointer("/spec/scope/agentId").and_then(Value::as_str), Some("other-cli"));
    }

    #[test]
    fn broken_yaml_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("bad.yaml"), "kind: [x").expect("write");
        let err = load_dir(dir.path()).unwrap_err();
        assert!(err.to_string().contains("bad.yaml"), "{err}");
    }
}
