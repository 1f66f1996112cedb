//! The gateway under test: the release binary (the image's, from `MEMGATE_RELEASE_DIR` when set)
//! serving a config folder of N providers (its memory and CPU: `memgate_e2e::procfs`).

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// The upstream credential of the benchmark's config (the fixed-answer upstream ignores it).
pub const UPSTREAM_KEY: &str = "bench-upstream-key";

/// The gateway binary: `$MEMGATE_RELEASE_DIR/memgate-gateway`, else the one cargo built.
pub fn binary() -> PathBuf {
    match std::env::var_os("MEMGATE_RELEASE_DIR") {
        Some(dir) => PathBuf::from(dir).join("memgate-gateway"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_memgate-gateway")),
    }
}

/// The name of provider `n` of a config (`bench` is the first).
pub fn provider_name(n: usize) -> String {
    if n == 0 { "bench".to_string() } else { format!("bench-{n:04}") }
}

/// A config of `providers` anonymous providers of the mem0 OSS dialect, all pointing at `upstream`.
pub fn config_yaml(providers: usize, upstream: SocketAddr) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: upstream, namespace: bench}}\nstringData: {{api-key: {UPSTREAM_KEY}}}\n"
    );
    for n in 0..providers {
        yaml.push_str(&format!(
            "---\napiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: bench}}\nspec:\n  \
             dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"http://{upstream}\", allowInsecureHttp: true}}\n  \
             credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{userId: bench, agentId: bench}}\n  \
             timeoutMs: 5000\n  mcp: {{enabled: true}}\n  nexent: {{search: true}}\n  access: {{anonymous: true}}\n",
            name = provider_name(n),
        ));
    }
    yaml
}

/// The provider of the load config that points at the slow upstream.
pub const SLOW_PROVIDER: &str = "bench-slow";

/// The provider of the load config that points at the upstream with about 20 KiB answers.
pub const LARGE_PROVIDER: &str = "bench-large";

/// One more provider called `name`, pointing at `upstream`, for the folder of a [`config_yaml`]
/// (it uses that file's Secret).
pub fn provider_yaml(name: &str, upstream: SocketAddr) -> String {
    config_yaml(1, upstream)
        .split("---\n")
        .nth(1)
        .map(|provider| provider.replacen("name: bench,", &format!("name: {name},"), 1))
        .unwrap_or_default()
}

/// Limits every call of the audited benchmark passes through (high enough never to refuse one):
/// the per-caller bucket (one anonymous caller, keyed by address), the upstream rate bucket and
/// the `maxInFlight` slots.
pub const NEVER_REFUSING_LIMITS: &str = "  limits:\n    perCaller: {requestsPerMinute: 1000000, burst: 1000000}\n    \
     upstream: {requestsPerSecond: 100000, maxInFlight: 64}\n";

/// [`config_yaml`] of one provider with [`NEVER_REFUSING_LIMITS`].
pub fn limited_config_yaml(upstream: SocketAddr) -> String {
    format!("{}{NEVER_REFUSING_LIMITS}", config_yaml(1, upstream))
}

/// A running gateway; killed when dropped.
pub struct Gateway {
    child: Child,
    pub base: String,
}

impl Gateway {
    /// Start the gateway on `config` (a folder) and wait until `/readyz` reports `providers`.
    pub fn start(config: &Path, providers: usize, log: &Path) -> Result<Gateway> {
        Gateway::start_with(config, providers, log, &[])
    }

    /// [`Gateway::start`] with more `serve` flags.
    pub fn start_with(config: &Path, providers: usize, log: &Path, args: &[&str]) -> Result<Gateway> {
        let port = free_port()?;
        let child = Command::new(binary())
            .args(["serve", "--config"])
            .arg(config)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .with_context(|| format!("starting {}", binary().display()))?;
        let mut gateway = Gateway { child, base: format!("http://127.0.0.1:{port}") };
        gateway.wait_ready(providers, log)?;
        Ok(gateway)
    }

    fn wait_ready(&mut self, providers: usize, log: &Path) -> Result<()> {
        let started = Instant::now();
        let wanted = format!("\"providers\":{providers},");
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("the gateway exited ({status}):\n{}", std::fs::read_to_string(log).unwrap_or_default());
            }
            if let Ok(body) = http_get(&self.base, "/readyz")
                && body.replace(' ', "").contains(&wanted)
            {
                return Ok(());
            }
            ensure!(started.elapsed() < Duration::from_secs(60), "the gateway never served {providers} providers");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The process id, for `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A plain HTTP/1.1 GET (readiness only): the body of a 200.
fn http_get(base: &str, path: &str) -> Result<String> {
    let (status, body) = exchange("GET", &format!("{base}{path}"), &[], "")?;
    ensure!(status == 200, "{path}: {status}");
    Ok(body)
}

/// One HTTP/1.1 POST on its own connection (the checks before each load): status and body.
pub fn http_post(url: &str, headers: &[(&str, &str)], body: &str) -> Result<(u16, String)> {
    exchange("POST", url, headers, body)
}

fn exchange(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").context("an http URL")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = std::net::TcpStream::connect(authority)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    write!(stream, "{head}\r\n{body}")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).context("a status line")?;
    Ok((status, answer.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}
