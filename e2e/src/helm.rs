//! Helm for the chart checks, and applying rendered manifests to the test control plane.
//!
//! [`Helm`] runs the pinned helm binary (`MEMGATE_HELM`, provided by `e2e/helm/provide.sh`) with its
//! own empty config, cache and data folders, so no repository, plugin or kubeconfig of the machine
//! takes part; it only renders and lints local charts and never talks to a cluster.
//! [`split_manifest`] turns its output into JSON objects, and [`apply_manifest`] sends them to an API
//! server by server-side apply, whatever their kinds (resolved by discovery).
//!
//! ```no_run
//! # async fn example() -> Result<(), memgate_e2e::Error> {
//! use std::path::Path;
//! use memgate_e2e::{ControlPlane, Helm, apply_manifest, split_manifest};
//!
//! let helm = Helm::from_env()?;
//! let chart = Path::new("charts/memgate");
//! let text = helm.template(chart, "memgate", "memgate-system", &[], &[("operator.replicas", "1")], true)?;
//! let objects = split_manifest(&text)?;
//! let client = ControlPlane::shared().await?.client()?;
//! apply_manifest(&client, &objects, "memgate-e2e", true).await?; // dryRun=All: nothing is stored
//! apply_manifest(&client, &objects, "memgate-e2e", false).await?;
//! # Ok(())
//! # }
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, ValidationDirective};
use kube::discovery::{self, ApiCapabilities, Scope};
use serde_json::Value;

use crate::error::Error;

/// The environment variable naming the helm binary.
pub const HELM_ENV: &str = "MEMGATE_HELM";

/// How long [`apply_manifest`] waits for a kind to be served (a CRD applied just before its first
/// object takes a moment to be established).
const DISCOVERY_WAIT: Duration = Duration::from_secs(10);

/// A helm binary with private, empty `HELM_*_HOME` folders (removed when the value is dropped).
#[derive(Debug)]
pub struct Helm {
    binary: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    /// The helm binary named by `MEMGATE_HELM`. Fails with [`Error::HelmNotProvided`], saying how to
    /// provide it, when the variable is unset or does not name an executable file.
    pub fn from_env() -> Result<Self, Error> {
        let value = std::env::var_os(HELM_ENV)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Error::HelmNotProvided { reason: format!("{HELM_ENV} is not set") })?;
        Self::new(PathBuf::from(value))
    }

    /// The helm binary at `binary`; fails with [`Error::HelmNotProvided`] when it is not an executable file.
    pub fn new(binary: impl Into<PathBuf>) -> Result<Self, Error> {
        let binary = binary.into();
        if !is_executable(&binary) {
            return Err(Error::HelmNotProvided {
                reason: format!("{HELM_ENV}={} is not an executable file", binary.display()),
            });
        }
        let home = tempfile::Builder::new()
            .prefix("memgate-helm-")
            .tempdir()
            .map_err(|e| Error::io("creating helm's temporary home folder", e))?;
        Ok(Self { binary, home })
    }

    /// The helm binary this runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// What `helm version --template {{.Version}}` prints, e.g. `v4.3.2`.
    pub fn version(&self) -> Result<String, Error> {
        self.run(vec!["version".into(), "--template".into(), "{{.Version}}".into()]).map(|out| out.trim().to_owned())
    }

    /// `helm template <release> <chart> --namespace <namespace>` with each of `values_files` as
    /// `--values` (in order: later files win), each `(key, value)` of `set` as `--set key=value`, and
    /// `--include-crds` when `include_crds`. Returns the rendered manifest (stdout). A chart or values
    /// error (a `values.schema.json` violation, a `fail` in a template) is [`Error::Helm`] carrying
    /// helm's message.
    pub fn template(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        values_files: &[&Path],
        set: &[(&str, &str)],
        include_crds: bool,
    ) -> Result<String, Error> {
        let mut args: Vec<OsString> =
            vec!["template".into(), release.into(), chart.into(), "--namespace".into(), namespace.into()];
        push_values(&mut args, values_files, set);
        if include_crds {
            args.push("--include-crds".into());
        }
        self.run(args)
    }

    /// `helm lint <chart>` (with `--strict` when `strict`: warnings fail too) with `values_files` and
    /// `set` as for [`Helm::template`]. Returns helm's report; a failed lint is [`Error::Helm`] whose
    /// output holds the `[ERROR]` / `[WARNING]` lines.
    pub fn lint(
        &self,
        chart: &Path,
        values_files: &[&Path],
        set: &[(&str, &str)],
        strict: bool,
    ) -> Result<String, Error> {
        let mut args: Vec<OsString> = vec!["lint".into(), chart.into()];
        if strict {
            args.push("--strict".into());
        }
        push_values(&mut args, values_files, set);
        self.run(args)
    }

    fn run(&self, args: Vec<OsString>) -> Result<String, Error> {
        let shown = std::iter::once(self.binary.as_os_str().to_owned())
            .chain(args.iter().cloned())
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        let home = self.home.path();
        let output = Command::new(&self.binary)
            .args(&args)
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_DATA_HOME", home.join("data"))
            .env("KUBECONFIG", home.join("no-kubeconfig"))
            .env_remove("HELM_DRIVER")
            .env_remove("HELM_NAMESPACE")
            .env_remove("HELM_KUBECONTEXT")
            .output()
            .map_err(|e| Error::Spawn { program: shown.clone(), source: e.into() })?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Err(Error::Helm {
                command: shown,
                status: output.status.to_string(),
                output: format!("{}\n{}", stderr.trim(), stdout.trim()).trim().to_owned(),
            })
        }
    }
}

fn push_values(args: &mut Vec<OsString>, values_files: &[&Path], set: &[(&str, &str)]) {
    for file in values_files {
        args.push("--values".into());
        args.push(file.into());
    }
    for (key, value) in set {
        args.push("--set".into());
        args.push(format!("{key}={value}").into());
    }
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Splits a multi-document YAML manifest (what `helm template` prints) into its objects, in order,
/// skipping empty documents (a `---` followed only by comments, such as helm's `# Source:` lines).
/// Fails with [`Error::Manifest`] on invalid YAML or a document that is not a mapping.
pub fn split_manifest(text: &str) -> Result<Vec<Value>, Error> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| Error::Manifest { message: format!("not YAML: {e}") })?;
    let mut objects = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        match document {
            Value::Null => {}
            Value::Object(_) => objects.push(document),
            other => {
                return Err(Error::Manifest {
                    message: format!("document {index} is not a mapping but {}", kind_of(&other)),
                });
            }
        }
    }
    Ok(objects)
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// `Kind/name` (or `Kind/namespace/name`) of a manifest object, for messages.
pub fn describe(object: &Value) -> String {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("<no kind>");
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>");
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(namespace) => format!("{kind}/{namespace}/{name}"),
        None => format!("{kind}/{name}"),
    }
}

/// Applies `objects` in order by server-side apply with `field_manager` (no `force`: a field owned by
/// another manager is a conflict, reported as an error) and strict field validation (an unknown or
/// duplicated field is refused). With `dry_run`, every request carries `dryRun=All`: the server
/// admits and validates each object but stores nothing, so a kind that only a CRD in the same list
/// would add cannot be dry-run. Returns what the server answered for each object, in order.
///
/// Kinds are resolved by discovery, so any served kind works (built-in or custom); a kind not yet
/// served is looked up again for a few seconds (a CRD applied earlier in the list becoming
/// established). A namespaced object must carry `metadata.namespace`; a cluster-scoped one must not.
pub async fn apply_manifest(
    client: &Client,
    objects: &[Value],
    field_manager: &str,
    dry_run: bool,
) -> Result<Vec<DynamicObject>, Error> {
    let mut params = PatchParams::apply(field_manager).validation(ValidationDirective::Strict);
    if dry_run {
        params = params.dry_run();
    }
    let mut kinds = KindCache::default();
    let mut applied = Vec::with_capacity(objects.len());
    for object in objects {
        let target = Target::of(client, &mut kinds, object).await?;
        let result =
            target.api.patch(&target.name, &params, &Patch::Apply(object)).await.map_err(|e| {
                Error::kube(format!("server-side apply{} of {}", dry_suffix(dry_run), describe(object)), e)
            })?;
        applied.push(result);
    }
    Ok(applied)
}

fn dry_suffix(dry_run: bool) -> &'static str {
    if dry_run { " (dryRun=All)" } else { "" }
}

/// Reads back the live object that a manifest object names (same kind, namespace and name).
pub async fn get_object(client: &Client, object: &Value) -> Result<DynamicObject, Error> {
    let target = Target::of(client, &mut KindCache::default(), object).await?;
    target.api.get(&target.name).await.map_err(|e| Error::kube(format!("reading back {}", describe(object)), e))
}

/// Resolved kinds, so that a list of many objects of few kinds asks discovery once per kind.
#[derive(Default)]
struct KindCache(HashMap<(String, String), (ApiResource, ApiCapabilities)>);

impl KindCache {
    async fn resolve(
        &mut self,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities), Error> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self.0.get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let deadline = tokio::time::Instant::now() + DISCOVERY_WAIT;
        let found = loop {
            match discovery::pinned_kind(client, &gvk).await {
                Ok(found) => break found,
                Err(e) if tokio::time::Instant::now() >= deadline => {
                    return Err(Error::kube(format!("discovering {kind} in {api_version}"), e));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        self.0.insert(key, found.clone());
        Ok(found)
    }
}

/// The API and name one manifest object is sent to.
struct Target {
    api: Api<DynamicObject>,
    name: String,
}

impl Target {
    async fn of(client: &Client, kinds: &mut KindCache, object: &Value) -> Result<Self, Error> {
        let field = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).filter(|s| !s.is_empty());
        let missing = |what: &str| Error::Manifest { message: format!("{} has no {what}", describe(object)) };
        let api_version = field("/apiVersion").ok_or_else(|| missing("apiVersion"))?;
        let kind = field("/kind").ok_or_else(|| missing("kind"))?;
        let name = field("/metadata/name").ok_or_else(|| missing("metadata.name"))?.to_owned();
        let namespace = field("/metadata/namespace");
        let (resource, capabilities) = kinds.resolve(client, api_version, kind).await?;
        let api = match (&capabilities.scope, namespace) {
            (Scope::Namespaced, Some(namespace)) => Api::namespaced_with(client.clone(), namespace, &resource),
            (Scope::Namespaced, None) => return Err(missing("metadata.namespace (its kind is namespaced)")),
            (Scope::Cluster, None) => Api::all_with(client.clone(), &resource),
            (Scope::Cluster, Some(_)) => {
                return Err(Error::Manifest {
                    message: format!("{} has a metadata.namespace but its kind is cluster-scoped", describe(object)),
                });
            }
        };
        Ok(Self { api, name })
    }
}
