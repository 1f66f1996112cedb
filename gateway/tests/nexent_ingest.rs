//! `POST /nexent/v1/{provider}/ingest` of the running binary against the running
//! `memgate-gateway dev-upstream` binary: the Nexent result shape, searchability, exactly-once
//! storage under Nexent's retries (one process, and two processes sharing a real `redis-server`),
//! the kill switch, 404s, and call-level failures as the search error JSON.

mod ingest_support;
mod serve_support;
mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use ingest_support::{RedisServer, free_port};
use serde_json::{Value, json};
use serve_support::{Answer, CALLER_TOKEN, Gateway, PATIENCE, http_client, secret_yaml};
use tokio::process::{Child, Command};

const UPSTREAM_KEY: &str = "DEV-UPSTREAM-KEY-77c1";
const USER: &str = "repository-memory";
const AGENT: &str = "qwen-code";

/// A running `memgate-gateway dev-upstream`; killed when dropped.
struct DevUpstream {
    _child: Child,
    origin: String,
}

impl DevUpstream {
    async fn start(dir: &Path) -> DevUpstream {
        let port = free_port();
        let log = dir.join(format!("dev-upstream-{port}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_memgate-gateway"))
            .args(["dev-upstream", "--listen", &format!("127.0.0.1:{port}"), "--api-key", UPSTREAM_KEY])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).expect("log")))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn dev-upstream");
        let origin = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + PATIENCE;
        let http = http_client();
        loop {
            let ready = http.get(format!("{origin}/memories?user_id=x")).header("x-api-key", UPSTREAM_KEY).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return DevUpstream { _child: child, origin };
            }
            assert!(tokio::time::Instant::now() < deadline, "dev-upstream did not start");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The memories stored in the providers' scope, as text.
    async fn stored(&self) -> Vec<String> {
        let url = format!("{}/memories?user_id={USER}&agent_id={AGENT}", self.origin);
        let answer: Value = http_client()
            .get(url)
            .header("x-api-key", UPSTREAM_KEY)
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|m| m["memory"].as_str().expect("text").into())
            .collect()
    }
}

/// A mem0 OSS provider at `origin` with Nexent search and `ingest`.
fn provider(name: &str, origin: &str, ingest: bool, access: &str) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", allowInsecureHttp: true}}\n  \
         credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{userId: {USER}, agentId: {AGENT}}}\n  \
         timeoutMs: 5000\n  nexent: {{search: true, ingest: {ingest}}}\n  access: {access}\n"
    )
}

fn config(dir: &Path, upstream_key: &str, providers: &[String]) {
    let mut text = secret_yaml("upstream", "api-key", upstream_key);
    text.push_str("---\n");
    text.push_str(&secret_yaml("callers", "token", CALLER_TOKEN));
    for provider in providers {
        text.push_str("---\n");
        text.push_str(provider);
    }
    std::fs::write(dir.join("gateway.yaml"), text).expect("write config");
}

fn request(key: &str, units: &[(&str, &str)]) -> Value {
    let units: Vec<Value> = units
        .iter()
        .map(|(event, content)| {
            json!({"event_id": event, "event_type": "message", "unit_type": "fact", "unit_content": content,
                   "unit_index": null, "metadata": {"turn": 1}})
        })
        .collect();
    json!({"tenant_id": "tenant-x", "user_id": "user-x", "agent_id": "agent-x", "conversation_id": "conv-x",
           "units": units, "idempotency_key": key, "metadata": {}})
}

async fn ingest(gateway: &Gateway, provider: &str, body: &Value, token: Option<&str>) -> Answer {
    gateway.post(&format!("/nexent/v1/{provider}/ingest"), body, token).await
}

fn assert_error(answer: &Answer, status: u16, code: &str, severity: &str) {
    assert_eq!(answer.status, status, "{}", answer.text);
    let body = answer.json();
    assert_eq!((body["code"].as_str(), body["severity"].as_str()), (Some(code), Some(severity)), "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(4), "{body}");
    for secret in [UPSTREAM_KEY, CALLER_TOKEN, "tenant-x", "user-x", "127.0.0.1"] {
        assert!(!answer.text.contains(secret), "{secret} leaked: {}", answer.text);
    }
}

#[tokio::test]
async fn ingested_units_are_stored_once_and_found_by_search() {
    let dir = tempfile::tempdir().expect("tempdir");
    let upstream = DevUpstream::start(dir.path()).await;
    config(dir.path(), UPSTREAM_KEY, &[provider("repo-memory", &upstream.origin, true, "{anonymous: true}")]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;

    let body = request(
        "nexent:tenant-x:agent-x:user-x:conv-x:message:e1",
        &[("e1", "Release branches are cut on Tuesdays."), ("e2", "The staging cluster is eu-west.")],
    );
    let answer = ingest(&gateway, "repo-memory", &body, None).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.header("content-type").as_deref(), Some("application/json"));
    assert_eq!(
        answer.json(),
        json!({"provider": "repo-memory", "status": "ok", "accepted_count": 2, "rejected_count": 0, "message": null,
               "unit_results": [{"unit_id": "e1", "status": "accepted", "message": null},
                                {"unit_id": "e2", "status": "accepted", "message": null}]})
    );
    let found = gateway.search("repo-memory", &json!({"query": "release branches tuesdays"}), None).await;
    assert_eq!(found.status, 200, "{}", found.text);
    assert_eq!(found.json()[0]["content"], "Release branches are cut on Tuesdays.", "{}", found.text);

    // Nexent's retry loop sends the same request again: nothing is written twice.
    for _ in 0..3 {
        let again = ingest(&gateway, "repo-memory", &body, None).await;
        assert_eq!(again.json()["accepted_count"], 2, "{}", again.text);
    }
    assert_eq!(upstream.stored().await, ["Release branches are cut on Tuesdays.", "The staging cluster is eu-west."]);

    let metrics = gateway.get("/metrics").await.text;
    assert!(metrics.contains("operation=\"nexent_ingest\",outcome=\"ok\""), "{metrics}");
    assert!(metrics.contains(
        "memgate_gateway_ingest_units_total{provider=\"repo-memory\",operation=\"nexent_ingest\",outcome=\"accepted\",error_code=\"\"} 8"
    ));
    let logs = gateway.logs();
    assert!(logs.contains("\"message\":\"ingest finished\""), "{logs}");
    for secret in ["Release branches", "tenant-x", "user-x", "nexent:tenant-x", UPSTREAM_KEY] {
        assert!(!logs.contains(secret), "{secret} in logs");
    }
}

#[tokio::test]
async fn an_upstream_500_is_a_degraded_unit_and_nexent_retries_write_nothing_more() {
    // The upstream answers 500 to the first add (it may have stored the unit) and succeeds after.
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&answered);
    let upstream = support::Server::start(move |_| {
        if count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            support::Reply::status_json(500, &json!({"detail": "upstream-detail-1f0c"}))
        } else {
            support::Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    config(dir.path(), UPSTREAM_KEY, &[provider("repo-memory", &upstream.origin(), true, "{anonymous: true}")]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    let body = request("nexent:tenant-x:agent-x:user-x:conv-x:message:e1", &[("e1", "Maybe stored.")]);

    // Nexent's first call and its three retries with the same idempotency key.
    for attempt in 0..4 {
        let answer = ingest(&gateway, "repo-memory", &body, None).await;
        assert_eq!(answer.status, 200, "attempt {attempt}: {}", answer.text);
        let result = answer.json();
        assert_eq!(
            (&result["status"], &result["accepted_count"], &result["unit_results"][0]["status"]),
            (&json!("error"), &json!(0), &json!("degraded")),
            "attempt {attempt}: {result}"
        );
        assert!(!answer.text.contains("upstream-detail-1f0c"), "{}", answer.text);
    }
    assert_eq!(upstream.requests().len(), 1, "the unit was sent upstream once");
}

#[tokio::test]
async fn two_gateways_sharing_redis_store_one_memory() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let upstream = DevUpstream::start(dir.path()).await;
    config(dir.path(), UPSTREAM_KEY, &[provider("repo-memory", &upstream.origin, true, "{anonymous: true}")]);
    let (logs_a, logs_b) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let ledger = ["--ledger", &redis.url()];
    let a = Gateway::start(dir.path(), logs_a.path(), &ledger, &[]).await;
    let b = Gateway::start(dir.path(), logs_b.path(), &ledger, &[]).await;

    // Three attempts alternating between replicas, then two at once.
    let body = request("nexent:t:a:u:c:message:shared", &[("shared", "Deploy freezes start on Fridays.")]);
    for gateway in [&a, &b, &a] {
        let answer = ingest(gateway, "repo-memory", &body, None).await;
        assert_eq!(answer.json()["status"], "ok", "{}", answer.text);
    }
    let racing = request("nexent:t:a:u:c:message:race", &[("race", "Hotfixes need one reviewer.")]);
    let (first, second) =
        tokio::join!(ingest(&a, "repo-memory", &racing, None), ingest(&b, "repo-memory", &racing, None));
    for answer in [&first, &second] {
        assert!(
            answer.status == 200 || (answer.status == 409 && answer.json()["severity"] == "retryable"),
            "{}",
            answer.text
        );
    }
    assert_eq!(upstream.stored().await, ["Deploy freezes start on Fridays.", "Hotfixes need one reviewer."]);
    assert!(!a.logs().contains(&redis.url()) && !b.logs().contains(&redis.url()), "ledger URL never logged");
}

#[tokio::test]
async fn kill_switch_and_disabled_ingest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let upstream = DevUpstream::start(dir.path()).await;
    config(
        dir.path(),
        UPSTREAM_KEY,
        &[
            provider("repo-memory", &upstream.origin, true, "{anonymous: true}"),
            provider("search-only", &upstream.origin, false, "{anonymous: true}"),
        ],
    );
    let body = request("k", &[("e", "Never stored.")]);
    let off = Gateway::start(dir.path(), dir.path(), &[], &[("EXTERNAL_MEMORY_INGEST_ENABLED", "false")]).await;
    assert_error(&ingest(&off, "repo-memory", &body, None).await, 503, "provider_error", "retryable");
    let search = off.search("repo-memory", &json!({"query": "anything"}), None).await;
    assert_eq!(search.status, 200, "search stays on: {}", search.text);

    let logs = tempfile::tempdir().expect("tempdir");
    let on = Gateway::start(dir.path(), logs.path(), &[], &[]).await;
    assert_error(&ingest(&on, "search-only", &body, None).await, 404, "provider_error", "non_retryable");
    assert_error(&ingest(&on, "no-such-provider", &body, None).await, 404, "provider_error", "non_retryable");
    assert!(upstream.stored().await.is_empty());
}

#[tokio::test]
async fn call_level_failures_use_the_error_json() {
    let dir = tempfile::tempdir().expect("tempdir");
    let upstream = DevUpstream::start(dir.path()).await;
    let closed = format!("http://127.0.0.1:{}", free_port());
    let guarded = "{bearerToken: {secretRef: {name: callers, key: token}}}";
    // The gateway's upstream credential is wrong for `repo-memory`: the upstream answers 401.
    config(
        dir.path(),
        "WRONG-UPSTREAM-KEY",
        &[provider("repo-memory", &upstream.origin, true, guarded), provider("down", &closed, true, guarded)],
    );
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    let body = request("k1", &[("e", "Some fact.")]);

    assert_error(&ingest(&gateway, "repo-memory", &body, None).await, 401, "unauthorized", "non_retryable");
    assert_error(&ingest(&gateway, "repo-memory", &body, Some("wrong")).await, 401, "unauthorized", "non_retryable");
    assert_error(
        &ingest(&gateway, "repo-memory", &body, Some(CALLER_TOKEN)).await,
        502,
        "unauthorized",
        "non_retryable",
    );
    assert_error(&ingest(&gateway, "down", &body, Some(CALLER_TOKEN)).await, 502, "provider_error", "retryable");
    assert_error(
        &ingest(&gateway, "down", &json!({"units": "no"}), Some(CALLER_TOKEN)).await,
        400,
        "invalid_payload",
        "non_retryable",
    );
    let blank = request("  ", &[("e", "x")]);
    assert_error(&ingest(&gateway, "down", &blank, Some(CALLER_TOKEN)).await, 400, "invalid_payload", "non_retryable");
    // A declared 2 MiB body is refused from its Content-Length. Only the head and a first chunk
    // are sent: the gateway answers and closes without reading the rest, so a client still
    // writing the whole body may see a broken pipe before it reads the 413.
    let answer = oversized_head(&gateway.base, "/nexent/v1/down/ingest", 2 * 1024 * 1024).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains(r#""code":"invalid_payload""#) && answer.contains("non_retryable"), "{answer}");

    // Nothing was stored by any failed call.
    assert!(upstream.stored().await.is_empty());
    let logs = gateway.logs();
    for secret in [CALLER_TOKEN, "WRONG-UPSTREAM-KEY", "Some fact."] {
        assert!(!logs.contains(secret), "{secret} in logs");
    }
}

#[tokio::test]
async fn an_unusable_ledger_url_stops_the_start_without_echoing_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    config(dir.path(), UPSTREAM_KEY, &[provider("repo-memory", "http://127.0.0.1:9", true, "{anonymous: true}")]);
    let output = Command::new(env!("CARGO_BIN_EXE_memgate-gateway"))
        .arg("serve")
        .arg("--config")
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--ledger", "valkey://:ledger-pw-91ab@redis.example:6380"])
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .await
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--ledger") && stderr.contains("redis://"), "{stderr}");
    assert!(!stderr.contains("ledger-pw-91ab"), "{stderr}");
}

#[tokio::test]
async fn an_unreachable_ledger_is_retryable_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let upstream = DevUpstream::start(dir.path()).await;
    config(dir.path(), UPSTREAM_KEY, &[provider("repo-memory", &upstream.origin, true, "{anonymous: true}")]);
    let ledger = format!("redis://127.0.0.1:{}/0", free_port());
    let gateway = Gateway::start(dir.path(), dir.path(), &["--ledger", &ledger], &[]).await;
    let answer = ingest(&gateway, "repo-memory", &request("k", &[("e", "Not without a claim.")]), None).await;
    assert_error(&answer, 503, "provider_error", "retryable");
    assert!(upstream.stored().await.is_empty(), "no unit is written without a claim");
}

/// POST a head declaring `length` bytes and 1 KiB of them over a raw socket; the whole answer.
async fn oversized_head(base: &str, path: &str, length: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAuthorization: Bearer {CALLER_TOKEN}\r\nContent-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    let _ = stream.write_all(&[b' '; 1024]).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}
