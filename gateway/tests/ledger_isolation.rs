//! The shared ingest ledger seen by two gateways on one real `redis-server`: each keeps its
//! records under its own prefix (`memgate:<namespace>/<name>:`), so a Redis ACL user per gateway
//! confines it to them (the ACL lines are the README's), and the ledger also works over TLS
//! (`rediss://`, verified against the CA given with `--ledger-ca-file`). The limits' buckets work
//! through the same ACL user and stay under the same prefix.

mod ingest_support;
mod support;

use std::path::Path;
use std::time::Duration;

use ingest_support::{DevUpstream, RedisServer, free_port};
use memgate_crds::Scope;
use memgate_gateway::config::Provider;
use memgate_gateway::engine::{Engine, EngineConfig};
use memgate_gateway::gateway_id::GatewayId;
use memgate_gateway::ingest::{IngestError, IngestStatus, LedgerError, RedisLedger, ingest};
use memgate_gateway::limits::shared::COMMAND_TIMEOUT;
use memgate_gateway::limits::{Answer, Rate, SharedBuckets};
use memgate_gateway::redis_store::RedisStore;

fn provider(upstream: &DevUpstream) -> Provider {
    let scope = Scope { user_id: Some("team-memory".into()), agent_id: Some("qwen-code".into()), app_id: None };
    let target = ingest_support::target(&upstream.origin, "", scope, &upstream.api_key, Duration::from_secs(10));
    ingest_support::provider("team", "mem0-oss-rest-2026-08", target)
}

/// The ACL of the README: one user per gateway, its keys only, the commands the ledger and the
/// limits use (`TIME` inside the limits' script).
fn acl_user(user: &str, password: &str, gateway: &GatewayId) -> String {
    format!(
        "user {user} on >{password} resetkeys ~{}* resetchannels -@all +get +set +eval +ping +time",
        gateway.redis_prefix()
    )
}

async fn admin(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url()).expect("url").get_multiplexed_async_connection().await.expect("connects")
}

async fn connect_as(redis: &RedisServer, user: &str, password: &str) -> redis::aio::MultiplexedConnection {
    let url = format!("redis://{user}:{password}@127.0.0.1:{}/0", redis.port);
    redis::Client::open(url).expect("url").get_multiplexed_async_connection().await.expect("authenticates")
}

/// Redis refused the command for want of permission (`NOPERM`, which redis-rs shows as `NoPerm`).
fn refused(result: redis::RedisResult<redis::Value>) -> bool {
    result.is_err_and(|e| e.to_string().to_ascii_uppercase().contains("NOPERM"))
}

#[tokio::test]
async fn two_gateways_with_their_own_acl_users_cannot_touch_each_others_records() {
    let (a, b) = (
        GatewayId::parse("team-a/memgate-gateway").expect("id"),
        GatewayId::parse("team-b/memgate-gateway").expect("id"),
    );
    let dir = tempfile::tempdir().expect("dir");
    let acl = dir.path().join("users.acl");
    let lines =
        ["user default on nopass ~* &* +@all".to_string(), acl_user("gw-a", "pw-a", &a), acl_user("gw-b", "pw-b", &b)];
    std::fs::write(&acl, lines.join("\n") + "\n").expect("acl file");
    let redis = RedisServer::start_with(free_port(), &["--aclfile".into(), acl.display().to_string()]);
    let upstream = DevUpstream::start().await;
    let provider = provider(&upstream);
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let url = |user: &str, password: &str| format!("redis://{user}:{password}@127.0.0.1:{}/0", redis.port);
    let ledger_a = RedisLedger::new(&url("gw-a", "pw-a")).expect("url").for_gateway(&a);
    let ledger_b = RedisLedger::new(&url("gw-b", "pw-b")).expect("url").for_gateway(&b);

    for (ledger, event) in [(&ledger_a, "evt-a"), (&ledger_b, "evt-b")] {
        let request = ingest_support::request(event, vec![ingest_support::unit(event, "Each team its own ledger.")]);
        let result = ingest(&engine, &provider, ledger, request).await.expect("ingested through its own ACL user");
        assert_eq!(result.status, IngestStatus::Ok);
    }
    let mut root = admin(&redis).await;
    let keys: Vec<String> = redis::cmd("KEYS").arg("memgate:*").query_async(&mut root).await.expect("keys");
    let key_a = keys.iter().find(|k| k.starts_with("memgate:team-a/memgate-gateway:ingest:")).expect("A's record");
    let key_b = keys.iter().find(|k| k.starts_with("memgate:team-b/memgate-gateway:ingest:")).expect("B's record");
    assert_eq!(keys.len(), 2, "{keys:?}");

    let mut as_a = connect_as(&redis, "gw-a", "pw-a").await;
    let own: redis::RedisResult<redis::Value> = redis::cmd("GET").arg(key_a).query_async(&mut as_a).await;
    assert!(own.is_ok(), "A reads its own record: {own:?}");
    for (command, args) in
        [("GET", vec![key_b.clone()]), ("DEL", vec![key_b.clone()]), ("SET", vec![key_b.clone(), "x".into()])]
    {
        let result = redis::cmd(command).arg(&args).query_async(&mut as_a).await;
        assert!(refused(result), "{command} of B's record by A must be refused");
    }
    let script = "return redis.call('DEL', KEYS[1])";
    let through_script = redis::cmd("EVAL").arg(script).arg(1).arg(key_b).query_async(&mut as_a).await;
    assert!(refused(through_script), "nor through a script");
    let listed = redis::cmd("KEYS").arg("*").query_async(&mut as_a).await;
    assert!(refused(listed), "A cannot even list keys");
    let exists: i64 = redis::cmd("EXISTS").arg(key_b).query_async(&mut root).await.expect("exists");
    assert_eq!(exists, 1, "B's record is intact");

    // A gateway given another gateway's ACL user (a misconfiguration) writes nothing upstream.
    let wrong = RedisLedger::new(&url("gw-a", "pw-a")).expect("url").for_gateway(&b);
    let adds = upstream.adds();
    let request = ingest_support::request("evt-c", vec![ingest_support::unit("evt-c", "Never written.")]);
    let err = ingest(&engine, &provider, &wrong, request).await.expect_err("refused by Redis");
    assert_eq!(err, IngestError::Ledger(LedgerError::Unavailable));
    assert_eq!(upstream.adds(), adds, "no unit is written without a claim");

    // The limits' buckets work through the same ACL user, under the gateway's own prefix.
    let store = RedisStore::open(&url("gw-a", "pw-a"), None, COMMAND_TIMEOUT).expect("url");
    let buckets = SharedBuckets::new(store, &a.redis_prefix());
    let rate = Rate::per(2, Duration::from_secs(60), 2);
    let key = "team-a/team|per_caller|serviceaccount:team-a:agent";
    for expected in [true, true, false] {
        let verdict = buckets.take(key, rate, 1).await.expect("the ACL user may run the limits' script");
        assert_eq!(matches!(verdict, Answer::Allowed), expected, "{verdict:?}");
    }
    let keys: Vec<String> = redis::cmd("KEYS").arg("memgate:*:limit:*").query_async(&mut root).await.expect("keys");
    assert_eq!(keys, [buckets.key_name(key)]);
    assert!(keys[0].starts_with("memgate:team-a/memgate-gateway:limit:"), "{keys:?}");
    let outsider = SharedBuckets::new(
        RedisStore::open(&url("gw-b", "pw-b"), None, COMMAND_TIMEOUT).expect("url"),
        &a.redis_prefix(),
    );
    assert!(outsider.take(key, rate, 1).await.is_err(), "B's user cannot touch A's buckets");
}

/// A CA and a certificate for 127.0.0.1 signed by it, made with the openssl CLI.
fn certificates(dir: &Path) {
    let run = |args: &[&str]| {
        let status = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl runs");
        assert!(status.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=memgate-test-ca",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "redis.key",
        "-out",
        "redis.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
    run(&[
        "x509",
        "-req",
        "-in",
        "redis.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "redis.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
}

#[tokio::test]
async fn the_ledger_works_over_tls_verified_against_the_given_ca() {
    let dir = tempfile::tempdir().expect("dir");
    certificates(dir.path());
    let tls_port = free_port();
    let file = |name: &str| dir.path().join(name).display().to_string();
    let redis = RedisServer::start_with(
        free_port(),
        &[
            "--tls-port".into(),
            tls_port.to_string(),
            "--tls-cert-file".into(),
            file("redis.crt"),
            "--tls-key-file".into(),
            file("redis.key"),
            "--tls-ca-cert-file".into(),
            file("ca.crt"),
            "--tls-auth-clients".into(),
            "no".into(),
        ],
    );
    let upstream = DevUpstream::start().await;
    let provider = provider(&upstream);
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let gateway = GatewayId::parse("agents/memgate-gateway").expect("id");
    let url = format!("rediss://127.0.0.1:{tls_port}/0");
    let ca = std::fs::read(dir.path().join("ca.crt")).expect("ca");
    let ledger = RedisLedger::with_ca(&url, Some(ca)).expect("rediss url").for_gateway(&gateway);
    let request = ingest_support::request("evt-tls", vec![ingest_support::unit("evt-tls", "Over TLS.")]);
    let result = ingest(&engine, &provider, &ledger, request.clone()).await.expect("ingested over TLS");
    assert_eq!(result.status, IngestStatus::Ok);
    let again = ingest(&engine, &provider, &ledger, request).await.expect("the retry");
    assert_eq!(again.accepted_count, 1);
    assert_eq!(upstream.adds(), 1, "the record over TLS stops the duplicate");
    let mut root = admin(&redis).await;
    let keys: Vec<String> =
        redis::cmd("KEYS").arg("memgate:agents/memgate-gateway:ingest:*").query_async(&mut root).await.expect("keys");
    assert_eq!(keys.len(), 1);

    // Without the CA the server's certificate is not trusted: nothing is written.
    let untrusting = RedisLedger::new(&url).expect("rediss url").for_gateway(&gateway);
    let request = ingest_support::request("evt-untrusted", vec![ingest_support::unit("evt-untrusted", "No.")]);
    let err = ingest(&engine, &provider, &untrusting, request).await.expect_err("certificate refused");
    assert_eq!(err, IngestError::Ledger(LedgerError::Unavailable));
    assert_eq!(upstream.adds(), 1);
}
