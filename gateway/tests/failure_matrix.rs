//! Every way an upstream search can fail, against real local sockets (reference §4, Nexent §3).
//!
//! Each case checks the typed error, its Nexent code and severity, and that the error's text never
//! carries the query, the endpoint or the credential.

mod support;

use std::time::Duration;

use memgate_crds::{DialectPresetSpec, Scope};
use memgate_gateway::engine::{Engine, EngineConfig, EngineError, ErrorCode, Item, MAX_RESPONSE_BYTES, Severity};
use memgate_presets::ContentEncoding;
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};

const QUERY: &str = "confidential-query-7f3a";
const UPSTREAM_SECRET_TEXT: &str = "upstream-detail-9c1e";

/// `mem0-platform-v3`: POST, `results` collection, scoped by `appId`.
fn dialect() -> &'static DialectPresetSpec {
    &memgate_presets::get("mem0-platform-v3").expect("built-in").spec
}

fn scope() -> Scope {
    Scope { app_id: Some("app".into()), ..Scope::default() }
}

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).expect("engine")
}

async fn search_with(
    engine: &Engine,
    provider: &str,
    origin: &str,
    timeout: Duration,
) -> Result<Vec<Item>, EngineError> {
    let target = support::target(origin, "", scope(), timeout);
    engine.search(provider, &target, dialect(), ContentEncoding::Plain, QUERY, 5).await
}

async fn search(server: &Server) -> Result<Vec<Item>, EngineError> {
    search_with(&engine(), "p", &server.origin(), Duration::from_secs(30)).await
}

/// The error of a search against `server`, checked for leaks.
async fn failure(server: &Server) -> EngineError {
    let err = search(server).await.expect_err("the search fails");
    assert_no_leak(&err, &server.origin(), server.port());
    err
}

fn assert_no_leak(err: &EngineError, origin: &str, port: u16) {
    for text in [err.to_string(), format!("{err:?}")] {
        for forbidden in [QUERY, CREDENTIAL, UPSTREAM_SECRET_TEXT, origin, "127.0.0.1", &port.to_string()] {
            assert!(!text.contains(forbidden), "{text:?} contains {forbidden:?}");
        }
    }
}

fn classify(err: &EngineError) -> (ErrorCode, Severity) {
    (err.code(), err.severity())
}

/// A valid, empty `results` document of exactly `size` bytes (padded with JSON whitespace).
fn padded_results(size: usize) -> Vec<u8> {
    let mut body = br#"{"results":[]}"#.to_vec();
    body.resize(size, b' ');
    body
}

fn chunks_of(body: &[u8]) -> Vec<Vec<u8>> {
    body.chunks(64 * 1024).map(<[u8]>::to_vec).collect()
}

#[tokio::test]
async fn redirect_is_never_followed() {
    let server = Server::start(|request| {
        if request.path == "/elsewhere" {
            Reply::json(&json!({"results": [{"id": "x", "memory": "followed"}]}))
        } else {
            Reply::Full { status: 302, headers: vec![("location".into(), "/elsewhere".into())], body: Vec::new() }
        }
    })
    .await;
    let err = failure(&server).await;
    assert_eq!(err, EngineError::Redirect(302));
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::NonRetryable));
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "exactly one upstream request");
    assert_eq!(requests[0].path, "/v3/memories/search/");
}

#[tokio::test]
async fn declared_length_over_one_mib_fails() {
    let body = padded_results(MAX_RESPONSE_BYTES + 1);
    let server = Server::always(Reply::Declared { declared: body.len() as u64, body }).await;
    let err = failure(&server).await;
    assert_eq!(err, EngineError::TooLarge);
    assert_eq!(classify(&err), (ErrorCode::InvalidPayload, Severity::NonRetryable));
}

#[tokio::test]
async fn declared_length_is_checked_before_the_body_arrives() {
    // The header promises 1 MiB + 1 but no body byte ever comes: only the declaration can fail it.
    let server = Server::always(Reply::Declared { declared: MAX_RESPONSE_BYTES as u64 + 1, body: Vec::new() }).await;
    assert_eq!(failure(&server).await, EngineError::TooLarge);
}

#[tokio::test]
async fn streamed_body_over_one_mib_fails() {
    let server = Server::always(Reply::Chunked(chunks_of(&padded_results(MAX_RESPONSE_BYTES + 1)))).await;
    let err = failure(&server).await;
    assert_eq!(err, EngineError::TooLarge);
}

#[tokio::test]
async fn body_of_exactly_one_mib_is_accepted() {
    let body = padded_results(MAX_RESPONSE_BYTES);
    let declared = Server::always(Reply::bytes(body.clone())).await;
    assert_eq!(search(&declared).await, Ok(vec![]));
    let streamed = Server::always(Reply::Chunked(chunks_of(&body))).await;
    assert_eq!(search(&streamed).await, Ok(vec![]));
}

#[tokio::test]
async fn invalid_utf8_fails() {
    let server = Server::always(Reply::bytes(b"{\"results\":[{\"id\":\"a\",\"memory\":\"\xff\"}]}".to_vec())).await;
    let err = failure(&server).await;
    assert_eq!(err, EngineError::InvalidUtf8);
    assert_eq!(classify(&err), (ErrorCode::InvalidPayload, Severity::NonRetryable));
}

#[tokio::test]
async fn invalid_json_fails() {
    let server = Server::always(Reply::bytes(format!("{{\"results\": [], \"{UPSTREAM_SECRET_TEXT}\""))).await;
    let err = failure(&server).await;
    assert_eq!(err, EngineError::InvalidJson);
    assert_eq!(classify(&err), (ErrorCode::InvalidPayload, Severity::NonRetryable));
}

#[tokio::test]
async fn wrong_collection_fails() {
    let server = Server::always(Reply::json(&json!({"items": []}))).await;
    let err = failure(&server).await;
    assert_eq!(err, EngineError::SchemaMismatch);
    assert_eq!(classify(&err), (ErrorCode::SchemaMismatch, Severity::NonRetryable));
}

#[tokio::test]
async fn eight_items_with_the_first_invalid_give_five() {
    let mut results = vec![json!({"memory": "no id"})];
    results.extend((2..=8).map(|n| json!({"id": format!("m-{n}"), "memory": format!("memory {n}")})));
    let server = Server::always(Reply::json(&json!({ "results": results }))).await;
    let items = search(&server).await.expect("search succeeds");
    let ids: Vec<&str> = items.iter().map(|item| item.id.as_str()).collect();
    assert_eq!(ids, ["m-2", "m-3", "m-4", "m-5", "m-6"]);
}

#[tokio::test]
async fn slow_upstream_times_out() {
    let server =
        Server::always(Reply::After(Duration::from_secs(30), Box::new(Reply::json(&json!({"results": []}))))).await;
    let err = search_with(&engine(), "p", &server.origin(), Duration::from_millis(200)).await.expect_err("times out");
    assert_no_leak(&err, &server.origin(), server.port());
    assert_eq!(err, EngineError::Timeout);
    assert_eq!(classify(&err), (ErrorCode::Timeout, Severity::Retryable));
}

#[tokio::test]
async fn connection_refused_is_a_retryable_provider_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let origin = format!("http://127.0.0.1:{port}");
    let err = search_with(&engine(), "p", &origin, Duration::from_secs(30)).await.expect_err("refused");
    assert_no_leak(&err, &origin, port);
    assert_eq!(err, EngineError::Connect);
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::Retryable));
}

#[tokio::test]
async fn tls_failure_is_a_connect_error() {
    // An https origin whose server answers the TLS ClientHello with plain HTTP and hangs up.
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
        }
    });
    let origin = format!("https://127.0.0.1:{port}");
    let err = search_with(&engine(), "p", &origin, Duration::from_secs(30)).await.expect_err("handshake fails");
    assert_no_leak(&err, &origin, port);
    assert_eq!(err, EngineError::Connect);
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::Retryable));
}

#[tokio::test]
async fn error_statuses_map_to_nexent_codes() {
    let cases = [
        (400, EngineError::Rejected(400), ErrorCode::InvalidPayload, Severity::NonRetryable),
        (401, EngineError::Unauthorized, ErrorCode::Unauthorized, Severity::NonRetryable),
        (403, EngineError::Forbidden, ErrorCode::Forbidden, Severity::NonRetryable),
        (404, EngineError::UpstreamStatus(404), ErrorCode::ProviderError, Severity::NonRetryable),
        (429, EngineError::RateLimited { retry_after_seconds: Some(7) }, ErrorCode::RateLimited, Severity::Retryable),
        (500, EngineError::ServerError(500), ErrorCode::ProviderError, Severity::Retryable),
        (503, EngineError::ServerError(503), ErrorCode::ProviderError, Severity::Retryable),
    ];
    for (status, expected, code, severity) in cases {
        let server = Server::always(Reply::Full {
            status,
            headers: vec![("retry-after".into(), "7".into())],
            body: serde_json::to_vec(&json!({"detail": UPSTREAM_SECRET_TEXT, "results": []})).expect("json"),
        })
        .await;
        let err = failure(&server).await;
        assert_eq!(err, expected, "{status}");
        assert_eq!(classify(&err), (code, severity), "{status}");
        let retry_after = if status == 429 { Some(7) } else { None };
        assert_eq!(err.retry_after_seconds(), retry_after, "{status}");
        assert_eq!(server.requests().len(), 1, "{status}: no retry");
    }
}

#[tokio::test]
async fn rate_limit_without_numeric_retry_after_has_none() {
    let server = Server::always(Reply::Full {
        status: 429,
        headers: vec![("retry-after".into(), "Wed, 21 Oct 2026 07:28:00 GMT".into())],
        body: Vec::new(),
    })
    .await;
    assert_eq!(failure(&server).await, EngineError::RateLimited { retry_after_seconds: None });
}

#[tokio::test]
async fn sequential_searches_reuse_one_connection() {
    let server = Server::always(Reply::json(&json!({"results": [{"id": "a", "memory": "A"}]}))).await;
    let engine = engine();
    for _ in 0..3 {
        let items = search_with(&engine, "p", &server.origin(), Duration::from_secs(30)).await.expect("ok");
        assert_eq!(items.len(), 1);
        // Let the client's pool take the idle connection back before the next call.
        tokio::task::yield_now().await;
    }
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn a_saturated_provider_does_not_block_another() {
    let engine = std::sync::Arc::new(
        Engine::new(EngineConfig { permits_per_provider: 1, ..EngineConfig::default() }).expect("engine"),
    );
    let slow = Server::always(Reply::Hang).await;
    let fast = Server::always(Reply::json(&json!({"results": [{"id": "a", "memory": "A"}]}))).await;

    let holder = {
        let engine = std::sync::Arc::clone(&engine);
        let origin = slow.origin();
        tokio::spawn(async move { search_with(&engine, "slow", &origin, Duration::from_secs(60)).await })
    };
    slow.wait_for_requests(1).await;

    // The slow provider's only permit is taken: another provider is served at once...
    let items = search_with(&engine, "fast", &fast.origin(), Duration::from_secs(30)).await.expect("fast ok");
    assert_eq!(items.len(), 1);

    // ...while the slow provider's next caller gives up at its deadline without calling upstream.
    let err = search_with(&engine, "slow", &slow.origin(), Duration::from_millis(200)).await.expect_err("saturated");
    assert_eq!(err, EngineError::Saturated);
    assert_eq!(classify(&err), (ErrorCode::RateLimited, Severity::Retryable));
    assert_eq!(err.retry_after_seconds(), None);
    assert_eq!(slow.requests().len(), 1);

    holder.abort();
}

#[tokio::test]
async fn dropping_the_search_closes_the_upstream_connection() {
    let engine = std::sync::Arc::new(
        Engine::new(EngineConfig { permits_per_provider: 1, ..EngineConfig::default() }).expect("engine"),
    );
    let server = Server::always(Reply::Hang).await;
    let task = {
        let engine = std::sync::Arc::clone(&engine);
        let origin = server.origin();
        tokio::spawn(async move { search_with(&engine, "p", &origin, Duration::from_secs(60)).await })
    };
    server.wait_for_requests(1).await;
    task.abort();
    // The server sees the client close the connection; bounded so a regression fails, not hangs.
    tokio::time::timeout(Duration::from_secs(20), server.wait_for_hang_closed())
        .await
        .expect("the upstream connection is closed when the search is dropped");

    // The permit was released with the dropped call: the provider is usable again.
    let err = search_with(&engine, "p", &server.origin(), Duration::from_millis(300)).await.expect_err("hangs");
    assert_eq!(err, EngineError::Timeout);
    assert_eq!(server.requests().len(), 2);
}

/// Upstream answers over 64 KiB take their share of the held-bytes budget while they are read: when
/// it is spent (by answers waiting for stalled readers, here a hand-held share), a large answer
/// fails its call as `HeldFull` (503 `provider_error`, retryable after a second) before its body
/// is read; a small one is served; and the
/// share comes back when the call is done. An undeclared (chunked) large answer counts as the cap.
#[tokio::test]
async fn a_large_answer_needs_room_in_the_held_bytes_budget() {
    use memgate_gateway::held_bytes::HeldBytes;
    let held = HeldBytes::new(2 * 1024 * 1024);
    let engine = Engine::new(EngineConfig::default()).expect("engine").with_held_bytes(held.clone());
    let memory = "m".repeat(100 * 1024);
    let large = json!({"results": [{"id": "a", "memory": memory}]});
    let declared = Server::always(Reply::json(&large)).await;
    let chunked = Server::always(Reply::Chunked(vec![serde_json::to_vec(&large).expect("json")])).await;
    let small = Server::always(Reply::json(&json!({"results": [{"id": "b", "memory": "B"}]}))).await;
    let timeout = Duration::from_secs(30);

    for server in [&declared, &chunked] {
        let items = search_with(&engine, "p", &server.origin(), timeout).await.expect("room in the budget");
        assert_eq!(items.len(), 1);
        assert_eq!(held.available_kib(), 2048, "returned once the answer is read into items");
    }

    let spent = held.take(Some(2 * 1024 * 1024)).expect("take the whole budget");
    for server in [&declared, &chunked] {
        let err = search_with(&engine, "p", &server.origin(), timeout).await.expect_err("no room");
        assert_eq!(err, EngineError::HeldFull);
        assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::Retryable));
        assert_eq!(err.retry_after_seconds(), Some(1));
    }
    let items = search_with(&engine, "p", &small.origin(), timeout).await.expect("small answers are not counted");
    assert_eq!(items.len(), 1);
    drop(spent);
    assert!(search_with(&engine, "p", &declared.origin(), timeout).await.is_ok());
}
