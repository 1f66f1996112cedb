//! Health, readiness, metrics and logs of the running binary: the metric families exist with only
//! the four allowed labels, both surfaces get their span, and no query text, content or credential
//! reaches metrics or logs.

mod serve_support;
mod support;

use serde_json::json;
use serve_support::{CALLER_TOKEN, Gateway, ProviderYaml, UPSTREAM_KEY, mem0_results, secret_yaml, upstream_secret};
use support::{Reply, Server};

const QUERY: &str = "observability secret query 0e5f";

#[tokio::test]
async fn health_readiness_metrics_and_logs_carry_no_query_or_credential() {
    let upstream = Server::always(Reply::json(&mem0_results(3))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let guarded = ProviderYaml::new("guarded", &upstream.origin())
        .access("{bearerToken: {secretRef: {name: callers, key: token}}}");
    let text = [
        upstream_secret(),
        secret_yaml("callers", "token", CALLER_TOKEN),
        ProviderYaml::new("repo-memory", &upstream.origin()).yaml(),
        guarded.yaml(),
    ]
    .join("---\n");
    std::fs::write(dir.path().join("gateway.yaml"), text).expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;

    let health = gateway.get("/healthz").await;
    assert_eq!((health.status, health.json()), (200, json!({"status": "ok"})));
    let ready = gateway.get("/readyz").await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json(), json!({"ready": true, "providers": 2, "generation": 1, "lastReloadError": null}));

    assert_eq!(gateway.search("repo-memory", &json!({"query": QUERY}), None).await.status, 200);
    assert_eq!(gateway.search("guarded", &json!({"query": QUERY}), Some("wrong-token")).await.status, 401);
    assert_eq!(gateway.search("nowhere-7a1c", &json!({"query": QUERY}), None).await.status, 404);
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "context_search", "arguments": {"query": QUERY}}
    });
    let mcp = gateway
        .post_with(
            "/mcp/guarded",
            &call,
            Some(CALLER_TOKEN),
            &[("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-06-18")],
        )
        .await;
    assert_eq!(mcp.status, 200, "{}", mcp.text);
    assert_eq!(mcp.json()["result"]["isError"], false, "{}", mcp.text);

    let metrics = gateway.get("/metrics").await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.header("content-type").is_some_and(|t| t.starts_with("application/openmetrics-text")));
    let text = metrics.text;
    for family in [
        "memgate_gateway_requests_total{",
        "memgate_gateway_request_duration_seconds_bucket{",
        "memgate_gateway_search_results_bucket{",
    ] {
        assert!(text.contains(family), "{family} missing:\n{text}");
    }
    for expected in [
        r#"memgate_gateway_requests_total{provider="repo-memory",operation="nexent_search",outcome="ok",error_code=""} 1"#,
        r#"memgate_gateway_requests_total{provider="guarded",operation="nexent_search",outcome="refused",error_code="unauthorized"} 1"#,
        r#"memgate_gateway_requests_total{provider="guarded",operation="mcp_context_search",outcome="ok",error_code=""} 1"#,
    ] {
        assert!(text.contains(expected), "{expected} missing:\n{text}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let labels = line.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map_or("", |(labels, _)| labels);
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let key = pair.split_once('=').map_or(pair, |(key, _)| key);
            assert!(["provider", "operation", "outcome", "error_code", "le"].contains(&key), "label {key} in {line}");
        }
    }
    for forbidden in [QUERY, "nowhere-7a1c", CALLER_TOKEN, "wrong-token", UPSTREAM_KEY, "memory 0"] {
        assert!(!text.contains(forbidden), "{forbidden} in metrics");
    }

    let logs = gateway.logs();
    // One line per call at debug (spans exist only while traces are exported: otel_jaeger.rs).
    assert!(logs.contains("\"message\":\"search finished\""), "{logs}");
    assert!(logs.contains("\"operation\":\"nexent_search\""), "{logs}");
    assert!(logs.contains("\"operation\":\"mcp_context_search\""), "{logs}");
    assert!(logs.contains("\"results\":3"), "{logs}");
    for forbidden in [QUERY, CALLER_TOKEN, "wrong-token", UPSTREAM_KEY, "memory 0", "repository-memory", "qwen-code"] {
        assert!(!logs.contains(forbidden), "{forbidden} in logs");
    }
}

#[tokio::test]
async fn a_caller_that_goes_away_cancels_the_upstream_request_and_is_counted() {
    let upstream = Server::always(Reply::Hang).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let mut provider = ProviderYaml::new("hanging", &upstream.origin());
    provider.timeout_ms = 30000;
    std::fs::write(dir.path().join("gateway.yaml"), [upstream_secret(), provider.yaml()].join("---\n")).expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;

    let client = serve_support::http_client();
    let request = client
        .post(format!("{}/nexent/v1/hanging/search", gateway.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"query": QUERY})).expect("json"))
        .send();
    let gone = tokio::spawn(request);
    upstream.wait_for_requests(1).await;
    gone.abort();
    // The gateway drops the search when its caller goes away, which closes the upstream connection.
    tokio::time::timeout(serve_support::PATIENCE, upstream.wait_for_hang_closed())
        .await
        .expect("upstream request aborted");
    let deadline = tokio::time::Instant::now() + serve_support::PATIENCE;
    let expected = r#"memgate_gateway_requests_total{provider="hanging",operation="nexent_search",outcome="cancelled",error_code=""} 1"#;
    loop {
        let metrics = gateway.get("/metrics").await.text;
        if metrics.contains(expected) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{metrics}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
