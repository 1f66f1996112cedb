//! The peer of issue 24: nginx (Debian's `nginx-light`) as a plain reverse-proxy hop to the same
//! fixed-answer upstream, so memgate's cost per call is read against a proxy that does no work of
//! its own. Started from a config written into the benchmark's work folder (nothing outside it),
//! with as many workers as cores, like the gateway's runtime; its CPU time is the master's plus
//! every worker's.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use memgate_e2e::procfs;

/// Where Debian installs the binary (not on a non-root `PATH`).
const NGINX: &str = "/usr/sbin/nginx";

/// A running nginx; stopped when dropped.
pub struct Nginx {
    child: Child,
    pub address: SocketAddr,
}

impl Nginx {
    /// Start nginx proxying `POST /search` (and everything else) to `upstream`, in `dir`.
    pub fn start(dir: &Path, upstream: SocketAddr) -> Result<Nginx> {
        ensure!(Path::new(NGINX).exists(), "{NGINX} is missing: bench/run.sh installs nginx-light");
        std::fs::create_dir_all(dir)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let config = dir.join("nginx.conf");
        std::fs::write(&config, config_text(dir, address, upstream))?;
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {NGINX}"))?;
        let mut nginx = Nginx { child, address };
        nginx.wait_listening(&dir.join("error.log"))?;
        Ok(nginx)
    }

    fn wait_listening(&mut self, log: &Path) -> Result<()> {
        let started = Instant::now();
        while std::net::TcpStream::connect(self.address).is_err() {
            if let Some(status) = self.child.try_wait()? {
                bail!("nginx exited ({status}):\n{}", std::fs::read_to_string(log).unwrap_or_default());
            }
            ensure!(started.elapsed() < Duration::from_secs(20), "nginx never listened on {}", self.address);
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// CPU time (user + system) of the master and all its workers so far.
    pub fn cpu_time(&self) -> Result<Duration> {
        let master = self.child.id();
        let mut total = procfs::cpu_time(master)?;
        for worker in children(master) {
            // A worker that exited between listing and reading has nothing left to add.
            total += procfs::cpu_time(worker).unwrap_or_default();
        }
        Ok(total)
    }
}

impl Drop for Nginx {
    /// Fast shutdown: SIGTERM to the master, which stops its workers and exits after them. A master
    /// killed outright would leave its workers running (they do not notice the master is gone), so
    /// SIGKILL goes to the workers too, and only when the master has not exited within 5 s.
    fn drop(&mut self) {
        let master = self.child.id();
        let workers = children(master);
        if signal("TERM", master) && self.exited_within(Duration::from_secs(5)) {
            return;
        }
        for worker in workers {
            signal("KILL", worker);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Nginx {
    /// Whether the master exited (and was reaped) within `limit`.
    fn exited_within(&mut self, limit: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < limit {
            match self.child.try_wait() {
                Ok(Some(_)) => return true,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => return false,
            }
        }
        false
    }
}

/// Send `SIGname` to `pid` with kill(1) (no `unsafe` here); whether it was delivered.
fn signal(name: &str, pid: u32) -> bool {
    Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The pids whose parent is `parent` (from `/proc/<pid>/stat`, field 4).
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
            ppid.and_then(|p| p.parse::<u32>().ok()) == Some(parent)
        })
        .collect()
}

/// The config: workers per core, no access log, pooled keep-alive connections to the upstream,
/// every path nginx writes inside `dir`.
fn config_text(dir: &Path, listen: SocketAddr, upstream: SocketAddr) -> String {
    let path = |name: &str| -> PathBuf { dir.join(name) };
    format!(
        "daemon off;\nmaster_process on;\nworker_processes auto;\npid {pid};\nerror_log {error} warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {body};\n  proxy_temp_path {proxy};\n  \
         fastcgi_temp_path {fastcgi};\n  uwsgi_temp_path {uwsgi};\n  scgi_temp_path {scgi};\n  \
         upstream mem0 {{ server {upstream}; keepalive 64; }}\n  \
         server {{\n    listen {listen};\n    location / {{\n      proxy_pass http://mem0;\n      \
         proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }}\n  }}\n}}\n",
        pid = path("nginx.pid").display(),
        error = path("error.log").display(),
        body = path("client_body").display(),
        proxy = path("proxy").display(),
        fastcgi = path("fastcgi").display(),
        uwsgi = path("uwsgi").display(),
        scgi = path("scgi").display(),
    )
}
