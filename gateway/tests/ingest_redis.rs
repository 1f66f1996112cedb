//! Exactly-once effect across gateway replicas sharing one real `redis-server`.
//!
//! Each "replica" is a separate [`Engine`] plus its own [`RedisLedger`] (its own Redis
//! connection), in one test process, so the ledger's races can be driven precisely; the same with
//! two real `memgate-gateway serve --ledger redis://…` processes is in `nexent_ingest.rs`. The Redis server is a child process of the test on a free port, without
//! persistence; the test fails (never skips) when `/usr/bin/redis-server` is missing.

mod ingest_support;
mod support;

use std::sync::Arc;
use std::time::Duration;

use ingest_support::RedisServer;
use memgate_crds::Scope;
use memgate_gateway::config::Provider;
use memgate_gateway::engine::{Engine, EngineConfig, ErrorCode, Severity};
use memgate_gateway::ingest::{
    DEFAULT_RESULT_TTL, IngestError, IngestStatus, KEY_PREFIX, LedgerError, RedisLedger, UnitStatus, ingest,
};
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};

struct Replica {
    engine: Engine,
    ledger: RedisLedger,
}

fn replica(redis: &RedisServer) -> Replica {
    Replica {
        engine: Engine::new(EngineConfig::default()).expect("engine"),
        ledger: RedisLedger::new(&redis.url()).expect("redis url"),
    }
}

fn oss(origin: &str, credential: &str) -> Provider {
    let scope = Scope { user_id: Some("repository-memory".into()), agent_id: Some("qwen-code".into()), app_id: None };
    let target = ingest_support::target(origin, "", scope, credential, Duration::from_secs(10));
    ingest_support::provider("repo-memory", "mem0-oss-rest-2026-08", target)
}

async fn redis_connection(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url()).expect("url").get_multiplexed_async_connection().await.expect("connects")
}

#[tokio::test]
async fn retries_landing_on_different_replicas_write_once() {
    let redis = RedisServer::start();
    let upstream = ingest_support::DevUpstream::start().await;
    let provider = oss(&upstream.origin, &upstream.api_key);
    let replicas = [replica(&redis), replica(&redis)];
    let request = ingest_support::request(
        "evt-1",
        vec![ingest_support::unit("evt-1", "The build uses cargo."), ingest_support::unit("evt-2", "Tag releases.")],
    );

    // Nexent's three attempts, alternating between the replicas.
    for attempt in 0..3 {
        let Replica { engine, ledger } = &replicas[attempt % 2];
        let result = ingest(engine, &provider, ledger, request.clone()).await.expect("ingested");
        assert_eq!(result.status, IngestStatus::Ok, "attempt {attempt}");
        assert_eq!(result.accepted_count, 2);
    }
    assert_eq!(upstream.adds(), 2, "one upstream add per unit across replicas");
    assert_eq!(upstream.stored("repository-memory").await, ["The build uses cargo.", "Tag releases."]);

    // Keys are namespaced digests with the result TTL; nothing readable about the request.
    let mut connection = redis_connection(&redis).await;
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{KEY_PREFIX}*")).query_async(&mut connection).await.expect("keys");
    assert_eq!(keys.len(), 2);
    for key in &keys {
        let digest = key.strip_prefix(KEY_PREFIX).expect("prefixed");
        assert!(digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()), "{key}");
        let ttl: i64 = redis::cmd("PTTL").arg(key).query_async(&mut connection).await.expect("pttl");
        assert!(ttl > 0 && ttl <= DEFAULT_RESULT_TTL.as_millis() as i64, "{key}: {ttl}");
        let value: String = redis::cmd("GET").arg(key).query_async(&mut connection).await.expect("get");
        assert_eq!(value, "A");
    }
}

#[tokio::test]
async fn concurrent_duplicates_on_two_replicas_write_once() {
    let redis = RedisServer::start();
    let upstream = Server::always(Reply::After(
        Duration::from_millis(400),
        Box::new(Reply::json(&json!({"results": [{"id": "m", "event": "ADD"}]}))),
    ))
    .await;
    let provider = Arc::new(oss(&upstream.origin(), CREDENTIAL));
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "once")]);
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let (replica, provider, request) = (replica(&redis), Arc::clone(&provider), request.clone());
            tokio::spawn(async move { ingest(&replica.engine, &provider, &replica.ledger, request).await })
        })
        .collect();
    for call in calls {
        let result = call.await.expect("joined").expect("ingested");
        assert_eq!(result.unit_results[0].status, UnitStatus::Accepted);
    }
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn degraded_outcome_is_shared_between_replicas() {
    let redis = RedisServer::start();
    let upstream = Server::always(Reply::json(&json!({"event_id": "ev-77"}))).await;
    let provider = oss(&upstream.origin(), CREDENTIAL);
    let replicas = [replica(&redis), replica(&redis)];
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "Maybe stored.")]);
    for attempt in 0..3 {
        let Replica { engine, ledger } = &replicas[attempt % 2];
        let result = ingest(engine, &provider, ledger, request.clone()).await.expect("a result");
        assert_eq!(result.unit_results[0].status, UnitStatus::Degraded, "attempt {attempt}");
    }
    assert_eq!(upstream.requests().len(), 1, "not re-sent by the other replica either");
}

#[tokio::test]
async fn unavailable_ledger_fails_retryable_and_writes_nothing() {
    let upstream = Server::always(Reply::json(&json!({"results": [{"event": "ADD"}]}))).await;
    let provider = oss(&upstream.origin(), CREDENTIAL);
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let request = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "x")]);

    // Nothing listens on this port.
    let ledger = RedisLedger::new(&format!("redis://127.0.0.1:{}/0", ingest_support::free_port())).expect("url");
    let err = ingest(&engine, &provider, &ledger, request.clone()).await.expect_err("no ledger");
    assert_eq!(err, IngestError::Ledger(LedgerError::Unavailable));
    assert_eq!((err.code(), err.severity()), (ErrorCode::ProviderError, Severity::Retryable));
    assert!(upstream.requests().is_empty(), "no unit is written without a claim");
}

#[tokio::test]
async fn ledger_reconnects_after_a_redis_restart() {
    let redis = RedisServer::start();
    let port = redis.port;
    let upstream = Server::always(Reply::json(&json!({"results": [{"event": "ADD"}]}))).await;
    let provider = oss(&upstream.origin(), CREDENTIAL);
    let Replica { engine, ledger } = replica(&redis);
    let first = ingest_support::request("evt-1", vec![ingest_support::unit("evt-1", "one")]);
    ingest(&engine, &provider, &ledger, first.clone()).await.expect("ingested");

    redis.stop();
    let second = ingest_support::request("evt-2", vec![ingest_support::unit("evt-2", "two")]);
    let err = ingest(&engine, &provider, &ledger, second.clone()).await.expect_err("redis is down");
    assert_eq!(err.severity(), Severity::Retryable);
    assert_eq!(upstream.requests().len(), 1);

    let _redis = RedisServer::start_on(port);
    let result = ingest(&engine, &provider, &ledger, second).await.expect("reconnected");
    assert_eq!(result.status, IngestStatus::Ok);
    assert_eq!(upstream.requests().len(), 2);
}
