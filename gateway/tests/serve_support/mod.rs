//! Running the real `memgate-gateway serve` binary for tests: a temporary config folder, the child
//! process with its JSON log captured to a file, and a plain HTTP client.
//!
//! The upstream is the raw-socket mem0 OSS server of `tests/support` (speaking `POST /search`).

#![allow(dead_code, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// The upstream credential the configs use; must never appear in a log or response.
pub const UPSTREAM_KEY: &str = "UPSTREAM-KEY-5b7e1d";
/// A caller token the configs use; must never appear in a log or response.
pub const CALLER_TOKEN: &str = "CALLER-TOKEN-93af0c";

/// How long to wait for anything the gateway does on its own (start, reload).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A `MemoryProvider` of the mem0 OSS dialect pointing at `origin`.
pub struct ProviderYaml {
    pub name: String,
    pub origin: String,
    pub access: String,
    pub nexent_search: bool,
    pub mcp: bool,
    pub enabled: bool,
    pub timeout_ms: u32,
    pub scope: String,
    pub credential_secret: String,
}

impl ProviderYaml {
    /// An anonymous provider with Nexent search and MCP on, credential from Secret `upstream`.
    pub fn new(name: &str, origin: &str) -> ProviderYaml {
        ProviderYaml {
            name: name.to_string(),
            origin: origin.to_string(),
            access: "{anonymous: true}".to_string(),
            nexent_search: true,
            mcp: true,
            enabled: true,
            timeout_ms: 5000,
            scope: "{userId: repository-memory, agentId: qwen-code}".to_string(),
            credential_secret: "upstream".to_string(),
        }
    }

    pub fn access(mut self, access: &str) -> ProviderYaml {
        self.access = access.to_string();
        self
    }

    pub fn yaml(&self) -> String {
        format!(
            "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
             enabled: {enabled}\n  dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", \
             allowInsecureHttp: true}}\n  credentials: {{secretRef: {{name: {secret}, key: api-key}}}}\n  scope: {scope}\n  \
             timeoutMs: {timeout}\n  mcp: {{enabled: {mcp}}}\n  nexent: {{search: {nexent}}}\n  access: {access}\n",
            name = self.name,
            enabled = self.enabled,
            origin = self.origin,
            secret = self.credential_secret,
            scope = self.scope,
            timeout = self.timeout_ms,
            mcp = self.mcp,
            nexent = self.nexent_search,
            access = self.access,
        )
    }
}

/// A `v1` Secret in namespace `agents` with one key.
pub fn secret_yaml(name: &str, key: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: agents}}\nstringData: {{{key}: \"{value}\"}}\n"
    )
}

/// The Secret the providers use for the upstream credential.
pub fn upstream_secret() -> String {
    secret_yaml("upstream", "api-key", UPSTREAM_KEY)
}

/// Replace `path` atomically (write + rename), as a config management tool would.
pub fn write_atomically(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp-write");
    std::fs::write(&temporary, text).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

/// A running gateway; killed when dropped.
pub struct Gateway {
    child: Child,
    pub base: String,
    pub log: PathBuf,
    http: reqwest::Client,
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(ToString::to_string)
    }
}

pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().expect("client")
}

fn command(config: &Path, args: &[&str], env: &[(&str, &str)], log: &Path) -> Command {
    command_with_open_files(config, args, env, log, None)
}

/// The gateway's command line; with `open_files`, run under `ulimit -n <open_files>` (through `sh`).
fn command_with_open_files(
    config: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    log: &Path,
    open_files: Option<u64>,
) -> Command {
    let wrapper = open_files.map(|limit| Wrapper::Shell(format!("ulimit -n {limit}")));
    command_wrapped(config, args, env, log, wrapper)
}

/// How the gateway process is started.
enum Wrapper {
    /// Through `sh -c '<snippet> && exec gateway ...'`.
    Shell(String),
    /// In a mount namespace of its own (`unshare --mount`, root or a user namespace) where
    /// `/etc/hosts` is the given file: the system resolver answers with its entries.
    Hosts(PathBuf),
}

fn command_wrapped(
    config: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    log: &Path,
    wrapper: Option<Wrapper>,
) -> Command {
    let log_file = std::fs::File::create(log).expect("log file");
    let binary = env!("CARGO_BIN_EXE_memgate-gateway");
    let mut command = match wrapper {
        Some(Wrapper::Shell(snippet)) => {
            let mut shell = Command::new("sh");
            shell.args(["-c", &format!("{snippet} && exec \"$0\" \"$@\""), binary]);
            shell
        }
        Some(Wrapper::Hosts(hosts)) => {
            let mut unshare = Command::new("unshare");
            // As root a mount namespace is enough; otherwise a user namespace maps the caller to root.
            let root = std::fs::read_to_string("/proc/self/status")
                .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0")));
            if !root {
                unshare.arg("--map-root-user");
            }
            let snippet = format!("mount --bind '{}' /etc/hosts && exec \"$0\" \"$@\"", hosts.display());
            unshare.args(["--mount", "sh", "-c", &snippet, binary]);
            unshare
        }
        None => Command::new(binary),
    };
    command
        .arg("serve")
        .arg("--config")
        .arg(config)
        .args(["--listen", "127.0.0.1:0", "--reload-interval-ms", "100"])
        .args(args)
        .env_remove("EXTERNAL_MEMORY_SEARCH_ENABLED")
        .env_remove("EXTERNAL_MEMORY_INGEST_ENABLED")
        .env_remove("KUBERNETES_SERVICE_HOST")
        // The per-call lines are at debug: with them on, every test's "never in the logs" check
        // also covers what a call logs.
        .env("RUST_LOG", "info,memgate_gateway=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log_file))
        .kill_on_drop(true);
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

impl Gateway {
    /// Start `memgate-gateway serve --config <config>` on a free loopback port and wait until
    /// `/readyz` answers 200. `log_dir` receives `gateway.log`.
    pub async fn start(config: &Path, log_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Gateway {
        Gateway::start_with_open_files(config, log_dir, args, env, None).await
    }

    /// [`Gateway::start`] under `ulimit -n <open_files>` when given.
    pub async fn start_with_open_files(
        config: &Path,
        log_dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        open_files: Option<u64>,
    ) -> Gateway {
        let log = log_dir.join("gateway.log");
        let child =
            command_with_open_files(config, args, env, &log, open_files).spawn().expect("spawn memgate-gateway");
        Gateway::wait_started(child, log).await
    }

    /// Wait until the started `child` listens and answers `/readyz`.
    async fn wait_started(mut child: Child, log: PathBuf) -> Gateway {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let address = loop {
            if let Some(address) = listening_address(&log) {
                break address;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("gateway exited with {status}: {}", std::fs::read_to_string(&log).unwrap_or_default());
            }
            assert!(tokio::time::Instant::now() < deadline, "gateway did not listen: {}", read(&log));
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let gateway = Gateway { child, base: format!("http://{address}"), log, http: http_client() };
        loop {
            if gateway.get("/readyz").await.status == 200 {
                return gateway;
            }
            assert!(tokio::time::Instant::now() < deadline, "gateway never ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// [`Gateway::start`] with `/etc/hosts` replaced by `hosts` for the gateway process only.
    pub async fn start_with_hosts(config: &Path, log_dir: &Path, args: &[&str], hosts: &Path) -> Gateway {
        let log = log_dir.join("gateway.log");
        let child = command_wrapped(config, args, &[], &log, Some(Wrapper::Hosts(hosts.to_path_buf())))
            .spawn()
            .expect("spawn unshare + memgate-gateway");
        Gateway::wait_started(child, log).await
    }

    /// Run the binary on `config` expecting it to exit by itself; its status and log.
    pub async fn run_to_exit(config: &Path, log_dir: &Path) -> (ExitStatus, String) {
        let log = log_dir.join("gateway.log");
        let mut child = command(config, &[], &[], &log).spawn().expect("spawn memgate-gateway");
        let status = tokio::time::timeout(PATIENCE, child.wait()).await.expect("exits").expect("status");
        (status, read(&log))
    }

    pub fn logs(&self) -> String {
        read(&self.log)
    }

    /// `host:port` of the data port.
    pub fn address(&self) -> String {
        self.base.trim_start_matches("http://").to_string()
    }

    /// `http://host:port` of the admin port (`--admin-listen`), from its `admin listening` event.
    pub fn admin_base(&self) -> Option<String> {
        logged_address(&self.log, "admin listening").map(|address| format!("http://{address}"))
    }

    /// GET `url` (any base).
    pub async fn get_url(&self, url: &str) -> Answer {
        answer(self.http.get(url).send().await.expect("GET")).await
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Wait for the process to exit by itself.
    pub async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(PATIENCE, self.child.wait()).await.expect("exits").expect("status")
    }

    pub async fn get(&self, path: &str) -> Answer {
        let response = self.http.get(format!("{}{path}", self.base)).send().await.expect("GET");
        answer(response).await
    }

    /// POST a JSON body with optional `Authorization: Bearer <token>`.
    pub async fn post(&self, path: &str, body: &Value, token: Option<&str>) -> Answer {
        self.post_with(path, body, token, &[]).await
    }

    pub async fn post_with(&self, path: &str, body: &Value, token: Option<&str>, headers: &[(&str, &str)]) -> Answer {
        self.post_raw(path, serde_json::to_vec(body).expect("json"), token, headers).await
    }

    /// POST `body` as JSON (`content-type: application/json` unless `headers` name another).
    pub async fn post_raw(&self, path: &str, body: Vec<u8>, token: Option<&str>, headers: &[(&str, &str)]) -> Answer {
        let mut request = self.http.post(format!("{}{path}", self.base)).body(body);
        if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
            request = request.header("content-type", "application/json");
        }
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        answer(request.send().await.expect("POST")).await
    }

    /// A Nexent search of `provider`.
    pub async fn search(&self, provider: &str, body: &Value, token: Option<&str>) -> Answer {
        self.post(&format!("/nexent/v1/{provider}/search"), body, token).await
    }

    /// An MCP `initialize` request to `/mcp/<provider>`.
    pub async fn mcp_initialize(&self, provider: &str, token: Option<&str>) -> Answer {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
        });
        self.post_with(&format!("/mcp/{provider}"), &body, token, &[("accept", "application/json, text/event-stream")])
            .await
    }

    /// The `/readyz` JSON.
    pub async fn ready(&self) -> Value {
        self.get("/readyz").await.json()
    }

    /// Wait until `/readyz` satisfies `done`.
    pub async fn wait_ready(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let ready = self.ready().await;
            if done(&ready) {
                return ready;
            }
            assert!(tokio::time::Instant::now() < deadline, "{what}: {ready}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn answer(response: reqwest::Response) -> Answer {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    Answer { status, headers, text }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The address of the `listening` log event, once it is written.
fn listening_address(log: &Path) -> Option<String> {
    logged_address(log, "listening")
}

/// The `address` field of the first log event with `message`.
fn logged_address(log: &Path, message: &str) -> Option<String> {
    read(log).lines().find_map(|line| {
        let event: Value = serde_json::from_str(line).ok()?;
        let fields = event.get("fields")?;
        (fields.get("message")?.as_str()? == message).then(|| fields.get("address")?.as_str().map(String::from))?
    })
}

/// `count` mem0 OSS results `m0..`, the last one without a score.
pub fn mem0_results(count: usize) -> Value {
    let results: Vec<Value> = (0..count)
        .map(|i| {
            if i + 1 == count {
                json!({"id": format!("m{i}"), "memory": format!("memory {i}")})
            } else {
                json!({"id": format!("m{i}"), "memory": format!("memory {i}"), "score": 0.9, "updated_at": "2026-08-02T00:00:00Z"})
            }
        })
        .collect();
    json!({"results": results})
}

/// The JSON body of a recorded upstream request.
pub fn body_of(request: &crate::support::Recorded) -> Value {
    serde_json::from_slice(&request.body).expect("upstream request body is JSON")
}

/// A token of ServiceAccount `namespace/name` bound to `audience` (valid 10 minutes), from the
/// API server's TokenRequest; the account is created when missing.
pub async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    audience: &str,
) -> anyhow::Result<String> {
    use anyhow::Context as _;
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{Api, ObjectMeta, PostParams};
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    if accounts.get_opt(name).await?.is_none() {
        let account = ServiceAccount {
            metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
            ..ServiceAccount::default()
        };
        accounts.create(&PostParams::default(), &account).await?;
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![audience.to_string()]),
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued = accounts.create_token_request(name, &PostParams::default(), &request).await?;
    issued.status.and_then(|s| s.token).context("TokenRequest status.token")
}

/// The audit events (one JSON object per line) of the file at `path`, once it holds at least
/// `count` of them or after 10 s (whatever it holds then: the caller asserts the count).
pub async fn audit_events(path: &Path, count: usize) -> anyhow::Result<Vec<Value>> {
    use anyhow::Context;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() >= count || tokio::time::Instant::now() > deadline {
            return lines.iter().map(|l| serde_json::from_str(l).context("an audit line is not JSON")).collect();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
