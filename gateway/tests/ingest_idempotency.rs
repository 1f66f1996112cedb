//! Exactly-once effect with the in-process ledger: Nexent's retries (same `idempotency_key`) never
//! write a unit twice, counted at real local upstreams (the development mem0 server and a
//! recording server).

mod ingest_support;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use memgate_crds::Scope;
use memgate_gateway::config::Provider;
use memgate_gateway::engine::write::{REASON_SERVER_ERROR, REASON_TIMEOUT, REASON_UNRECOGNISED};
use memgate_gateway::engine::{Engine, EngineConfig, ErrorCode, Severity};
use memgate_gateway::ingest::{
    Claim, ClaimPolicy, IngestError, IngestStatus, Ledger, LedgerKey, MemoryLedger, REASON_ABANDONED, UnitStatus,
    ingest, ingest_with_target,
};
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};

const NEXENT_ATTEMPTS: usize = 3;

fn engine() -> Engine {
    Engine::new(EngineConfig::default()).expect("engine")
}

fn oss_scope() -> Scope {
    Scope { user_id: Some("repository-memory".into()), agent_id: Some("qwen-code".into()), app_id: None }
}

fn oss(origin: &str, credential: &str, timeout: Duration) -> Provider {
    let target = ingest_support::target(origin, "", oss_scope(), credential, timeout);
    ingest_support::provider("repo-memory", "mem0-oss-rest-2026-08", target)
}

/// `mem0-platform-v3`: the upstream drops exact repeats, so degraded units may be re-sent.
fn platform(origin: &str, timeout: Duration) -> Provider {
    let scope = Scope { app_id: Some("shared-repository".into()), ..Scope::default() };
    let target = ingest_support::target(origin, "", scope, CREDENTIAL, timeout);
    ingest_support::provider("team-memory", "mem0-platform-v3", target)
}

fn statuses(result: &memgate_gateway::ingest::IngestResult) -> Vec<UnitStatus> {
    result.unit_results.iter().map(|u| u.status).collect()
}

#[tokio::test]
async fn three_retries_of_the_same_request_write_each_unit_once() {
    let upstream = ingest_support::DevUpstream::start().await;
    let provider = oss(&upstream.origin, &upstream.api_key, Duration::from_secs(10));
    let engine = engine();
    let ledger = MemoryLedger::default();
    let units = vec![
        ingest_support::unit("evt-1", "The build uses cargo."),
        ingest_support::unit("evt-2", "Releases are tagged."),
    ];
    let request = ingest_support::request("evt-1", units);

    let mut results = Vec::new();
    for _ in 0..NEXENT_ATTEMPTS {
        results.push(ingest(&engine, &provider, &ledger, request.clone()).await.expect("ingested"));
    }
    for result in &results {
        assert_eq!(result.status, IngestStatus::Ok);
        assert_eq!((result.accepted_count, result.rejected_count), (2, 0));
        assert_eq!(result, &results[0], "every retry answers the same");
    }
    assert_eq!(upstream.adds(), 2, "one upstream add per unit over {NEXENT_ATTEMPTS} attempts");
    assert_eq!(upstream.stored("repository-memory").await, ["The build uses cargo.", "Releases are tagged."]);

    // A new idempotency key is a new write.
    let mut other = request.clone();
    other.idempotency_key.push_str("-again");
    ingest(&engine, &provider, &ledger, other).await.expect("ingested");
    assert_eq!(upstream.adds(), 4);
}

#[tokio::test]
async fn a_retry_after_a_mid_batch_failure_only_writes_what_is_missing() {
    // The second unit's first add fails with 503; later adds succeed.
    let failures = Arc::new(AtomicUsize::new(1));
    let left = Arc::clone(&failures);
    let server = Server::start(move |request| {
        let body = String::from_utf8_lossy(&request.body);
        if body.contains("second")
            && left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
        {
            Reply::status_json(503, &json!({"detail": "busy"}))
        } else {
            Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))
        }
    })
    .await;
    let provider = oss(&server.origin(), CREDENTIAL, Duration::from_secs(10));
    let engine = engine();
    let ledger = MemoryLedger::default();
    let request = ingest_support::request(
        "evt-1",
        vec![
            ingest_support::unit("evt-1", "first"),
            ingest_support::unit("evt-2", "second"),
            ingest_support::unit("evt-3", "third"),
        ],
    );

    let err = ingest(&engine, &provider, &ledger, request.clone()).await.expect_err("503 fails the call");
    assert_eq!((err.code(), err.severity()), (ErrorCode::ProviderError, Severity::Retryable));
    assert!(matches!(err, IngestError::Upstream { accepted_before: 1, .. }), "{err:?}");
    assert_eq!(server.requests().len(), 2, "the third unit was not attempted");

    for _ in 1..NEXENT_ATTEMPTS {
        let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("ingested");
        assert_eq!(result.status, IngestStatus::Ok);
        assert_eq!(result.accepted_count, 3);
    }
    let bodies: Vec<String> = server.requests().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    let sent = |text: &str| bodies.iter().filter(|b| b.contains(text)).count();
    assert_eq!((sent("first"), sent("second"), sent("third")), (1, 2, 1), "only the failed unit was sent again");
}

#[tokio::test]
async fn degraded_unit_is_not_resent_when_the_upstream_keeps_repeats() {
    // Answer with a lone event id: outcome unknown.
    let server = Server::always(Reply::json(&json!({"event_id": "ev-77"}))).await;
    let provider = oss(&server.origin(), CREDENTIAL, Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Maybe stored.")]);
    for _ in 0..NEXENT_ATTEMPTS {
        let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
        assert_eq!(statuses(&result), [UnitStatus::Degraded]);
        assert_eq!(result.unit_results[0].message.as_deref(), Some(REASON_UNRECOGNISED));
        assert_eq!(result.status, IngestStatus::Error);
    }
    assert_eq!(server.requests().len(), 1, "a degraded unit is never re-sent to an upstream that keeps repeats");
}

#[tokio::test]
async fn timed_out_unit_is_not_resent_when_the_upstream_keeps_repeats() {
    let server = Server::always(Reply::Hang).await;
    let provider = oss(&server.origin(), CREDENTIAL, Duration::from_millis(300));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Slow.")]);
    for _ in 0..NEXENT_ATTEMPTS {
        let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
        assert_eq!(statuses(&result), [UnitStatus::Degraded]);
        assert_eq!(result.unit_results[0].message.as_deref(), Some(REASON_TIMEOUT));
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn degraded_unit_is_resent_when_the_upstream_drops_exact_repeats() {
    // First answer unknown, then a synchronous success.
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    let server = Server::start(move |_| {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::json(&json!({"status": "RUNNING"}))
        } else {
            Reply::json(&json!({"status": "SUCCEEDED", "results": [{"id": "m-1", "event": "ADD"}]}))
        }
    })
    .await;
    let provider = platform(&server.origin(), Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Deploys on Tuesdays.")]);

    let first = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
    assert_eq!(statuses(&first), [UnitStatus::Degraded]);
    let second = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
    assert_eq!(statuses(&second), [UnitStatus::Accepted]);
    let third = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
    assert_eq!(third, second);
    assert_eq!(server.requests().len(), 2, "re-sent once while degraded, never after acceptance");
    let bodies: Vec<serde_json::Value> =
        server.requests().iter().map(|r| serde_json::from_slice(&r.body).expect("json")).collect();
    assert_eq!(bodies[0], bodies[1], "the re-send is an exact repeat");
}

#[tokio::test]
async fn failed_resend_of_a_degraded_unit_keeps_it_degraded() {
    // Unknown, then 503 (the retry of a degraded unit fails at call level), then success.
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    let server = Server::start(move |_| match count.fetch_add(1, Ordering::SeqCst) {
        0 => Reply::json(&json!({"status": "RUNNING"})),
        1 => Reply::status_json(503, &json!({})),
        _ => Reply::json(&json!({"status": "SUCCEEDED"})),
    })
    .await;
    let provider = platform(&server.origin(), Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "x")]);
    assert_eq!(
        statuses(&ingest(&engine, &provider, &ledger, request.clone()).await.expect("r")),
        [UnitStatus::Degraded]
    );
    ingest(&engine, &provider, &ledger, request.clone()).await.expect_err("503");
    // The degraded record was restored, not dropped: the contract still allows a re-send.
    let key = LedgerKey {
        provider: "agents/team-memory".into(),
        idempotency_key: request.idempotency_key.clone(),
        event_id: "evt-1".into(),
        unit_index: None,
    };
    let keep = ClaimPolicy { hold_for: Duration::from_secs(5), retake_degraded: false };
    assert!(matches!(
        ledger.claim(&key, keep).await,
        Ok(Claim::Done(memgate_gateway::ingest::Recorded::Degraded { .. }))
    ));
    assert_eq!(statuses(&ingest(&engine, &provider, &ledger, request).await.expect("r")), [UnitStatus::Accepted]);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn abandoned_claim_is_reported_degraded_and_not_resent() {
    let server = Server::always(Reply::json(&json!({"results": [{"event": "ADD"}]}))).await;
    let provider = oss(&server.origin(), CREDENTIAL, Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "x")]);
    // A call that claimed the unit and died before recording (its claim has lapsed).
    let key = LedgerKey {
        provider: "agents/repo-memory".into(),
        idempotency_key: request.idempotency_key.clone(),
        event_id: "evt-1".into(),
        unit_index: None,
    };
    let lapsed = ClaimPolicy { hold_for: Duration::ZERO, retake_degraded: false };
    assert!(matches!(ledger.claim(&key, lapsed).await, Ok(Claim::Claimed { .. })));

    let result = ingest(&engine, &provider, &ledger, request).await.expect("a result");
    assert_eq!(statuses(&result), [UnitStatus::Degraded]);
    assert_eq!(result.unit_results[0].message.as_deref(), Some(REASON_ABANDONED));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn concurrent_duplicates_write_once_and_answer_alike() {
    let upstream = Server::always(Reply::After(
        Duration::from_millis(300),
        Box::new(Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))),
    ))
    .await;
    let provider = Arc::new(oss(&upstream.origin(), CREDENTIAL, Duration::from_secs(10)));
    let engine = Arc::new(engine());
    let ledger = Arc::new(MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "once")]);
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (engine, provider, ledger, request) =
                (Arc::clone(&engine), Arc::clone(&provider), Arc::clone(&ledger), request.clone());
            tokio::spawn(async move { ingest(&engine, &provider, ledger.as_ref(), request).await })
        })
        .collect();
    for call in calls {
        let result = call.await.expect("joined").expect("ingested");
        assert_eq!(statuses(&result), [UnitStatus::Accepted]);
    }
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn units_sharing_an_event_id_are_told_apart_by_unit_index() {
    let upstream = ingest_support::DevUpstream::start().await;
    let provider = oss(&upstream.origin, &upstream.api_key, Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let mut first = ingest_support::unit("evt-1", "part one");
    first.unit_index = Some(0);
    let mut second = ingest_support::unit("evt-1", "part two");
    second.unit_index = Some(1);
    let request = ingest_support::request("evt-1", vec![first, second]);
    for _ in 0..NEXENT_ATTEMPTS {
        let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("ingested");
        assert_eq!(statuses(&result), [UnitStatus::Accepted, UnitStatus::Accepted]);
        assert!(result.unit_results.iter().all(|u| u.unit_id == "evt-1"));
    }
    assert_eq!(upstream.adds(), 2);
    assert_eq!(upstream.stored("repository-memory").await, ["part one", "part two"]);
}

/// A server answering 500 to the first add and a success both write answers recognise afterwards.
async fn fails_once_with_500() -> Server {
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    Server::start(move |_| {
        if count.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::status_json(500, &json!({"detail": "stored, then failed"}))
        } else {
            Reply::json(&json!({"status": "SUCCEEDED", "results": [{"id": "m-1", "event": "ADD"}]}))
        }
    })
    .await
}

#[tokio::test]
async fn a_500_is_degraded_and_never_written_twice_when_the_upstream_keeps_repeats() {
    // mem0-oss does not drop repeats: the 500 may have come after the insert, so Nexent's retries
    // (same idempotency key) must not send the unit again.
    let server = fails_once_with_500().await;
    let provider = oss(&server.origin(), CREDENTIAL, Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Maybe stored twice.")]);
    for attempt in 0..NEXENT_ATTEMPTS {
        let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a unit outcome, not an error");
        assert_eq!(statuses(&result), [UnitStatus::Degraded], "attempt {attempt}");
        assert_eq!(result.unit_results[0].message.as_deref(), Some(REASON_SERVER_ERROR));
        assert_eq!((result.status, result.accepted_count, result.rejected_count), (IngestStatus::Error, 0, 0));
    }
    assert_eq!(server.requests().len(), 1, "exactly one upstream add over {NEXENT_ATTEMPTS} attempts");
}

#[tokio::test]
async fn a_500_is_resent_once_when_the_upstream_drops_exact_repeats() {
    let server = fails_once_with_500().await;
    let provider = platform(&server.origin(), Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Deduplicated upstream.")]);
    let first = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
    assert_eq!(statuses(&first), [UnitStatus::Degraded]);
    assert_eq!(first.unit_results[0].message.as_deref(), Some(REASON_SERVER_ERROR));
    let second = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
    assert_eq!(statuses(&second), [UnitStatus::Accepted]);
    let third = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
    assert_eq!(third, second);
    assert_eq!(server.requests().len(), 2, "re-sent once while degraded, never after acceptance");
    let bodies: Vec<serde_json::Value> =
        server.requests().iter().map(|r| serde_json::from_slice(&r.body).expect("json")).collect();
    assert_eq!(bodies[0], bodies[1], "the re-send is an exact repeat");
}

#[tokio::test]
async fn a_500_mid_batch_degrades_that_unit_and_the_call_goes_on() {
    let server = Server::start(|request| {
        if String::from_utf8_lossy(&request.body).contains("second") {
            Reply::status_json(502, &json!({}))
        } else {
            Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))
        }
    })
    .await;
    let provider = oss(&server.origin(), CREDENTIAL, Duration::from_secs(10));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    let units = ["first", "second", "third"];
    let request = ingest_support::request(
        "evt-1",
        units.iter().enumerate().map(|(i, text)| ingest_support::unit(&format!("evt-{i}"), text)).collect(),
    );
    for _ in 0..NEXENT_ATTEMPTS {
        let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("a result");
        assert_eq!(statuses(&result), [UnitStatus::Accepted, UnitStatus::Degraded, UnitStatus::Accepted]);
        assert_eq!((result.status, result.accepted_count), (IngestStatus::Partial, 2));
    }
    assert_eq!(server.requests().len(), 3, "one upstream add per unit over {NEXENT_ATTEMPTS} attempts");
}

#[tokio::test]
async fn callers_bound_to_their_subject_do_not_share_idempotency_records() {
    let server = Server::always(Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))).await;
    let mut provider = oss(&server.origin(), CREDENTIAL, Duration::from_secs(10));
    provider.access.bind_user_id_to_subject = true;
    let scoped = |user: &str| {
        let mut target = provider.target.clone();
        target.scope.user_id = Some(user.to_string());
        target
    };
    let (alice, bob) = (scoped("system:serviceaccount:agents:alice"), scoped("system:serviceaccount:agents:bob"));
    let (engine, ledger) = (engine(), MemoryLedger::default());
    // Bob reuses Alice's idempotency key (same tenant, event and conversation ids).
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Mine.")]);

    for target in [&alice, &bob, &alice, &bob] {
        let result = ingest_with_target(&engine, &provider, target, &ledger, request.clone()).await.expect("a result");
        assert_eq!(statuses(&result), [UnitStatus::Accepted]);
    }
    let users: Vec<String> = server
        .requests()
        .iter()
        .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).expect("json")["user_id"].to_string())
        .collect();
    assert_eq!(
        users,
        ["\"system:serviceaccount:agents:alice\"", "\"system:serviceaccount:agents:bob\""],
        "one add per caller scope; each caller's retry answered from its own record"
    );
}
