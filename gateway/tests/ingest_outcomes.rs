//! The write path's outcome table against real local sockets: every upstream condition, the unit
//! status or call-level error it becomes (Nexent code and severity), and that nothing the caller
//! sees carries the content, the credential, the endpoint or the upstream body.
//!
//! Ends with a property loop: random outcome vectors answered by a real server; unit statuses,
//! counts and overall status must always agree.

mod ingest_support;
mod support;

use std::sync::Arc;
use std::time::Duration;

use memgate_crds::Scope;
use memgate_gateway::config::Provider;
use memgate_gateway::engine::write::{
    REASON_CONFLICT, REASON_CONNECTION_LOST, REASON_INVALID, REASON_SERVER_ERROR, REASON_TIMEOUT, REASON_TOO_LARGE,
    REASON_UNRECOGNISED,
};
use memgate_gateway::engine::{Engine, EngineConfig, ErrorCode, MAX_RESPONSE_BYTES, Severity};
use memgate_gateway::ingest::{
    IngestError, IngestResult, IngestStatus, MemoryLedger, UnitIngestResult, UnitStatus, ingest,
};
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};
use tokio::io::AsyncReadExt;

const CONTENT: &str = "confidential-memory-6d1f";
const UPSTREAM_SECRET_TEXT: &str = "upstream-detail-9c1e";

fn scope() -> Scope {
    Scope { user_id: Some("repository-memory".into()), agent_id: Some("qwen-code".into()), app_id: None }
}

/// `mem0-oss-rest-2026-08` (results-events, no de-duplication) at `origin`.
fn oss(origin: &str, timeout: Duration) -> Provider {
    let target = ingest_support::target(origin, "", scope(), CREDENTIAL, timeout);
    ingest_support::provider("repo-memory", "mem0-oss-rest-2026-08", target)
}

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).expect("engine")
}

fn one_unit(event: &str) -> memgate_gateway::ingest::IngestRequest {
    ingest_support::request(event, vec![ingest_support::unit(event, CONTENT)])
}

fn assert_no_leak(text: &str, origin: &str) {
    for forbidden in [CONTENT, CREDENTIAL, UPSTREAM_SECRET_TEXT, origin, "127.0.0.1", "nexent:tenant-1"] {
        assert!(!text.contains(forbidden), "{text:?} contains {forbidden:?}");
    }
}

/// Ingest one unit against a server always answering `reply`; the result and the request count.
async fn run(reply: Reply) -> (Result<IngestResult, IngestError>, usize, String) {
    let server = Server::always(reply).await;
    let provider = oss(&server.origin(), Duration::from_secs(30));
    let result = ingest(&engine(), &provider, &MemoryLedger::default(), one_unit("evt-1")).await;
    match &result {
        Ok(result) => assert_no_leak(&serde_json::to_string(result).expect("serializes"), &server.origin()),
        Err(err) => {
            assert_no_leak(&err.to_string(), &server.origin());
            assert_no_leak(&format!("{err:?}"), &server.origin());
        }
    }
    (result, server.requests().len(), server.origin())
}

async fn unit_outcome(reply: Reply) -> (UnitStatus, Option<String>) {
    let (result, requests, _) = run(reply).await;
    assert_eq!(requests, 1, "exactly one upstream request, never retried");
    let result = result.expect("a unit outcome, not a call failure");
    assert_eq!(result.unit_results.len(), 1);
    let unit = result.unit_results[0].clone();
    let counts = match unit.status {
        UnitStatus::Accepted => (1, 0),
        UnitStatus::Rejected => (0, 1),
        UnitStatus::Degraded => (0, 0),
    };
    assert_eq!((result.accepted_count, result.rejected_count), counts);
    (unit.status, unit.message)
}

async fn call_failure(reply: Reply) -> IngestError {
    let (result, requests, _) = run(reply).await;
    assert_eq!(requests, 1, "exactly one upstream request, never retried");
    result.expect_err("a call-level failure")
}

fn classify(err: &IngestError) -> (ErrorCode, Severity) {
    (err.code(), err.severity())
}

fn with_secret(status: u16) -> Reply {
    Reply::status_json(status, &json!({"detail": UPSTREAM_SECRET_TEXT}))
}

#[tokio::test]
async fn add_event_is_accepted() {
    let reply = Reply::json(&json!({"results": [{"id": "m-1", "memory": CONTENT, "event": "ADD"}]}));
    assert_eq!(unit_outcome(reply).await, (UnitStatus::Accepted, None));
}

#[tokio::test]
async fn unrecognised_answers_are_degraded_never_accepted() {
    let degraded = (UnitStatus::Degraded, Some(REASON_UNRECOGNISED.to_string()));
    let bodies = [
        json!({"event_id": "ev-77"}),
        json!({"results": []}),
        json!({"results": [{"id": "m", "event": "UPDATE"}]}),
        json!({"status": "SUCCEEDED"}),
    ];
    for body in bodies {
        assert_eq!(unit_outcome(Reply::json(&body)).await, degraded, "{body}");
    }
    assert_eq!(unit_outcome(Reply::bytes(format!("{{\"results\": [\"{UPSTREAM_SECRET_TEXT}\""))).await, degraded);
    assert_eq!(unit_outcome(Reply::bytes(b"{\"results\":[{\"event\":\"ADD\xff\"}]}".to_vec())).await, degraded);
}

#[tokio::test]
async fn oversized_or_cut_off_answers_are_degraded() {
    let degraded = (UnitStatus::Degraded, Some(REASON_UNRECOGNISED.to_string()));
    let mut big = br#"{"results":[{"event":"ADD"}]}"#.to_vec();
    big.resize(MAX_RESPONSE_BYTES + 1, b' ');
    assert_eq!(unit_outcome(Reply::Declared { declared: big.len() as u64, body: big.clone() }).await, degraded);
    assert_eq!(unit_outcome(Reply::Chunked(big.chunks(64 * 1024).map(<[u8]>::to_vec).collect())).await, degraded);
    let cut = br#"{"results":[{"event":"ADD"}]}"#.to_vec();
    assert_eq!(unit_outcome(Reply::Declared { declared: cut.len() as u64 + 10, body: cut }).await, degraded);
}

#[tokio::test]
async fn validation_statuses_reject_the_unit_with_a_fixed_reason() {
    for (status, reason) in
        [(400, REASON_INVALID), (422, REASON_INVALID), (409, REASON_CONFLICT), (413, REASON_TOO_LARGE)]
    {
        assert_eq!(
            unit_outcome(with_secret(status)).await,
            (UnitStatus::Rejected, Some(reason.to_string())),
            "{status}"
        );
    }
}

#[tokio::test]
async fn credential_refusals_fail_the_call_non_retryable() {
    let err = call_failure(with_secret(401)).await;
    assert_eq!(classify(&err), (ErrorCode::Unauthorized, Severity::NonRetryable));
    let err = call_failure(with_secret(403)).await;
    assert_eq!(classify(&err), (ErrorCode::Forbidden, Severity::NonRetryable));
}

#[tokio::test]
async fn rate_limit_fails_retryable_and_keeps_retry_after() {
    let reply = Reply::Full { status: 429, headers: vec![("retry-after".into(), "7".into())], body: Vec::new() };
    let err = call_failure(reply).await;
    assert_eq!(classify(&err), (ErrorCode::RateLimited, Severity::Retryable));
    assert_eq!(err.retry_after_seconds(), Some(7));
}

#[tokio::test]
async fn server_errors_after_sending_are_degraded_not_an_error() {
    // 500 / 502 / 504: the service may have stored the unit before failing, or a proxy lost the
    // answer; a retry must not write it again, so the unit is degraded (never accepted).
    for status in [500, 502, 504] {
        assert_eq!(
            unit_outcome(with_secret(status)).await,
            (UnitStatus::Degraded, Some(REASON_SERVER_ERROR.to_string())),
            "{status}"
        );
    }
}

#[tokio::test]
async fn service_unavailable_fails_retryable() {
    // 503: the service declined the request, so Nexent's retry may send it again.
    let err = call_failure(with_secret(503)).await;
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::Retryable));
    assert_eq!(err.retry_after_seconds(), None);
}

#[tokio::test]
async fn redirects_and_unknown_statuses_fail_non_retryable_without_following() {
    let server = Server::start(|request| {
        if request.path == "/elsewhere" {
            Reply::json(&json!({"results": [{"event": "ADD"}]}))
        } else {
            Reply::Full { status: 307, headers: vec![("location".into(), "/elsewhere".into())], body: Vec::new() }
        }
    })
    .await;
    let provider = oss(&server.origin(), Duration::from_secs(30));
    let err = ingest(&engine(), &provider, &MemoryLedger::default(), one_unit("e")).await.expect_err("fails");
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::NonRetryable));
    assert_eq!(server.requests().len(), 1, "the redirect is never followed");

    let err = call_failure(with_secret(404)).await;
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::NonRetryable));
}

#[tokio::test]
async fn refused_connection_fails_retryable_and_a_retry_writes_once() {
    let closed_port = ingest_support::free_port();
    let closed = format!("http://127.0.0.1:{closed_port}");
    let engine = engine();
    let ledger = MemoryLedger::default();
    let err = ingest(&engine, &oss(&closed, Duration::from_secs(5)), &ledger, one_unit("e")).await.expect_err("fails");
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::Retryable));
    assert_no_leak(&err.to_string(), &closed);
    assert!(!err.to_string().contains(&closed_port.to_string()));

    // Nexent's retry reaches the upstream once it is up: the claim was released, so it writes.
    let server = Server::always(Reply::json(&json!({"results": [{"event": "ADD"}]}))).await;
    let provider = oss(&server.origin(), Duration::from_secs(5));
    for _ in 0..2 {
        let result = ingest(&engine, &provider, &ledger, one_unit("e")).await.expect("written");
        assert_eq!(result.status, IngestStatus::Ok);
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn timeout_after_sending_is_degraded_not_an_error() {
    let server = Server::always(Reply::Hang).await;
    let provider = oss(&server.origin(), Duration::from_millis(300));
    let result = ingest(&engine(), &provider, &MemoryLedger::default(), one_unit("e")).await.expect("a unit outcome");
    assert_eq!(result.unit_results[0].status, UnitStatus::Degraded);
    assert_eq!(result.unit_results[0].message.as_deref(), Some(REASON_TIMEOUT));
    assert_eq!((result.status, result.accepted_count, result.rejected_count), (IngestStatus::Error, 0, 0));
    server.wait_for_hang_closed().await;
}

#[tokio::test]
async fn connection_lost_after_sending_is_degraded() {
    // Reads the request, then closes the connection without answering.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut received = Vec::new();
            let mut chunk = [0u8; 4096];
            while !String::from_utf8_lossy(&received).contains(CONTENT) {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => received.extend_from_slice(&chunk[..read]),
                }
            }
            drop(stream);
        }
    });
    let provider = oss(&origin, Duration::from_secs(10));
    let result = ingest(&engine(), &provider, &MemoryLedger::default(), one_unit("e")).await.expect("a unit outcome");
    assert_eq!(result.unit_results[0].status, UnitStatus::Degraded);
    assert_eq!(result.unit_results[0].message.as_deref(), Some(REASON_CONNECTION_LOST));
}

#[tokio::test]
async fn saturated_provider_fails_retryable_without_sending() {
    let server = Server::always(Reply::Hang).await;
    let engine =
        Arc::new(Engine::new(EngineConfig { permits_per_provider: 1, ..EngineConfig::default() }).expect("engine"));
    let holder = {
        let (engine, provider) = (Arc::clone(&engine), oss(&server.origin(), Duration::from_secs(3)));
        tokio::spawn(async move { ingest(&engine, &provider, &MemoryLedger::default(), one_unit("a")).await })
    };
    server.wait_for_requests(1).await;
    let provider = oss(&server.origin(), Duration::from_millis(200));
    let err = ingest(&engine, &provider, &MemoryLedger::default(), one_unit("b")).await.expect_err("saturated");
    assert_eq!(classify(&err), (ErrorCode::RateLimited, Severity::Retryable));
    assert_eq!(server.requests().len(), 1, "the saturated call sent nothing");
    holder.abort();
}

#[tokio::test]
async fn provider_without_ingest_or_write_contract_is_refused() {
    let server = Server::always(Reply::json(&json!({"results": [{"event": "ADD"}]}))).await;
    let mut provider = oss(&server.origin(), Duration::from_secs(5));
    provider.nexent_ingest = false;
    let err = ingest(&engine(), &provider, &MemoryLedger::default(), one_unit("e")).await.expect_err("refused");
    assert_eq!(err, IngestError::NotWritable);
    let mut provider = oss(&server.origin(), Duration::from_secs(5));
    provider.write = None;
    let err = ingest(&engine(), &provider, &MemoryLedger::default(), one_unit("e")).await.expect_err("refused");
    assert_eq!(classify(&err), (ErrorCode::ProviderError, Severity::NonRetryable));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn invalid_payload_writes_nothing() {
    let server = Server::always(Reply::json(&json!({"results": [{"event": "ADD"}]}))).await;
    let provider = oss(&server.origin(), Duration::from_secs(5));
    let units = (0..=100).map(|i| ingest_support::unit(&format!("e{i}"), CONTENT)).collect();
    let err = ingest(&engine(), &provider, &MemoryLedger::default(), ingest_support::request("e", units))
        .await
        .expect_err("refused");
    assert_eq!(classify(&err), (ErrorCode::InvalidPayload, Severity::NonRetryable));
    assert_no_leak(&err.to_string(), &server.origin());
    assert!(server.requests().is_empty());
}

/// xorshift64*: deterministic, enough for a property loop.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % bound
    }
}

#[tokio::test]
async fn counts_and_status_always_agree_with_unit_results() {
    // The unit's content says what the upstream answers for it.
    let server = Server::start(|request| {
        let body = String::from_utf8_lossy(&request.body);
        if body.contains("kind-accept") {
            Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))
        } else if body.contains("kind-reject") {
            Reply::status_json(422, &json!({"detail": "invalid"}))
        } else {
            Reply::json(&json!({"event_id": "queued"}))
        }
    })
    .await;
    let provider = oss(&server.origin(), Duration::from_secs(10));
    let engine = engine();
    let kinds = [
        ("kind-accept", UnitStatus::Accepted),
        ("kind-reject", UnitStatus::Rejected),
        ("kind-degrade", UnitStatus::Degraded),
    ];
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut sent = 0;
    for case in 0..60 {
        let len = rng.below(13) as usize;
        let bias = rng.below(4);
        let picks: Vec<usize> = (0..len).map(|_| if bias == 0 { 0 } else { rng.below(3) as usize }).collect();
        let units = picks
            .iter()
            .enumerate()
            .map(|(i, &k)| ingest_support::unit(&format!("c{case}-u{i}"), &format!("{} {case} {i}", kinds[k].0)))
            .collect();
        let result =
            ingest(&engine, &provider, &MemoryLedger::default(), ingest_support::request(&format!("c{case}"), units))
                .await
                .expect("no call-level failure");
        sent += len;

        let want: Vec<UnitStatus> = picks.iter().map(|&k| kinds[k].1).collect();
        let got: Vec<UnitStatus> = result.unit_results.iter().map(|u: &UnitIngestResult| u.status).collect();
        assert_eq!(got, want, "case {case}: one result per unit, in order");
        let ids: Vec<String> = (0..len).map(|i| format!("c{case}-u{i}")).collect();
        assert_eq!(result.unit_results.iter().map(|u| u.unit_id.clone()).collect::<Vec<_>>(), ids);
        let count = |s| want.iter().filter(|&&w| w == s).count();
        assert_eq!(result.accepted_count, count(UnitStatus::Accepted), "case {case}");
        assert_eq!(result.rejected_count, count(UnitStatus::Rejected), "case {case}");
        let status = match (count(UnitStatus::Accepted), len) {
            (a, n) if a == n => IngestStatus::Ok,
            (0, _) => IngestStatus::Error,
            _ => IngestStatus::Partial,
        };
        assert_eq!(result.status, status, "case {case}");
    }
    assert_eq!(server.requests().len(), sent, "one upstream add per unit");
}
