//! The Nexent search API of the running binary against a real local mem0 OSS upstream: result
//! shape, limits, and every failure as `{code, severity, message, retry_after_seconds}` with its
//! documented HTTP status.

mod serve_support;
mod support;

use serde_json::{Value, json};
use serve_support::{Gateway, ProviderYaml, UPSTREAM_KEY, body_of, mem0_results, upstream_secret};
use support::{Recorded, Reply, Server};

const QUERY: &str = "confidential release checklist 41c9";

/// Answers every search with as many results as it was asked for (`top_k`) plus 10, so the
/// gateway's own cap is what limits the answer.
async fn generous_upstream() -> Server {
    Server::start(|request: &Recorded| {
        let asked = serde_json::from_slice::<Value>(&request.body).ok().and_then(|b| b["top_k"].as_u64()).unwrap_or(0);
        Reply::json(&mem0_results(usize::try_from(asked).unwrap_or(0) + 10))
    })
    .await
}

fn config(providers: &[ProviderYaml]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = upstream_secret();
    for provider in providers {
        text.push_str("---\n");
        text.push_str(&provider.yaml());
    }
    std::fs::write(dir.path().join("gateway.yaml"), text).expect("write config");
    dir
}

fn assert_error(answer: &serve_support::Answer, status: u16, code: &str, severity: &str) {
    assert_eq!(answer.status, status, "{}", answer.text);
    let body = answer.json();
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["severity"], severity, "{body}");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    assert!(body.get("retry_after_seconds").is_some(), "{body}");
    assert_eq!(body.as_object().map(|o| o.len()), Some(4), "{body}");
    for secret in [QUERY, UPSTREAM_KEY, "127.0.0.1", "upstream detail"] {
        assert!(!answer.text.contains(secret), "{secret} leaked: {}", answer.text);
    }
}

#[tokio::test]
async fn search_round_trip_has_the_nexent_shape_and_limits() {
    let upstream = generous_upstream().await;
    let dir = config(&[ProviderYaml::new("repo-memory", &upstream.origin())]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;

    // Nexent sends its whole MemorySearchRequest; tenant/user ids are ignored for routing.
    let request = json!({
        "query": format!("  {QUERY} \n"), "tenant_id": "tenant-x", "user_id": "user-x", "agent_id": "agent-x",
        "conversation_id": null, "layers": ["long_term"], "top_k": 9, "threshold": 0.65, "embedding": null,
        "hybrid": false, "weight_accurate": 0.3, "field_added_later": true
    });
    let answer = gateway.search("repo-memory", &request, None).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.header("content-type").as_deref(), Some("application/json"));
    let results = answer.json();
    let results = results.as_array().expect("a JSON list");
    assert_eq!(results.len(), 5, "limit defaults to 5");
    assert_eq!(
        results[0],
        json!({
            "external_id": "m0", "content": "memory 0", "score": 0.9, "source": "repo-memory", "is_external": true,
            "metadata": {"updated_at": "2026-08-02T00:00:00Z"}
        })
    );
    let sent = body_of(&upstream.requests()[0]);
    assert_eq!(sent["query"], QUERY, "query normalised");
    assert_eq!(sent["top_k"], 5);
    assert_eq!(sent["filters"], json!({"user_id": "repository-memory", "agent_id": "qwen-code"}), "scope from config");

    let seven = gateway.search("repo-memory", &json!({"query": QUERY, "limit": 7}), None).await.json();
    assert_eq!(seven.as_array().map(Vec::len), Some(7));
    let capped = gateway.search("repo-memory", &json!({"query": QUERY, "limit": 100}), None).await.json();
    assert_eq!(capped.as_array().map(Vec::len), Some(20), "capped at the default maximum");
    assert_eq!(body_of(&upstream.requests()[2])["top_k"], 20);

    let logs = gateway.logs();
    for secret in [QUERY, UPSTREAM_KEY, "tenant-x", "user-x", "memory 0"] {
        assert!(!logs.contains(secret), "{secret} in logs");
    }
}

#[tokio::test]
async fn the_maximum_limit_is_a_flag_and_a_missing_score_is_zero() {
    let upstream = Server::always(Reply::json(&mem0_results(3))).await;
    let dir = config(&[ProviderYaml::new("repo-memory", &upstream.origin())]);
    let gateway = Gateway::start(dir.path(), dir.path(), &["--nexent-max-limit", "2"], &[]).await;
    let results = gateway.search("repo-memory", &json!({"query": QUERY, "limit": 10}), None).await.json();
    assert_eq!(results.as_array().map(Vec::len), Some(2));
    assert_eq!(body_of(&upstream.requests()[0])["top_k"], 2);

    let logs = tempfile::tempdir().expect("tempdir");
    let gateway_wide = Gateway::start(dir.path(), logs.path(), &[], &[]).await;
    let results = gateway_wide.search("repo-memory", &json!({"query": QUERY}), None).await.json();
    assert_eq!(results[2]["score"], 0.0, "{results}");
    assert_eq!(results[2]["metadata"], json!({}), "{results}");
}

#[tokio::test]
async fn upstream_failures_map_to_error_json_and_statuses() {
    let limited = Server::always(Reply::Full {
        status: 429,
        headers: vec![("retry-after".into(), "7".into())],
        body: b"{\"detail\":\"upstream detail\"}".to_vec(),
    })
    .await;
    let failing = Server::always(Reply::status_json(500, &json!({"detail": "upstream detail"}))).await;
    let refusing = Server::always(Reply::status_json(401, &json!({"detail": "upstream detail"}))).await;
    let hanging = Server::always(Reply::Hang).await;
    let garbage = Server::always(Reply::bytes("upstream detail, not JSON")).await;
    let mut slow = ProviderYaml::new("slow", &hanging.origin());
    slow.timeout_ms = 300;
    let dir = config(&[
        ProviderYaml::new("limited", &limited.origin()),
        ProviderYaml::new("failing", &failing.origin()),
        ProviderYaml::new("refusing", &refusing.origin()),
        ProviderYaml::new("garbage", &garbage.origin()),
        slow,
    ]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    let query = json!({"query": QUERY});

    let answer = gateway.search("limited", &query, None).await;
    assert_error(&answer, 429, "rate_limited", "retryable");
    assert_eq!(answer.json()["retry_after_seconds"], 7);
    assert_eq!(answer.header("retry-after").as_deref(), Some("7"));

    let answer = gateway.search("failing", &query, None).await;
    assert_error(&answer, 502, "provider_error", "retryable");
    assert_eq!(answer.json()["retry_after_seconds"], Value::Null);
    assert_eq!(answer.header("retry-after"), None);

    assert_error(&gateway.search("refusing", &query, None).await, 502, "unauthorized", "non_retryable");
    assert_error(&gateway.search("garbage", &query, None).await, 502, "invalid_payload", "non_retryable");
    assert_error(&gateway.search("slow", &query, None).await, 504, "timeout", "retryable");
    assert_eq!(limited.requests().len(), 1, "a search is never retried");
}

#[tokio::test]
async fn unknown_disabled_and_non_nexent_providers_are_404() {
    let upstream = generous_upstream().await;
    let mut disabled = ProviderYaml::new("disabled", &upstream.origin());
    disabled.enabled = false;
    let mut mcp_only = ProviderYaml::new("mcp-only", &upstream.origin());
    mcp_only.nexent_search = false;
    let dir = config(&[disabled, mcp_only]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    for provider in ["nowhere", "disabled", "mcp-only"] {
        assert_error(
            &gateway.search(provider, &json!({"query": QUERY}), None).await,
            404,
            "provider_error",
            "non_retryable",
        );
    }
    assert!(upstream.requests().is_empty());
}

#[tokio::test]
async fn bad_request_bodies_are_400_without_an_upstream_call() {
    let upstream = generous_upstream().await;
    let dir = config(&[ProviderYaml::new("repo-memory", &upstream.origin())]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    for body in [
        b"{not json".to_vec(),
        b"[]".to_vec(),
        br#"{"query": " \t "}"#.to_vec(),
        br#"{"tenant_id": "t"}"#.to_vec(),
        format!(r#"{{"query": "{}"}}"#, "q".repeat(2001)).into_bytes(),
        br#"{"query": "q", "limit": 0}"#.to_vec(),
    ] {
        let answer = gateway.post_raw("/nexent/v1/repo-memory/search", body, None, &[]).await;
        assert_error(&answer, 400, "invalid_payload", "non_retryable");
    }
    assert!(upstream.requests().is_empty());
}

#[tokio::test]
async fn kill_switch_answers_503_on_both_surfaces() {
    let upstream = generous_upstream().await;
    let dir = config(&[ProviderYaml::new("repo-memory", &upstream.origin())]);
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[("EXTERNAL_MEMORY_SEARCH_ENABLED", "false")]).await;
    assert_error(
        &gateway.search("repo-memory", &json!({"query": QUERY}), None).await,
        503,
        "provider_error",
        "retryable",
    );
    let mcp = gateway.mcp_initialize("repo-memory", None).await;
    assert_eq!(mcp.status, 503, "{}", mcp.text);
    assert!(upstream.requests().is_empty());

    let logs = tempfile::tempdir().expect("tempdir");
    let zero = Gateway::start(dir.path(), logs.path(), &[], &[("EXTERNAL_MEMORY_SEARCH_ENABLED", "0")]).await;
    assert_eq!(zero.search("repo-memory", &json!({"query": QUERY}), None).await.status, 503);
}
