//! Reading a config folder and the Secret volumes it names (the only file I/O of the config).

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use memgate_crds::manifest::documents;
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

/// Read and build the config in `dir`.
pub fn load_dir(dir: &Path) -> Result<Snapshot, LoadError> {
    let sources = read_sources(dir)?;
    Ok(build_snapshot(&sources.documents, &sources.mounted)?)
}

/// Read every `*.yaml`/`*.yml` under `dir` (recursively, skipping hidden entries such as the
/// `..data` folders of Kubernetes volume mounts) and every Secret folder a `SecretMount` names.
pub fn read_sources(dir: &Path) -> Result<Sources, LoadError> {
    let mut sources = Sources::default();
    let mut hasher = DefaultHasher::new();
    let mut files = Vec::new();
    yaml_files(dir, &mut files)?;
    for file in files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file).map_err(|e| io_error(&file, &e))?;
        (&file, &text).hash(&mut hasher);
        let docs = documents(&text).map_err(|e| LoadError::Parse { path: name.clone(), message: e.to_string() })?;
        for (index, value) in docs {
            let source_name = format!("{name}#{index}");
            if let Some((key, path)) = secret_mount(&source_name, &value, dir)? {
                let data = read_secret_folder(&path, &mut hasher)?;
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

/// A mounted Secret: one file per key (symlinks followed, hidden entries skipped).
fn read_secret_folder(path: &Path, hasher: &mut DefaultHasher) -> Result<BTreeMap<String, Vec<u8>>, LoadError> {
    let mut data = BTreeMap::new();
    for entry in std::fs::read_dir(path).map_err(|e| io_error(path, &e))? {
        let entry = entry.map_err(|e| io_error(path, &e))?;
        let key = entry.file_name().to_string_lossy().into_owned();
        let file = entry.path();
        if key.starts_with('.') || !file.is_file() {
            continue;
        }
        let bytes = std::fs::read(&file).map_err(|e| io_error(&file, &e))?;
        (&file, &bytes).hash(hasher);
        data.insert(key, bytes);
    }
    Ok(data)
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| io_error(dir, &e))?
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

fn io_error(path: &Path, err: &std::io::Error) -> LoadError {
    LoadError::Io { path: path.display().to_string(), message: err.kind().to_string() }
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

    #[test]
    fn broken_yaml_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("bad.yaml"), "kind: [x").expect("write");
        let err = load_dir(dir.path()).unwrap_err();
        assert!(err.to_string().contains("bad.yaml"), "{err}");
    }
}
