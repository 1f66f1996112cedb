//! Starting, watching and stopping one etcd + kube-apiserver pair, and handing out clients for it.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::binaries::Binaries;
use crate::error::Error;
use crate::pki;
use crate::process::{Managed, Watchdog, tail};

/// Label put on every namespace made by [`ControlPlane::new_namespace`].
pub const TEST_NAMESPACE_LABEL: &str = "memgate.dev/e2e";

/// Default time allowed for etcd and then kube-apiserver to become ready.
const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(120);

/// How often startup polls and the monitor thread looks at the processes.
const POLL: Duration = Duration::from_millis(100);

/// Index of etcd in [`Processes::list`].
const ETCD: usize = 0;

/// Index of kube-apiserver in [`Processes::list`].
const APISERVER: usize = 1;

/// How many times a start is retried when a port picked as free was taken meanwhile.
const PORT_RACE_ATTEMPTS: usize = 3;

/// The API server's log file in the control plane's folder (always the current process's log).
const APISERVER_LOG: &str = "kube-apiserver.log";

/// Options for starting a [`ControlPlane`]; [`ControlPlane::start`] uses the defaults.
#[derive(Debug, Clone)]
pub struct Builder {
    binaries: Option<PathBuf>,
    apiserver_args: Vec<String>,
    startup_timeout: Duration,
}

impl Default for Builder {
    fn default() -> Self {
        Self { binaries: None, apiserver_args: Vec::new(), startup_timeout: DEFAULT_STARTUP_TIMEOUT }
    }
}

impl Builder {
    /// Uses the binaries in `dir` instead of discovering them (see [`Binaries::discover`]).
    pub fn binaries_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.binaries = Some(dir.into());
        self
    }

    /// Adds a flag for kube-apiserver, e.g. `--feature-gates=...`; later flags override earlier ones.
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// Time allowed for each process to become ready (default 120 s).
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Starts etcd and kube-apiserver and waits until the API server is ready.
    pub async fn start(self) -> Result<ControlPlane, Error> {
        let binaries = match &self.binaries {
            Some(dir) => Binaries::in_dir(dir)?,
            None => Binaries::discover()?,
        };
        let mut attempt = 1;
        loop {
            match ControlPlane::start_once(&binaries, &self).await {
                Err(Error::ProcessDied { ref tail, .. })
                    if attempt < PORT_RACE_ATTEMPTS && tail.contains("address already in use") =>
                {
                    attempt += 1;
                }
                result => return result,
            }
        }
    }
}

/// A running etcd + kube-apiserver pair on loopback ports, with its own temporary folder (data, certificates,
/// keys, kubeconfig, logs) and an admin identity in `system:masters`.
///
/// Dropping it kills both processes and removes the folder; this also happens when a test panics, because the
/// value is dropped while unwinding. If the test process ends without running `Drop` (a `static`, a signal), a
/// watchdog process does the same (see the `process` module).
///
/// While it runs, a monitor thread writes a message with the last log lines to stderr as soon as a process exits
/// on its own; [`ControlPlane::client`], [`ControlPlane::new_namespace`] and [`ControlPlane::check_alive`] then
/// fail with [`Error::ProcessDied`].
///
/// A test of an API server outage stops kube-apiserver with [`ControlPlane::stop_apiserver`] and starts it again
/// with [`ControlPlane::start_apiserver`] (same address, certificates, keys, flags and etcd, so every object
/// persists); that needs a control plane of its own ([`ControlPlane::start`], not [`ControlPlane::shared`]).
#[derive(Debug)]
pub struct ControlPlane {
    // Field order matters for drop: processes are stopped in `Drop::drop`, the folder goes last.
    processes: Arc<Processes>,
    monitor: Option<JoinHandle<()>>,
    watchdog: Mutex<Watchdog>,
    config: Config,
    base_url: String,
    admin_token: String,
    kubeconfig: PathBuf,
    startup: Duration,
    apiserver: Command,
    startup_timeout: Duration,
    restarts: AtomicUsize,
    shared: bool,
    dir: tempfile::TempDir,
}

/// How kube-apiserver was started, to start it again the same way.
#[derive(Debug, Clone)]
struct Command {
    program: PathBuf,
    args: Vec<String>,
}

/// The processes (etcd, then kube-apiserver), shared with the monitor thread.
///
/// The list is behind a lock so that a restarted kube-apiserver can take its slot; `apiserver_down` (changed
/// only while holding the write lock, read while holding a read lock) says it was stopped on purpose, so neither
/// the monitor nor [`Processes::check`] counts its exit as a death.
#[derive(Debug, Default)]
struct Processes {
    list: RwLock<Vec<Managed>>,
    apiserver_down: AtomicBool,
    stopping: AtomicBool,
    died: OnceLock<Error>,
}

impl Processes {
    fn read(&self) -> RwLockReadGuard<'_, Vec<Managed>> {
        self.list.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<Managed>> {
        self.list.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a process while launching (before the list is shared).
    fn push(&mut self, process: Managed) {
        self.list.get_mut().unwrap_or_else(PoisonError::into_inner).push(process);
    }

    /// A death already reported by the monitor, or else the first process that has exited on its own.
    fn check(&self, phase: &'static str) -> Result<(), Error> {
        if let Some(died) = self.died.get() {
            return Err(died.clone());
        }
        self.exited(phase)
    }

    /// `Err(ProcessDied)` for the first process that has exited, not counting an API server stopped on purpose.
    fn exited(&self, phase: &'static str) -> Result<(), Error> {
        let list = self.read();
        let down = self.apiserver_down.load(Ordering::SeqCst);
        list.iter()
            .enumerate()
            .filter(|(i, _)| !(down && *i == APISERVER))
            .try_for_each(|(_, p)| p.check_running(phase))
    }

    /// `Err(ProcessDied)` when process `index` has exited, whether or not it counts as stopped on purpose.
    fn exited_one(&self, index: usize, phase: &'static str) -> Result<(), Error> {
        self.read().get(index).map_or(Ok(()), |p| p.check_running(phase))
    }

    fn pids(&self) -> Vec<u32> {
        self.read().iter().map(Managed::pid).collect()
    }

    /// Name and log file of process `index`, for a readiness timeout.
    fn blame(&self, index: usize) -> (&'static str, PathBuf) {
        self.read().get(index).map_or(("control plane", PathBuf::new()), |p| (p.name(), p.log().to_path_buf()))
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        // The API server first, so it does not log a storm of etcd connection errors.
        for process in self.read().iter().rev() {
            process.kill();
        }
    }
}

/// What a successful launch hands to the [`ControlPlane`].
struct Launched {
    config: Config,
    base_url: String,
    admin_token: String,
    kubeconfig: PathBuf,
    etcd_ready: Duration,
    apiserver: Command,
}

impl ControlPlane {
    /// Starts a control plane with default options.
    pub async fn start() -> Result<Self, Error> {
        Builder::default().start().await
    }

    /// Options for starting a control plane.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// One control plane for the whole test binary, started by the first caller. Tests sharing it should each
    /// work in their own namespace ([`ControlPlane::new_namespace`]). It is never dropped; the watchdog stops it
    /// when the test process exits. A failed start is remembered and returned to every later caller.
    pub async fn shared() -> Result<&'static Self, Error> {
        static SHARED: tokio::sync::OnceCell<Result<ControlPlane, Error>> = tokio::sync::OnceCell::const_new();
        let start = || async {
            let mut control_plane = Self::start().await?;
            control_plane.shared = true;
            Ok(control_plane)
        };
        SHARED.get_or_init(start).await.as_ref().map_err(Clone::clone)
    }

    async fn start_once(binaries: &Binaries, options: &Builder) -> Result<Self, Error> {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("memgate-e2e-")
            .tempdir()
            .map_err(|e| Error::io("creating the control plane's temporary folder", e))?;
        let mut watchdog = Watchdog::start(dir.path())?;
        let mut processes = Processes::default();
        let launched = launch(dir.path(), binaries, options, started, &mut watchdog, &mut processes).await;
        let launched = match launched {
            Ok(launched) => launched,
            Err(e) => {
                processes.stop();
                watchdog.disarm();
                return Err(e);
            }
        };
        let startup = started.elapsed();
        eprintln!(
            "memgate-e2e: control plane ready at {} in {:.1} s (etcd ready after {:.1} s); folder {}",
            launched.base_url,
            startup.as_secs_f64(),
            launched.etcd_ready.as_secs_f64(),
            dir.path().display()
        );
        let processes = Arc::new(processes);
        let monitor = spawn_monitor(Arc::clone(&processes));
        Ok(Self {
            processes,
            monitor: Some(monitor),
            watchdog: Mutex::new(watchdog),
            config: launched.config,
            base_url: launched.base_url,
            admin_token: launched.admin_token,
            kubeconfig: launched.kubeconfig,
            startup,
            apiserver: launched.apiserver,
            startup_timeout: options.startup_timeout,
            restarts: AtomicUsize::new(0),
            shared: false,
            dir,
        })
    }

    /// A new client authenticated as the admin (`system:masters`), default namespace `default`.
    ///
    /// Call it from within a Tokio runtime (a client spawns a task there), once per test: a client must not be
    /// used after the runtime it was made in has ended. Fails with [`Error::ProcessDied`] if a process has exited.
    pub fn client(&self) -> Result<Client, Error> {
        self.check_alive()?;
        Client::try_from(self.config.clone()).map_err(|e| Error::kube("building a client", e))
    }

    /// The client configuration behind [`ControlPlane::client`], e.g. to change timeouts or impersonate.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The kubeconfig file for this control plane (admin token, CA file, context `memgate-e2e`), e.g. for
    /// `kubectl --kubeconfig` or for a process under test. It lives as long as the control plane.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The admin's bearer token (member of `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// The PEM file of the CA that signed the API server's serving certificate.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The temporary folder holding data, keys, kubeconfig and the `etcd.log` / `kube-apiserver.log` files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// How long the start took, from creating the folder until the API server was ready.
    pub fn startup_duration(&self) -> Duration {
        self.startup
    }

    /// The process ids of etcd and kube-apiserver (the latest kube-apiserver after a restart).
    pub fn pids(&self) -> Vec<u32> {
        self.processes.pids()
    }

    /// `Err(ProcessDied)` naming the process and showing its last log lines if etcd or kube-apiserver has exited.
    /// An API server stopped with [`ControlPlane::stop_apiserver`] does not count.
    pub fn check_alive(&self) -> Result<(), Error> {
        self.processes.check("while tests were running")
    }

    /// Whether kube-apiserver is stopped on purpose ([`ControlPlane::stop_apiserver`]) and not started again yet.
    pub fn apiserver_stopped(&self) -> bool {
        self.processes.apiserver_down.load(Ordering::SeqCst)
    }

    /// Kills kube-apiserver (SIGKILL, as a crash or a lost node would) and waits until it has exited; etcd keeps
    /// running, so every object persists. Clients keep their configuration; their calls fail to connect until
    /// [`ControlPlane::start_apiserver`]. Doing nothing when it is already stopped.
    ///
    /// Fails with [`Error::SharedControlPlane`] on [`ControlPlane::shared`] (other tests use it) and with
    /// [`Error::ProcessDied`] if a process had already exited on its own.
    pub async fn stop_apiserver(&self) -> Result<(), Error> {
        self.ensure_dedicated("stop")?;
        self.check_alive()?;
        let list = self.processes.write();
        if !self.processes.apiserver_down.swap(true, Ordering::SeqCst)
            && let Some(apiserver) = list.get(APISERVER)
        {
            apiserver.kill();
            eprintln!("memgate-e2e: kube-apiserver (pid {}) stopped at {}", apiserver.pid(), self.base_url);
        }
        drop(list);
        self.rearm_watchdog(&[ETCD])
    }

    /// Starts kube-apiserver again after [`ControlPlane::stop_apiserver`], on the same address with the same
    /// flags, certificates, keys and etcd, and waits (up to the startup timeout) until `/readyz` answers and
    /// namespace `default` exists. The previous process's log is kept as `kube-apiserver.before-restart-<n>.log`.
    /// Doing nothing when it runs.
    ///
    /// When the port was taken meanwhile the start is retried; if the new process does not become ready it is
    /// killed, the API server stays stopped and the error names why ([`Error::ProcessDied`],
    /// [`Error::NotReady`]). Fails with [`Error::SharedControlPlane`] on [`ControlPlane::shared`].
    pub async fn start_apiserver(&self) -> Result<(), Error> {
        self.ensure_dedicated("start")?;
        self.check_alive()?;
        if !self.apiserver_stopped() {
            return Ok(());
        }
        let started = Instant::now();
        let mut attempt = 1;
        loop {
            match self.restart_once().await {
                Err(Error::ProcessDied { ref tail, .. })
                    if attempt < PORT_RACE_ATTEMPTS && tail.contains("address already in use") =>
                {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(e),
                Ok(()) => break,
            }
        }
        eprintln!(
            "memgate-e2e: kube-apiserver (pid {}) ready again at {} in {:.1} s",
            self.pids().get(APISERVER).copied().unwrap_or_default(),
            self.base_url,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Replaces the watchdog with one guarding only the processes `running`, so it never kills a pid the system
    /// may have handed to another process since one of ours exited.
    fn rearm_watchdog(&self, running: &[usize]) -> Result<(), Error> {
        let mut fresh = Watchdog::start(self.dir.path())?;
        let pids = self.processes.pids();
        for pid in running.iter().filter_map(|i| pids.get(*i)) {
            if let Err(e) = fresh.guard(*pid) {
                fresh.disarm();
                return Err(e);
            }
        }
        let mut watchdog = self.watchdog.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *watchdog, fresh).disarm();
        Ok(())
    }

    fn ensure_dedicated(&self, action: &'static str) -> Result<(), Error> {
        if self.shared { Err(Error::SharedControlPlane { action }) } else { Ok(()) }
    }

    /// One start of kube-apiserver into its slot; it counts as running only once ready.
    async fn restart_once(&self) -> Result<(), Error> {
        let restart = self.restarts.fetch_add(1, Ordering::SeqCst) + 1;
        let log = self.dir.path().join(APISERVER_LOG);
        let kept = self.dir.path().join(format!("kube-apiserver.before-restart-{restart}.log"));
        std::fs::rename(&log, &kept)
            .map_err(|e| Error::io(format!("keeping {} as {}", log.display(), kept.display()), e))?;
        let apiserver = Managed::spawn("kube-apiserver", &self.apiserver.program, &self.apiserver.args, log)?;
        if let Some(slot) = self.processes.write().get_mut(APISERVER) {
            *slot = apiserver;
        }
        self.rearm_watchdog(&[ETCD, APISERVER])?;
        let alive = || {
            self.processes.check("while kube-apiserver was restarting")?;
            self.processes.exited_one(APISERVER, "during restart")
        };
        let ready = wait_serving(&self.config, &self.processes, alive, self.startup_timeout).await;
        let list = self.processes.write();
        match ready {
            Ok(()) => self.processes.apiserver_down.store(false, Ordering::SeqCst),
            Err(_) => {
                if let Some(apiserver) = list.get(APISERVER) {
                    apiserver.kill();
                }
                drop(list);
                self.rearm_watchdog(&[ETCD])?;
            }
        }
        ready
    }

    /// Creates a fresh namespace named `<prefix>-<random suffix>` (so `prefix` must be a lowercase DNS label,
    /// at most 57 characters) labelled [`TEST_NAMESPACE_LABEL`], and returns its name. Namespaces are never
    /// deleted: without the namespace controller they would only hang in `Terminating`.
    pub async fn new_namespace(&self, prefix: &str) -> Result<String, Error> {
        let api: Api<Namespace> = Api::all(self.client()?);
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                labels: Some(BTreeMap::from([(TEST_NAMESPACE_LABEL.to_owned(), "true".to_owned())])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &namespace).await {
            Ok(created) => created.metadata.name.ok_or_else(|| {
                Error::kube(
                    "creating a test namespace",
                    kube::Error::Service("the API server returned a namespace without a name".into()),
                )
            }),
            Err(e) => {
                self.check_alive()?;
                Err(Error::kube(format!("creating a namespace with prefix {prefix:?}"), e))
            }
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.watchdog.get_mut().unwrap_or_else(|p| p.into_inner()).disarm();
        self.processes.stop();
        if let Some(monitor) = self.monitor.take() {
            let _ = monitor.join();
        }
        // `self.dir` (a TempDir) removes the folder when the fields drop, after the processes are gone.
    }
}

/// Starts etcd and kube-apiserver in `root`, registering each with `processes` and the watchdog, and waits until
/// the API server is ready. The caller stops whatever was started when this fails.
async fn launch(
    root: &Path,
    binaries: &Binaries,
    options: &Builder,
    started: Instant,
    watchdog: &mut Watchdog,
    processes: &mut Processes,
) -> Result<Launched, Error> {
    let [etcd_port, etcd_peer_port, apiserver_port] = free_ports()?;

    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
    let etcd_args = vec![
        "--name=memgate-e2e".to_owned(),
        format!("--data-dir={}", root.join("etcd-data").display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={etcd_peer_url}"),
        format!("--initial-advertise-peer-urls={etcd_peer_url}"),
        format!("--initial-cluster=memgate-e2e={etcd_peer_url}"),
        "--unsafe-no-fsync=true".to_owned(),
    ];
    let etcd = Managed::spawn("etcd", &binaries.etcd(), &etcd_args, root.join("etcd.log"))?;
    let etcd_pid = etcd.pid();
    processes.push(etcd);
    watchdog.guard(etcd_pid)?;

    // The admin identity and the service account key are made while etcd starts.
    let admin_token = pki::random_token()?;
    let tokens = root.join("tokens.csv");
    write(&tokens, &format!("{admin_token},memgate-e2e-admin,memgate-e2e-admin,\"system:masters\"\n"))?;
    let sa_key = root.join("service-account.key");
    pki::rsa_private_key(&sa_key).await?;

    let alive = || processes.check("during startup");
    wait_for(processes, ETCD, alive, options.startup_timeout, "GET /health", || etcd_healthy(etcd_port)).await?;
    let etcd_ready = started.elapsed();

    let base_url = format!("https://127.0.0.1:{apiserver_port}");
    let cert_dir = root.join("apiserver-certs");
    let mut apiserver_args = vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--secure-port={apiserver_port}"),
        "--bind-address=127.0.0.1".to_owned(),
        "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
        "--authorization-mode=RBAC".to_owned(),
        "--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection".to_owned(),
        format!("--service-account-issuer={base_url}/"),
        format!("--service-account-key-file={}", sa_key.display()),
        format!("--service-account-signing-key-file={}", sa_key.display()),
        format!("--token-auth-file={}", tokens.display()),
        "--allow-privileged=true".to_owned(),
    ];
    apiserver_args.extend(options.apiserver_args.iter().cloned());
    let command = Command { program: binaries.kube_apiserver(), args: apiserver_args };
    let apiserver = Managed::spawn("kube-apiserver", &command.program, &command.args, root.join(APISERVER_LOG))?;
    let apiserver_pid = apiserver.pid();
    processes.push(apiserver);
    watchdog.guard(apiserver_pid)?;

    let (config, kubeconfig) =
        connect(root, &base_url, &admin_token, &cert_dir, processes, options.startup_timeout).await?;
    Ok(Launched { config, base_url, admin_token, kubeconfig, etcd_ready, apiserver: command })
}

/// Picks distinct free loopback ports (they could be taken again before use; [`Builder::start`] retries then).
fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    let listeners = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::io("finding a free loopback port", e))?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr().map_err(|e| Error::io("finding a free loopback port", e))?.port();
    }
    Ok(ports)
}

fn write(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// Polls `ready` until it answers true, failing early when `alive` fails (a process exited) and at the deadline,
/// when the error names process `waiting`.
async fn wait_for<F, Fut>(
    processes: &Processes,
    waiting: usize,
    alive: impl Fn() -> Result<(), Error>,
    timeout: Duration,
    condition: &str,
    mut ready: F,
) -> Result<(), Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        alive()?;
        if ready().await {
            return Ok(());
        }
        if started.elapsed() > timeout {
            let (process, log) = processes.blame(waiting);
            return Err(Error::NotReady {
                process,
                condition: condition.to_owned(),
                waited: started.elapsed(),
                tail: tail(&log),
                log,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `GET /health` on etcd's client URL answers `"health":"true"`.
async fn etcd_healthy(port: u16) -> bool {
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        std::io::Result::Ok(String::from_utf8_lossy(&response).contains("\"health\":\"true\""))
    };
    matches!(tokio::time::timeout(Duration::from_secs(2), probe).await, Ok(Ok(true)))
}

/// Waits for the serving certificate, writes the CA and the kubeconfig, and waits until `/readyz` answers and
/// namespace `default` exists.
async fn connect(
    root: &Path,
    base_url: &str,
    admin_token: &str,
    cert_dir: &Path,
    processes: &Processes,
    timeout: Duration,
) -> Result<(Config, PathBuf), Error> {
    let started = Instant::now();
    // kube-apiserver writes a self-signed serving certificate followed by its CA to <cert-dir>/apiserver.crt.
    let serving_cert = cert_dir.join("apiserver.crt");
    let alive = || processes.check("during startup");
    wait_for(processes, APISERVER, alive, timeout, "serving certificate written", || async {
        pki::ca_of_bundle(&serving_cert).is_some()
    })
    .await?;
    let ca = pki::ca_of_bundle(&serving_cert).ok_or_else(|| Error::Kubeconfig {
        path: serving_cert.clone(),
        message: "no CA certificate after the serving certificate".to_owned(),
    })?;
    let ca_path = root.join("ca.crt");
    write(&ca_path, &ca)?;

    let kubeconfig = root.join("kubeconfig");
    write(&kubeconfig, &kubeconfig_yaml(base_url, &ca_path, admin_token))?;
    let config = Config::from_custom_kubeconfig(
        Kubeconfig::read_from(&kubeconfig)
            .map_err(|e| Error::Kubeconfig { path: kubeconfig.clone(), message: e.to_string() })?,
        &KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| Error::Kubeconfig { path: kubeconfig.clone(), message: e.to_string() })?;
    let remaining = timeout.saturating_sub(started.elapsed());
    wait_serving(&config, processes, || processes.check("during startup"), remaining).await?;
    Ok((config, kubeconfig))
}

/// Waits until the API server's `/readyz` answers `ok` and namespace `default` exists, failing early when `alive`
/// fails.
async fn wait_serving(
    config: &Config,
    processes: &Processes,
    alive: impl Fn() -> Result<(), Error>,
    timeout: Duration,
) -> Result<(), Error> {
    let started = Instant::now();
    let client = Client::try_from(config.clone()).map_err(|e| Error::kube("building a client", e))?;
    wait_for(processes, APISERVER, &alive, timeout, "GET /readyz", || async {
        let request = http::Request::get("/readyz").body(Vec::new());
        match request {
            Ok(request) => client.request_text(request).await.is_ok_and(|body| body.trim() == "ok"),
            Err(_) => false,
        }
    })
    .await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let remaining = timeout.saturating_sub(started.elapsed());
    wait_for(processes, APISERVER, &alive, remaining, "namespace default exists", || async {
        namespaces.get_opt("default").await.is_ok_and(|ns| ns.is_some())
    })
    .await
}

/// A kubeconfig with one cluster, one token user and one context, all named `memgate-e2e`.
fn kubeconfig_yaml(base_url: &str, ca_path: &Path, token: &str) -> String {
    // JSON strings are valid YAML double-quoted scalars.
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: memgate-e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n\
         users:\n\
         - name: memgate-e2e-admin\n  user:\n    token: {token}\n\
         contexts:\n\
         - name: memgate-e2e\n  context:\n    cluster: memgate-e2e\n    user: memgate-e2e-admin\n    namespace: default\n\
         current-context: memgate-e2e\n",
        server = quote(base_url),
        ca = quote(&ca_path.to_string_lossy()),
        token = quote(token),
    )
}

/// Watches the processes and reports the first unexpected exit on stderr at once, bypassing libtest's output
/// capture (which would hide it in whichever test happened to start the control plane).
fn spawn_monitor(processes: Arc<Processes>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name("memgate-e2e-monitor".to_owned())
        .spawn(move || {
            while !processes.stopping.load(Ordering::SeqCst) {
                if let Err(died) = processes.exited("while tests were running") {
                    if !processes.stopping.load(Ordering::SeqCst) {
                        let _ = writeln!(std::io::stderr(), "memgate-e2e: {died}");
                        let _ = processes.died.set(died);
                    }
                    return;
                }
                std::thread::sleep(POLL);
            }
        })
        .unwrap_or_else(|e| panic!("memgate-e2e: could not start the monitor thread: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_is_parsed_by_kube() {
        let yaml = kubeconfig_yaml("https://127.0.0.1:6443", Path::new("/tmp/x y/ca.crt"), "t0k\"en");
        let parsed = Kubeconfig::from_yaml(&yaml).expect("valid kubeconfig");
        assert_eq!(parsed.current_context.as_deref(), Some("memgate-e2e"));
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(cluster.certificate_authority.as_deref(), Some("/tmp/x y/ca.crt"));
    }

    #[test]
    fn free_ports_are_distinct() {
        let [a, b, c] = free_ports().expect("ports");
        assert!(a != b && b != c && a != c);
    }
}
