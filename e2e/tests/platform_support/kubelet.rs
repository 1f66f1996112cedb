//! A stand-in for the kubelet (none runs here): runs the containers of a pod template as local
//! processes, the way a kubelet would start them, so the end-to-end test runs exactly what a
//! Deployment describes.
//!
//! What it does as a kubelet does:
//! - every ConfigMap and Secret volume is written with the kubelet's atomic layout (files in a
//!   `..<timestamp>` folder, a `..data` symlink swapped by rename, one symlink per item), only the
//!   `items` the volume names, and [`Pod::sync_volumes`] rewrites them later as the kubelet does
//!   when the object changes (a running container sees the new files; nothing restarts);
//! - a PersistentVolumeClaim volume is a folder shared by every pod mounting that claim;
//! - environment: plain values, `fieldRef` (`metadata.name`, `metadata.namespace`,
//!   `status.podIP`, `spec.serviceAccountName`) and `secretKeyRef` / `configMapKeyRef` read from
//!   the API server;
//! - the image's entrypoint when `command` is unset (read from the Dockerfile's runtime stage),
//!   init containers first and each to completion.
//!
//! What differs, each on purpose: each pod has its own loopback address (127.x.y.z) standing in
//! for its pod IP, so a `0.0.0.0:<port>` bind becomes `<that address>:<port>` with the port kept;
//! a path under a mount point is moved under the pod's root folder (no mount namespaces); the
//! binaries are the release build the Dockerfile copies into the image (`target/release`).
//! Security context fields are not enforced (no container runtime).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, KeyToPath, PodSpec, Secret};
use kube::{Api, Client};
use tokio::process::{Child, Command};

/// One pod: its spec, identity, address and files.
pub struct Pod {
    /// Namespace of the pod.
    pub namespace: String,
    /// Name of the pod (what `metadata.name` resolves to).
    pub name: String,
    /// Its stand-in pod IP.
    pub ip: Ipv4Addr,
    /// Root folder of its files (mount points live under it).
    pub root: PathBuf,
    spec: PodSpec,
    claims: PathBuf,
    bin_dir: PathBuf,
    image_entrypoint: Vec<String>,
    image_cmd: Vec<String>,
    client: Client,
}

/// A started container.
pub struct Running {
    /// The process.
    pub child: Child,
    /// Its stderr (JSON logs).
    pub log: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Where the image's binaries are: the release build (`scripts/build-release.sh`, what the
/// Dockerfile copies), or `MEMGATE_RELEASE_DIR`.
pub fn release_dir() -> Result<PathBuf> {
    let dir = match std::env::var_os("MEMGATE_RELEASE_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release"),
    };
    for binary in ["memgate-operator", "memgate-gateway"] {
        ensure!(
            dir.join(binary).is_file(),
            "{} is missing: run ./scripts/build-release.sh first (the test command does)",
            dir.join(binary).display()
        );
    }
    Ok(dir)
}

/// The runtime stage's `ENTRYPOINT` followed by its `CMD` (JSON forms), from the Dockerfile.
pub fn image_entrypoint() -> Result<(Vec<String>, Vec<String>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Dockerfile");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let runtime = text.rsplit_once("\nFROM ").map(|(_, last)| last).context("a runtime stage")?;
    let json_of = |keyword: &str| -> Result<Vec<String>> {
        let line = runtime
            .lines()
            .find_map(|l| l.strip_prefix(keyword))
            .with_context(|| format!("{keyword} in the runtime stage"))?;
        Ok(serde_json::from_str(line.trim())?)
    };
    Ok((json_of("ENTRYPOINT ")?, json_of("CMD ")?))
}

/// This machine's own non-loopback IPv4 address (the one its route to the outside uses; finding it
/// sends nothing). Stands in for the address of a service outside the gateway's pod: a gateway in a
/// cluster refuses loopback upstreams, which are its own pod.
pub fn host_address() -> Result<Ipv4Addr> {
    for probe in ["192.0.2.1:9", "10.255.255.254:9", "8.8.8.8:53"] {
        let Ok(socket) = std::net::UdpSocket::bind("0.0.0.0:0") else { continue };
        if socket.connect(probe).is_err() {
            continue;
        }
        if let Ok(std::net::SocketAddr::V4(local)) = socket.local_addr()
            && !local.ip().is_loopback()
            && !local.ip().is_unspecified()
        {
            return Ok(*local.ip());
        }
    }
    anyhow::bail!("this machine has no non-loopback IPv4 address with a route: the platform test needs one")
}

/// A loopback address nobody else uses in this test run, standing in for a pod IP.
pub fn pod_ip() -> Ipv4Addr {
    let n = GENERATION.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    Ipv4Addr::new(127, 100 + (pid % 100) as u8, ((pid / 100) % 250) as u8 + 1, (n % 250) as u8 + 2)
}

impl Pod {
    /// A pod of `spec` named `name` in `namespace`, its files under `root`, its claims under `claims`.
    pub fn new(client: &Client, namespace: &str, name: &str, spec: PodSpec, root: &Path, claims: &Path) -> Result<Pod> {
        let (image_entrypoint, image_cmd) = image_entrypoint()?;
        std::fs::create_dir_all(root)?;
        Ok(Pod {
            namespace: namespace.into(),
            name: name.into(),
            ip: pod_ip(),
            root: root.into(),
            spec,
            claims: claims.into(),
            bin_dir: release_dir()?,
            image_entrypoint,
            image_cmd,
            client: client.clone(),
        })
    }

    /// The pod spec being run.
    pub fn spec(&self) -> &PodSpec {
        &self.spec
    }

    /// Where a path inside the container is on this machine.
    pub fn host_path(&self, container_path: &str) -> PathBuf {
        self.root.join(container_path.trim_start_matches('/'))
    }

    /// Write (or rewrite) every ConfigMap and Secret volume and link every claim, at each mount
    /// point of every container, with the kubelet's atomic `..data` swap.
    pub async fn sync_volumes(&self) -> Result<()> {
        let containers = self.spec.init_containers.iter().flatten().chain(self.spec.containers.iter());
        for container in containers {
            for mount in container.volume_mounts.iter().flatten() {
                let volume = self
                    .spec
                    .volumes
                    .iter()
                    .flatten()
                    .find(|v| v.name == mount.name)
                    .with_context(|| format!("volume {} of a mount", mount.name))?;
                let dir = self.host_path(&mount.mount_path);
                if let Some(source) = &volume.config_map {
                    let map: ConfigMap =
                        Api::namespaced(self.client.clone(), &self.namespace).get(&source.name).await?;
                    let data = map.data.unwrap_or_default();
                    let files = projected(&data, source.items.as_deref(), |v| v.as_bytes().to_vec())?;
                    write_atomically(&dir, &files)?;
                } else if let Some(source) = &volume.secret {
                    let name = source.secret_name.clone().context("secretName")?;
                    let secret: Secret = Api::namespaced(self.client.clone(), &self.namespace).get(&name).await?;
                    let data = secret.data.unwrap_or_default();
                    let files = projected(&data, source.items.as_deref(), |v| v.0.clone())?;
                    write_atomically(&dir, &files)?;
                } else if let Some(source) = &volume.persistent_volume_claim {
                    let claim = self.claims.join(&source.claim_name);
                    std::fs::create_dir_all(&claim)?;
                    if std::fs::symlink_metadata(&dir).is_err() {
                        std::fs::create_dir_all(dir.parent().context("mount parent")?)?;
                        std::os::unix::fs::symlink(&claim, &dir)?;
                    }
                } else if volume.empty_dir.is_some() {
                    std::fs::create_dir_all(&dir)?;
                } else {
                    bail!("volume {} is of a kind this stand-in does not mount", volume.name);
                }
            }
        }
        Ok(())
    }

    /// Run every init container to completion, then start the containers (in order).
    pub async fn start(&self, extra_env: &[(String, String)]) -> Result<Vec<Running>> {
        self.sync_volumes().await?;
        for init in self.spec.init_containers.iter().flatten() {
            let mut running = self.spawn(init, extra_env).await?;
            let status = running.child.wait().await?;
            ensure!(
                status.success(),
                "init container {} failed ({status}): {}",
                init.name,
                std::fs::read_to_string(&running.log).unwrap_or_default()
            );
        }
        let mut started = Vec::new();
        for container in &self.spec.containers {
            started.push(self.spawn(container, extra_env).await?);
        }
        Ok(started)
    }

    /// Start one container as a process.
    pub async fn spawn(&self, container: &Container, extra_env: &[(String, String)]) -> Result<Running> {
        let (program, args) = self.command_line(container)?;
        let mut env = self.environment(container).await?;
        env.extend(extra_env.iter().cloned());
        let logs = self.root.join("logs");
        std::fs::create_dir_all(&logs)?;
        let log = logs.join(format!("{}.log", container.name));
        let file = std::fs::File::create(&log)?;
        let child = Command::new(&program)
            .args(&args)
            .env_clear()
            .envs(env)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        Ok(Running { child, log })
    }

    /// The program and arguments of `container`, paths and binds moved as the module says.
    pub fn command_line(&self, container: &Container) -> Result<(PathBuf, Vec<String>)> {
        // Kubernetes: `command` replaces ENTRYPOINT (and drops CMD); `args` replaces CMD.
        let mut words: Vec<String> = match (&container.command, &container.args) {
            (Some(command), args) => command.iter().chain(args.iter().flatten()).cloned().collect(),
            (None, Some(args)) => self.image_entrypoint.iter().chain(args.iter()).cloned().collect(),
            (None, None) => self.image_entrypoint.iter().chain(self.image_cmd.iter()).cloned().collect(),
        };
        ensure!(!words.is_empty(), "container {} has nothing to run", container.name);
        let program = words.remove(0);
        let binary = program.rsplit('/').next().unwrap_or(&program).to_string();
        ensure!(
            binary == "memgate-operator" || binary == "memgate-gateway",
            "container {} runs {program}, not a memgate binary",
            container.name
        );
        let mounts: Vec<String> =
            container.volume_mounts.iter().flatten().map(|m| m.mount_path.trim_end_matches('/').to_string()).collect();
        let args = words.into_iter().map(|w| self.relocate(&w, &mounts)).collect();
        Ok((self.bin_dir.join(binary), args))
    }

    /// `0.0.0.0:<port>` becomes this pod's address; a path under a mount point moves under `root`.
    fn relocate(&self, word: &str, mounts: &[String]) -> String {
        if let Some((flag, value)) = word.split_once('=').filter(|(f, _)| f.starts_with("--")) {
            return format!("{flag}={}", self.relocate(value, mounts));
        }
        if let Some(port) = word.strip_prefix("0.0.0.0:") {
            return format!("{}:{port}", self.ip);
        }
        let under_mount = mounts.iter().any(|m| word == m || word.starts_with(&format!("{m}/")));
        if under_mount { self.host_path(word).display().to_string() } else { word.to_string() }
    }

    /// The container's environment, resolved as the kubelet does.
    pub async fn environment(&self, container: &Container) -> Result<Vec<(String, String)>> {
        ensure!(container.env_from.is_none(), "envFrom is not supported by this stand-in");
        let mut out = Vec::new();
        for var in container.env.iter().flatten() {
            out.push((var.name.clone(), self.env_value(var).await?));
        }
        Ok(out)
    }

    async fn env_value(&self, var: &EnvVar) -> Result<String> {
        if let Some(value) = &var.value {
            return Ok(value.replace("0.0.0.0:", &format!("{}:", self.ip)));
        }
        let source = var.value_from.as_ref().with_context(|| format!("env {} has no value", var.name))?;
        if let Some(field) = &source.field_ref {
            return Ok(match field.field_path.as_str() {
                "metadata.name" => self.name.clone(),
                "metadata.namespace" => self.namespace.clone(),
                "status.podIP" => self.ip.to_string(),
                "spec.serviceAccountName" => self.spec.service_account_name.clone().unwrap_or_else(|| "default".into()),
                other => bail!("env {}: fieldRef {other} is not supported by this stand-in", var.name),
            });
        }
        if let Some(key) = &source.secret_key_ref {
            let secret: Secret = Api::namespaced(self.client.clone(), &self.namespace).get(&key.name).await?;
            let value = secret.data.and_then(|d| d.get(&key.key).cloned()).context("secretKeyRef key")?;
            return Ok(String::from_utf8(value.0)?);
        }
        if let Some(key) = &source.config_map_key_ref {
            let map: ConfigMap = Api::namespaced(self.client.clone(), &self.namespace).get(&key.name).await?;
            return map.data.and_then(|d| d.get(&key.key).cloned()).context("configMapKeyRef key");
        }
        bail!("env {}: a valueFrom this stand-in does not resolve", var.name)
    }
}

/// The files of a volume: every key, or only `items` at their paths.
fn projected<V>(
    data: &BTreeMap<String, V>,
    items: Option<&[KeyToPath]>,
    bytes: impl Fn(&V) -> Vec<u8>,
) -> Result<Vec<(String, Vec<u8>)>> {
    match items {
        None => Ok(data.iter().map(|(k, v)| (k.clone(), bytes(v))).collect()),
        Some(items) => items
            .iter()
            .map(|item| {
                let value = data.get(&item.key).with_context(|| format!("key {} of a volume's items", item.key))?;
                Ok((item.path.clone(), bytes(value)))
            })
            .collect(),
    }
}

/// The kubelet's atomic writer: a new `..<generation>` folder, `..data` swapped to it by rename,
/// one top-level symlink per file into `..data`, the previous folder and stale links removed.
fn write_atomically(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let generation = format!("..{}_{}", std::process::id(), GENERATION.fetch_add(1, Ordering::Relaxed));
    let staged = dir.join(&generation);
    std::fs::create_dir(&staged)?;
    for (path, bytes) in files {
        let target = staged.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, bytes)?;
    }
    let data = dir.join("..data");
    let previous = std::fs::read_link(&data).ok();
    let temporary = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(&generation, &temporary)?;
    std::fs::rename(&temporary, &data)?;
    let top: Vec<String> = files.iter().filter_map(|(p, _)| p.split('/').next().map(String::from)).collect();
    for name in &top {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("..") && !top.contains(&name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(previous) = previous.filter(|p| p.as_os_str() != generation.as_str()) {
        std::fs::remove_dir_all(dir.join(previous))?;
    }
    Ok(())
}
