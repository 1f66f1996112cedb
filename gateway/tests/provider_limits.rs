//! `spec.limits` enforced by the running binary: per caller (callers verified by the REAL API
//! server's TokenReview), shared by two replicas on one REAL `redis-server`, the documented
//! per-replica fallback when that Redis stops, and the upstream bounds (`maxInFlight` per replica,
//! `requestsPerSecond` across replicas) measured at a real HTTP upstream; ingest units counted per
//! caller, and anonymous callers told apart by their client address (two loopback addresses).

mod ingest_support;
mod serve_support;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use axum::routing::post;
use ingest_support::RedisServer;
use memgate_e2e::ControlPlane;
use memgate_gateway::mcp::FAILURE_TEXT;
use serde_json::{Value, json};
use serve_support::{Answer, Gateway, audit_events, mem0_results, secret_yaml, service_account_token};

const AUDIENCE: &str = "memgate-limits";
const MCP_HEADERS: [(&str, &str); 2] =
    [("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-06-18")];

/// A mem0 OSS provider `memory` in namespace `agents` at `origin` with `access` and `limits`.
fn provider_yaml(origin: &str, access: &str, limits: &str) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: memory, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", allowInsecureHttp: true}}\n  \
         credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{userId: u, agentId: qwen-code}}\n  \
         nexent: {{search: true}}\n  mcp: {{enabled: true}}\n  access: {access}\n  limits: {limits}\n"
    )
}

/// A config folder holding the upstream's Secret and `provider`.
fn config_dir(provider: &str) -> Result<tempfile::TempDir> {
    let config = tempfile::tempdir()?;
    let text = [secret_yaml("upstream", "api-key", UPSTREAM_KEY), provider.to_string()];
    std::fs::write(config.path().join("gateway.yaml"), text.join("---\n"))?;
    Ok(config)
}

const UPSTREAM_KEY: &str = "limits-upstream-key";

/// A mem0 OSS search upstream that answers after `delay`, counting requests and the most it ever
/// had in flight at once.
#[derive(Clone, Default)]
struct CountingUpstream {
    requests: Arc<AtomicUsize>,
    in_flight: Arc<AtomicUsize>,
    most_in_flight: Arc<AtomicUsize>,
}

impl CountingUpstream {
    async fn start(delay: Duration) -> (CountingUpstream, String) {
        let counts = CountingUpstream::default();
        let state = counts.clone();
        let app = axum::Router::new().route(
            "/search",
            post(move || {
                let state = state.clone();
                async move {
                    state.requests.fetch_add(1, Ordering::SeqCst);
                    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    state.most_in_flight.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    state.in_flight.fetch_sub(1, Ordering::SeqCst);
                    axum::Json(mem0_results(1))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let origin = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (counts, origin)
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn context_search() -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
           "params": {"name": "context_search", "arguments": {"query": "where is the build cache"}}})
}

async fn search(gateway: &Gateway, token: Option<&str>) -> Answer {
    gateway.search("memory", &json!({"query": "where is the build cache"}), token).await
}

/// The value of `memgate_gateway_limited_total` for `limit` in `gateway`'s metrics (0 when absent).
async fn limited_total(gateway: &Gateway, limit: &str) -> Result<u64> {
    metric(gateway, &format!("memgate_gateway_limited_total{{provider=\"memory\",limit=\"{limit}\"}}")).await
}

async fn metric(gateway: &Gateway, series: &str) -> Result<u64> {
    let metrics = gateway.get("/metrics").await.text;
    let Some(line) = metrics.lines().find(|l| l.starts_with(series)) else { return Ok(0) };
    line.rsplit(' ').next().context("a value")?.parse::<f64>().map(|v| v as u64).context("a number")
}

/// The audit events written to `path` so far.
#[tokio::test]
async fn a_caller_over_its_limit_is_refused_on_both_surfaces_while_another_caller_is_served() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-limits").await?;
    let client = control_plane.client()?;
    let alice = service_account_token(&client, &namespace, "alice", AUDIENCE).await?;
    let bob = service_account_token(&client, &namespace, "bob", AUDIENCE).await?;

    let (upstream, origin) = CountingUpstream::start(Duration::ZERO).await;
    let access = format!(
        "{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}, name: alice}}, \
         {{namespace: {namespace}, name: bob}}]}}}}"
    );
    let config = config_dir(&provider_yaml(&origin, &access, "{perCaller: {requestsPerMinute: 5}}"))?;
    let private = tempfile::tempdir()?;
    let audit = private.path().join("audit.jsonl");
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let args = ["--kubeconfig", &kubeconfig, "--audit-log", audit.to_str().context("path")?];
    let gateway = Gateway::start(config.path(), private.path(), &args, &[]).await;

    // Alice: five calls in a minute (three searches, two MCP tool calls), then refused on both surfaces.
    for _ in 0..3 {
        let answer = search(&gateway, Some(&alice)).await;
        ensure!(answer.status == 200, "alice within her limit: {}", answer.text);
    }
    for _ in 0..2 {
        let answer = gateway.post_with("/mcp/memory", &context_search(), Some(&alice), &MCP_HEADERS).await;
        ensure!(answer.json()["result"]["isError"] == false, "alice within her limit: {}", answer.text);
    }
    let refused = search(&gateway, Some(&alice)).await;
    ensure!(refused.status == 429, "alice's sixth call: {} {}", refused.status, refused.text);
    let body = refused.json();
    ensure!(body["code"] == "rate_limited" && body["severity"] == "retryable", "{body}");
    let retry_after: u64 = refused.header("retry-after").context("Retry-After")?.parse()?;
    ensure!((1..=12).contains(&retry_after), "one token every 12 s: Retry-After {retry_after}");
    ensure!(body["retry_after_seconds"] == retry_after, "{body}");
    let mcp = gateway.post_with("/mcp/memory", &context_search(), Some(&alice), &MCP_HEADERS).await;
    ensure!(mcp.status == 200, "a tool failure is a JSON-RPC result: {}", mcp.text);
    let result = &mcp.json()["result"];
    ensure!(result["isError"] == true && result["content"][0]["text"] == FAILURE_TEXT, "{result}");
    ensure!(mcp.header("retry-after").is_some(), "the MCP answer carries Retry-After: {:?}", mcp.headers);

    // Bob has his own bucket.
    for _ in 0..5 {
        let answer = search(&gateway, Some(&bob)).await;
        ensure!(answer.status == 200, "bob is not alice: {}", answer.text);
    }
    ensure!(upstream.requests() == 10, "refused calls never reach the upstream: {}", upstream.requests());
    ensure!(limited_total(&gateway, "per_caller").await? == 2, "{}", gateway.get("/metrics").await.text);

    let events = audit_events(&audit, 12).await?;
    let limited: Vec<&Value> = events.iter().filter(|e| e["outcome"] == "limited").collect();
    ensure!(events.len() == 12 && limited.len() == 2, "{events:#?}");
    for event in limited {
        ensure!(event["caller"] == format!("serviceaccount:{namespace}:alice"), "{event}");
        ensure!(event["limit"] == "per_caller" && event["errorCode"] == "rate_limited", "{event}");
        ensure!(event.get("upstreamStatus").is_none(), "the upstream was not called: {event}");
    }
    Ok(())
}

#[tokio::test]
async fn two_replicas_on_one_redis_share_a_callers_limit_and_fall_back_per_replica_when_it_stops() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-limits-shared").await?;
    let client = control_plane.client()?;
    let alice = service_account_token(&client, &namespace, "alice", AUDIENCE).await?;

    let (upstream, origin) = CountingUpstream::start(Duration::ZERO).await;
    let access = format!("{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}}}]}}}}");
    let config = config_dir(&provider_yaml(&origin, &access, "{perCaller: {requestsPerMinute: 5}}"))?;
    let redis = RedisServer::start();
    let url = redis.url();
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let args = ["--kubeconfig", &kubeconfig, "--gateway-id", "agents/memgate", "--ledger", &url];
    let (logs_a, logs_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = Gateway::start(config.path(), logs_a.path(), &args, &[]).await;
    let b = Gateway::start(config.path(), logs_b.path(), &args, &[]).await;

    // Alternating between the replicas, alice gets five calls in all, not five on each.
    let mut served = 0;
    for round in 0..10 {
        let replica = if round % 2 == 0 { &a } else { &b };
        let answer = search(replica, Some(&alice)).await;
        ensure!(matches!(answer.status, 200 | 429), "{}", answer.text);
        served += usize::from(answer.status == 200);
    }
    ensure!(served == 5, "alice was served {served} times across two replicas");
    ensure!(upstream.requests() == 5, "{}", upstream.requests());
    let refused = limited_total(&a, "per_caller").await? + limited_total(&b, "per_caller").await?;
    ensure!(refused == 5, "{refused}");

    // Redis stops: every call is still answered promptly, each replica holding the limit on its own.
    redis.stop();
    let carol = service_account_token(&client, &namespace, "carol", AUDIENCE).await?;
    let mut per_replica = [0usize; 2];
    for round in 0..14 {
        let replica = round % 2;
        let gateway = if replica == 0 { &a } else { &b };
        let started = tokio::time::Instant::now();
        let answer = search(gateway, Some(&carol)).await;
        ensure!(started.elapsed() < Duration::from_secs(2), "a call waited {:?} on a stopped Redis", started.elapsed());
        ensure!(matches!(answer.status, 200 | 429), "{}", answer.text);
        per_replica[replica] += usize::from(answer.status == 200);
    }
    ensure!(per_replica == [5, 5], "each replica allows carol 5 while Redis is down: {per_replica:?}");
    let fallbacks = metric(&a, "memgate_gateway_limit_store_fallbacks_total").await?;
    ensure!(fallbacks >= 7, "replica a decided {fallbacks} checks on its own");
    Ok(())
}

/// `calls` searches at once through a gateway whose provider has `maxInFlight: max_in_flight`,
/// to an upstream answering after `delay`: every status, the most calls the upstream had at once,
/// and the requests it saw.
async fn searches_at_once(max_in_flight: u32, calls: usize, delay: Duration) -> Result<(Vec<u16>, usize, usize)> {
    let (upstream, origin) = CountingUpstream::start(delay).await;
    let limits = format!("{{upstream: {{maxInFlight: {max_in_flight}}}}}");
    let config = config_dir(&provider_yaml(&origin, "{anonymous: true}", &limits))?;
    let logs = tempfile::tempdir()?;
    let gateway = Arc::new(Gateway::start(config.path(), logs.path(), &[], &[]).await);
    let calls: Vec<_> = (0..calls)
        .map(|_| {
            let gateway = Arc::clone(&gateway);
            tokio::spawn(async move { search(&gateway, None).await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await?);
    }
    Ok((statuses, upstream.most_in_flight.load(Ordering::SeqCst), upstream.requests()))
}

#[tokio::test]
async fn max_in_flight_bounds_what_one_replica_sends_the_upstream_at_once() -> Result<()> {
    let (statuses, most, requests) = searches_at_once(2, 6, Duration::from_millis(300)).await?;
    ensure!(
        statuses.iter().all(|s| *s == 200),
        "six calls of 300 ms through two slots fit the 2.5 s wait: {statuses:?}"
    );
    ensure!(most == 2, "the upstream saw {most} calls at once");
    ensure!(requests == 6, "{requests}");
    Ok(())
}

/// `maxInFlight` above the engine's default of 16 concurrent upstream requests per provider is
/// what reaches the upstream: the default is not a second, lower bound behind it.
#[tokio::test]
async fn max_in_flight_above_the_default_is_reached() -> Result<()> {
    let (statuses, most, requests) = searches_at_once(24, 24, Duration::from_millis(600)).await?;
    ensure!(statuses.iter().all(|s| *s == 200), "24 calls through 24 slots: {statuses:?}");
    ensure!(most == 24, "the upstream saw at most {most} calls at once");
    ensure!(requests == 24, "{requests}");
    Ok(())
}

#[tokio::test]
async fn an_upstream_rate_holds_across_two_replicas_on_one_redis() -> Result<()> {
    let (upstream, origin) = CountingUpstream::start(Duration::ZERO).await;
    let config = config_dir(&provider_yaml(&origin, "{anonymous: true}", "{upstream: {requestsPerSecond: 4}}"))?;
    let redis = RedisServer::start();
    let url = redis.url();
    let args = ["--gateway-id", "agents/memgate", "--ledger", &url];
    let (logs_a, logs_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = Gateway::start(config.path(), logs_a.path(), &args, &[]).await;
    let b = Gateway::start(config.path(), logs_b.path(), &args, &[]).await;

    let started = tokio::time::Instant::now();
    let mut served = 0;
    for round in 0..16 {
        let answer = search(if round % 2 == 0 { &a } else { &b }, None).await;
        ensure!(matches!(answer.status, 200 | 429), "{}", answer.text);
        served += usize::from(answer.status == 200);
    }
    let elapsed = started.elapsed().as_secs_f64();
    // A burst of one second's worth (4), then 4 per second: both replicas together, not each.
    let most = 4 + (elapsed * 4.0).ceil() as usize;
    ensure!(served >= 4 && served <= most, "{served} served in {elapsed:.2} s (at most {most})");
    ensure!(upstream.requests() == served, "{} upstream requests", upstream.requests());
    let refused = limited_total(&a, "upstream_rate").await? + limited_total(&b, "upstream_rate").await?;
    ensure!(refused as usize == 16 - served, "{refused}");
    Ok(())
}

/// A Nexent ingest body of `units` units under idempotency key `key`.
fn ingest_body(key: &str, units: usize) -> Value {
    let units: Vec<Value> = (0..units)
        .map(|i| {
            json!({"event_id": format!("{key}-{i}"), "event_type": "message", "unit_type": "fact",
                   "unit_content": format!("fact {i} of {key}"), "unit_index": i, "metadata": {}})
        })
        .collect();
    json!({"tenant_id": "t", "user_id": "ignored", "agent_id": "a", "conversation_id": "c",
           "idempotency_key": key, "metadata": {}, "units": units})
}

/// POST `body` to `url` from local address `from` (127.0.0.x: Linux routes all of 127/8 to loopback).
async fn post_from(from: [u8; 4], url: &str, body: &Value) -> Result<(u16, Option<String>)> {
    let client = reqwest::Client::builder().no_proxy().local_address(std::net::IpAddr::from(from)).build()?;
    let response = client.post(url).json(body).send().await?;
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    Ok((response.status().as_u16(), retry_after))
}

#[tokio::test]
async fn ingest_units_are_limited_per_caller_and_anonymous_callers_are_told_apart_by_address() -> Result<()> {
    let upstream = ingest_support::DevUpstream::start().await;
    let provider = format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: memory, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{}\", allowInsecureHttp: true}}\n  \
         credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{userId: u, agentId: qwen-code}}\n  \
         nexent: {{search: true, ingest: true}}\n  access: {{anonymous: true}}\n  \
         limits: {{perCallerIngest: {{unitsPerHour: 3}}}}\n",
        upstream.origin
    );
    let config = tempfile::tempdir()?;
    let text = [secret_yaml("upstream", "api-key", &upstream.api_key), provider];
    std::fs::write(config.path().join("gateway.yaml"), text.join("---\n"))?;
    let logs = tempfile::tempdir()?;
    let gateway = Gateway::start(config.path(), logs.path(), &[], &[]).await;
    let url = format!("{}/nexent/v1/memory/ingest", gateway.base);

    let (status, _) = post_from([127, 0, 0, 1], &url, &ingest_body("first", 2)).await?;
    ensure!(status == 200, "two of three units: {status}");
    let (status, retry_after) = post_from([127, 0, 0, 1], &url, &ingest_body("second", 2)).await?;
    ensure!(status == 429, "two more units exceed the hour's three: {status}");
    let seconds: u64 = retry_after.context("Retry-After")?.parse()?;
    ensure!((1..=1200).contains(&seconds), "one unit comes back every 1200 s: {seconds}");
    ensure!(upstream.adds() == 2, "the refused units were not written: {}", upstream.adds());
    // Another anonymous client address has its own bucket.
    let (status, _) = post_from([127, 0, 0, 2], &url, &ingest_body("third", 3)).await?;
    ensure!(status == 200, "a second anonymous client: {status}");
    ensure!(upstream.adds() == 5, "{}", upstream.adds());
    ensure!(limited_total(&gateway, "per_caller_ingest").await? == 1, "{}", gateway.get("/metrics").await.text);
    Ok(())
}
