//! Hostile tenants and hostile input against the real `memgate-gateway serve` binary over real
//! sockets: one tenant flooding the ingest ledger, callers that go away mid-ingest, searches piling
//! up behind a hanging upstream, cross-origin and mis-addressed MCP requests, and scope ids the Mem0
//! server refuses. Upstreams are real HTTP servers on 127.0.0.1 (`tests/support`). Time checks are
//! generous ceilings; the bounds are shown by counts.

mod serve_support;
mod support;

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{Value, json};
use serve_support::{Answer, Gateway, ProviderYaml, http_client, upstream_secret};
use support::{Reply, Server};

/// A mem0 OSS provider at `origin` serving Nexent search and ingest, anonymous.
fn ingest_provider(name: &str, origin: &str, timeout_ms: u32) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", allowInsecureHttp: true}}\n  \
         credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{userId: repository-memory, \
         agentId: qwen-code}}\n  timeoutMs: {timeout_ms}\n  nexent: {{search: true, ingest: true}}\n  \
         access: {{anonymous: true}}\n"
    )
}

async fn start(providers: &[String], args: &[&str]) -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = upstream_secret();
    for provider in providers {
        text.push_str("---\n");
        text.push_str(provider);
    }
    std::fs::write(dir.path().join("gateway.yaml"), text).expect("write");
    let gateway = Gateway::start(dir.path(), dir.path(), args, &[]).await;
    (gateway, dir)
}

fn ingest_body(key: &str, units: &[(String, String)]) -> Value {
    let units: Vec<Value> = units
        .iter()
        .map(|(event, content)| {
            json!({"event_id": event, "event_type": "message", "unit_type": "fact", "unit_content": content})
        })
        .collect();
    json!({"tenant_id": "t", "user_id": "u", "units": units, "idempotency_key": key})
}

async fn ingest(gateway: &Gateway, provider: &str, body: &Value) -> Answer {
    gateway.post(&format!("/nexent/v1/{provider}/ingest"), body, None).await
}

/// The mem0 OSS answer to a stored add.
fn added() -> Reply {
    Reply::json(&json!({"results": [{"id": "m", "memory": "x", "event": "ADD"}]}))
}

/// Provider B floods the ledger past its share; provider A's recorded unit survives, so A's retry
/// with the same idempotency key is answered from the ledger and never written twice (before: the
/// flood evicted A's record and the retry wrote a second copy). B's own overflow is a retryable 429.
#[tokio::test]
async fn one_providers_flood_cannot_make_another_write_twice() {
    let upstream = Server::always(added()).await;
    let providers =
        [ingest_provider("tenant-a", &upstream.origin(), 5000), ingest_provider("tenant-b", &upstream.origin(), 5000)];
    let (gateway, _dir) = start(&providers, &["--ledger-max-entries-per-provider", "50"]).await;
    let unit_a = vec![("a-1".to_string(), "alpha unit of tenant a".to_string())];
    let body_a = ingest_body("key-a", &unit_a);
    let first = ingest(&gateway, "tenant-a", &body_a).await;
    assert_eq!((first.status, first.json()["accepted_count"].clone()), (200, json!(1)), "{}", first.text);

    let mut refused = None;
    for round in 0..4 {
        let units: Vec<_> = (0..30).map(|i| (format!("b-{round}-{i}"), format!("flood {round} {i}"))).collect();
        let answer = ingest(&gateway, "tenant-b", &ingest_body(&format!("key-b-{round}"), &units)).await;
        if answer.status != 200 {
            refused = Some(answer);
            break;
        }
    }
    let refused = refused.expect("a flood beyond the share is refused");
    assert_eq!(refused.status, 429, "{}", refused.text);
    assert_eq!(refused.json()["code"], "rate_limited");
    assert_eq!(refused.json()["severity"], "retryable");
    assert!(refused.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|s| (1..=120).contains(&s))));

    let retry = ingest(&gateway, "tenant-a", &body_a).await;
    assert_eq!(retry.status, 200, "{}", retry.text);
    assert_eq!(retry.json()["unit_results"][0]["status"], "accepted");
    let copies = upstream
        .requests()
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains("alpha unit of tenant a"))
        .count();
    assert_eq!(copies, 1, "tenant a's unit was written exactly once");
}

/// Callers that go away 1.2 s into a 60-unit ingest to a hanging upstream stop costing writes:
/// each call ends before its next unit (before: the gateway went on for the whole backlog).
#[tokio::test]
async fn ingest_calls_of_callers_that_went_away_stop_before_their_next_unit() {
    let upstream = Server::always(Reply::Hang).await;
    let (gateway, _dir) = start(&[ingest_provider("repo-memory", &upstream.origin(), 400)], &[]).await;
    let callers = 10;
    let units: Vec<_> = (0..60).map(|i| (format!("e{i}"), format!("unit {i}"))).collect();
    let calls = (0..callers).map(|c| {
        let body = ingest_body(&format!("gone-{c}"), &units);
        let url = format!("{}/nexent/v1/repo-memory/ingest", gateway.base);
        async move {
            let send = http_client().post(url).json(&body).send();
            tokio::time::timeout(Duration::from_millis(1200), send).await.is_err()
        }
    });
    let gone = futures::future::join_all(calls).await;
    assert!(gone.iter().all(|g| *g), "every caller gave up before an answer");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = upstream.requests().len();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later = upstream.requests().len();
    assert_eq!(later, settled, "no unit is sent after the callers are gone");
    // 1.2 s at 0.4 s per unit is about 3 units per call, plus the one in flight.
    assert!(settled <= callers * 5, "{settled} writes for {callers} callers, of {} units", callers * 60);
}

/// One deadline per ingest call: a 60-unit call to a hanging upstream stops at
/// `--ingest-call-timeout-ms` with a retryable 504 instead of running 60 unit timeouts.
#[tokio::test]
async fn an_ingest_call_stops_at_its_deadline() {
    let upstream = Server::always(Reply::Hang).await;
    let args = ["--ingest-call-timeout-ms", "1000"];
    let (gateway, _dir) = start(&[ingest_provider("repo-memory", &upstream.origin(), 300)], &args).await;
    let units: Vec<_> = (0..60).map(|i| (format!("e{i}"), format!("unit {i}"))).collect();
    let started = std::time::Instant::now();
    let answer = ingest(&gateway, "repo-memory", &ingest_body("deadline", &units)).await;
    assert_eq!(answer.status, 504, "{}", answer.text);
    assert_eq!(
        (answer.json()["code"].clone(), answer.json()["severity"].clone()),
        (json!("timeout"), json!("retryable"))
    );
    assert!(started.elapsed() < Duration::from_secs(10), "{:?} for a 1 s deadline", started.elapsed());
    assert!(upstream.requests().len() <= 6, "{} units sent before the deadline", upstream.requests().len());
}

/// Searches arriving over half a second to a hanging upstream: about the provider's 16 permits
/// reach it; the others fail `rate_limited` (429) once they have waited half their timeout,
/// instead of each reaching the upstream late and timing out (before: 504 for all, no 429).
#[tokio::test]
async fn searches_queued_behind_a_hanging_upstream_fail_rate_limited_without_reaching_it() {
    let upstream = Server::always(Reply::Hang).await;
    let mut provider = ProviderYaml::new("repo-memory", &upstream.origin());
    provider.timeout_ms = 4000;
    let (gateway, _dir) = start(&[provider.yaml()], &[]).await;
    let searches = (0..48).map(|i| {
        let url = format!("{}/nexent/v1/repo-memory/search", gateway.base);
        async move {
            // All 48 arrive within 94 ms, well inside the tenth of the timeout (400 ms) a queued
            // call gives up before its deadline, so none can still be waiting when the first 16
            // time out and free their permits (with 10 ms steps the last arrivals could, on a
            // loaded machine, and legitimately reached the upstream).
            tokio::time::sleep(Duration::from_millis(2 * i)).await;
            http_client().post(url).json(&json!({"query": "q"})).send().await.expect("answer").status().as_u16()
        }
    });
    let statuses = futures::future::join_all(searches).await;
    let limited = statuses.iter().filter(|s| **s == 429).count();
    let timed_out = statuses.iter().filter(|s| **s == 504).count();
    assert_eq!(limited + timed_out, statuses.len(), "{statuses:?}");
    assert_eq!(upstream.requests().len(), timed_out, "only the timed-out searches reached the upstream");
    // 16 permits; a few more only if a loaded machine delays an arrival past the first timeouts.
    assert!(timed_out <= 20, "{timed_out} upstream calls for 16 permits");
    assert!(limited >= 28, "{statuses:?}");
}

/// MCP over real sockets: an `Origin` is refused unless configured, a `Host` with user info is a
/// bad request, an absolute-form target's authority wins over `Host`, malformed JSON is a JSON-RPC
/// parse error (before: all accepted, and malformed JSON a 415 with a deserializer message).
#[tokio::test]
async fn mcp_refuses_foreign_origins_user_info_hosts_and_foreign_absolute_targets() {
    let upstream = Server::always(Reply::json(&json!({"results": []}))).await;
    let provider = ProviderYaml::new("repo-memory", &upstream.origin());
    let (gateway, _dir) = start(&[provider.yaml()], &["--allowed-origin", "https://app.example"]).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let accept = ("accept", "application/json, text/event-stream");
    let version = ("mcp-protocol-version", "2025-06-18");
    let post = |headers: Vec<(&'static str, &'static str)>| {
        let mut all = vec![accept, version];
        all.extend(headers);
        let list = list.clone();
        let gateway = &gateway;
        async move { gateway.post_with("/mcp/repo-memory", &list, None, &all).await }
    };
    assert_eq!(post(vec![]).await.status, 200);
    let evil = post(vec![("origin", "http://evil.example")]).await;
    assert_eq!(evil.status, 403, "{}", evil.text);
    assert!(evil.json()["error"].is_object() && evil.json()["id"].is_null(), "{}", evil.text);
    assert_eq!(post(vec![("origin", "https://app.example")]).await.status, 200);
    assert_eq!(post(vec![("origin", "https://app.example:8443")]).await.status, 403);
    assert_eq!(post(vec![("host", "evil.example@localhost")]).await.status, 400);

    let malformed =
        gateway.post_raw("/mcp/repo-memory", b"{\"jsonrpc\": \"2.0\", ".to_vec(), None, &[accept, version]).await;
    assert_eq!(malformed.status, 400, "{}", malformed.text);
    assert_eq!(malformed.json()["error"]["code"], -32700, "{}", malformed.text);

    for (target, expected) in
        [("http://evil.example/mcp/repo-memory", "403"), ("http://localhost/mcp/repo-memory", "200")]
    {
        let body = list.to_string();
        let request = format!(
            "POST {target} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(gateway.address()).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        stream.write_all(request.as_bytes()).expect("write");
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(answer.starts_with(&format!("HTTP/1.1 {expected}")), "{target}: {answer}");
    }
}

/// A `scope.userId` with a space is refused when the gateway loads the config, naming the field
/// (before: served, then every search and ingest failed at the Mem0 server with 400).
#[tokio::test]
async fn a_scope_id_with_whitespace_refuses_the_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut provider = ProviderYaml::new("repo-memory", "http://127.0.0.1:9");
    provider.scope = "{userId: \"repository memory\", agentId: qwen-code}".to_string();
    std::fs::write(dir.path().join("gateway.yaml"), format!("{}---\n{}", upstream_secret(), provider.yaml()))
        .expect("write");
    let (status, log) = Gateway::run_to_exit(dir.path(), dir.path()).await;
    assert!(!status.success());
    assert!(log.contains("spec.scope.userId") && log.contains("whitespace"), "{log}");
}

/// A config folder holding `evil.yaml -> /dev/zero` or a FIFO named `*.yaml` refuses the config at
/// once, naming the file, instead of reading forever or blocking.
#[cfg(unix)]
#[tokio::test]
async fn a_device_or_fifo_in_the_config_folder_refuses_the_config_at_once() {
    for (name, make) in [("evil.yaml", "symlink"), ("pipe.yaml", "fifo")] {
        let dir = tempfile::tempdir().expect("tempdir");
        let provider = ProviderYaml::new("repo-memory", "http://127.0.0.1:9");
        std::fs::write(dir.path().join("gateway.yaml"), format!("{}---\n{}", upstream_secret(), provider.yaml()))
            .expect("write");
        let path = dir.path().join(name);
        if make == "symlink" {
            std::os::unix::fs::symlink("/dev/zero", &path).expect("symlink");
        } else {
            assert!(std::process::Command::new("mkfifo").arg(&path).status().expect("mkfifo").success());
        }
        let logs = tempfile::tempdir().expect("tempdir");
        let (status, log) = Gateway::run_to_exit(dir.path(), logs.path()).await;
        assert!(!status.success());
        assert!(log.contains(name) && log.contains("not a regular file"), "{log}");
    }
}
