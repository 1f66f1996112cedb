//! Reading a config folder and the Secret volumes it names (the only file I/O of the config).
//!
//! Every file goes through [`memgate_crds::source_file`], the bounded reader `memgate-operator
//! validate` uses too: only regular files are read (a device, FIFO or socket, also behind a
//! symlink, is refused without being read or blocking), each file at most
//! [`ReadLimits::max_file_bytes`] and all of one load together at most
//! [`ReadLimits::max_total_bytes`]; a mounted Secret key file at most [`MAX_SECRET_FILE_BYTES`].
//! Any of these refuses the whole load, naming the file.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use memgate_crds::manifest::documents;
use memgate_crds::source_file::{ReadLimits, SourceError, SourceReader, collect_yaml_files};
use serde_json::Value;

use super::build::{BuildError, SourcedDocument, build_snapshot};
use super::model::{SECRET_MOUNT_API_VERSION, SECRET_MOUNT_KIND, Snapshot};

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
pub fn read_sources_with(dir: &Path, limits: ReadLimits) -> Result<Sources, LoadError> {
    let mut sources = Sources::default();
    let mut hasher = DefaultHasher::new();
    let mut reader = SourceReader::new(limits);
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Err(LoadError::Io { path: dir.display().to_string(), message: "not a folder".into() });
    }
    collect_yaml_files(dir, &mut files, &mut BTreeSet::new()).map_err(|e| io_error(dir, &e))?;
    for file in files {
        let name = file.display().to_string();
        let text = reader.read_text(&file).map_err(|e| source_error(&file, &e))?;
        (&file, &text).hash(&mut hasher);
        let docs = documents(&text).map_err(|e| LoadError::Parse { path: name.clone(), message: e.to_string() })?;
        for (index, value) in docs {
            let source_name = format!("{name}#{index}");
            if let Some((key, path)) = secret_mount(&source_name, &value, dir)? {
                let data = read_secret_folder(&path, &mut reader, &mut hasher)?;
                sources.mounted.insert(key, data);
            }
            sources.documents.push((source_name, value));
        }
    }
    sources.fingerprint = hasher.finish();
    Ok(sources)
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
    let is_mount = value.get("apiVersion").and_then(Value::as_str) == Some(SECRET_MOUNT_API_VERSION)
        && value.get("kind").and_then(Value::as_str) == Some(SECRET_MOUNT_KIND);
    if !is_mount {
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
    use super::*;

    const PROVIDER: &str = r#"
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {name: repo-memory, namespace: agents}
spec:
  dialect: {builtin: mem0-oss-rest-2026-08}
  endpoint: {origin: "http://127.0.0.1:18888", allowInsecureHttp: true}
  credentials: {secretRef: {name: mem0-api, key: api-key}}
  scope: {userId: repository-memory, agentId: qwen-code}
  access: {anonymous: true}
"#;

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
        let secrets = dir.path().join("secrets");
        std::fs::create_dir_all(&secrets).expect("mkdir");
        std::fs::write(secrets.join("api-key"), "one").expect("write");
        let mount = format!(
            "apiVersion: {SECRET_MOUNT_API_VERSION}\nkind: {SECRET_MOUNT_KIND}\nmetadata: {{name: mem0-api, namespace: agents}}\npath: secrets\n"
        );
        std::fs::write(dir.path().join("gateway.yaml"), format!("{PROVIDER}---\n{mount}")).expect("write");
        let before = read_sources(dir.path()).expect("readable").fingerprint;
        std::fs::write(secrets.join("api-key"), "two").expect("write");
        assert_ne!(before, read_sources(dir.path()).expect("readable").fingerprint);
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

    #[test]
    fn broken_yaml_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("bad.yaml"), "kind: [x").expect("write");
        let err = load_dir(dir.path()).unwrap_err();
        assert!(err.to_string().contains("bad.yaml"), "{err}");
    }
}
