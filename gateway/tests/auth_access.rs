//! Caller access of the running binary without a cluster: anonymous only by opt-in, static bearer
//! tokens, and refusals at HTTP level (before MCP) with fixed bodies that reveal nothing.

mod serve_support;
mod support;

use serde_json::{Value, json};
use serve_support::{Answer, CALLER_TOKEN, Gateway, ProviderYaml, mem0_results, secret_yaml, upstream_secret};
use support::{Reply, Server};

const QUERY: &str = "access probe 5c2e";

async fn start(upstream: &Server) -> (Gateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = ProviderYaml::new("open", &upstream.origin());
    let guarded = ProviderYaml::new("guarded", &upstream.origin())
        .access("{bearerToken: {secretRef: {name: callers, key: token}}}");
    let reviewed = ProviderYaml::new("reviewed", &upstream.origin())
        .access("{serviceAccounts: {audience: memgate, allowed: [{namespace: agents}]}}");
    let text = [
        upstream_secret(),
        secret_yaml("callers", "token", CALLER_TOKEN),
        open.yaml(),
        guarded.yaml(),
        reviewed.yaml(),
    ]
    .join("---\n");
    std::fs::write(dir.path().join("gateway.yaml"), text).expect("write");
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    (gateway, dir)
}

fn assert_unauthorized(answer: &Answer) {
    assert_eq!(answer.status, 401, "{}", answer.text);
    assert_eq!(answer.header("www-authenticate").as_deref(), Some("Bearer"));
    assert_eq!(
        answer.json(),
        json!({"code": "unauthorized", "severity": "non_retryable", "message": "Authentication required.", "retry_after_seconds": null})
    );
}

#[tokio::test]
async fn anonymous_calls_are_refused_unless_the_provider_opts_in() {
    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let (gateway, _dir) = start(&upstream).await;
    let query = json!({"query": QUERY});
    assert_eq!(gateway.search("open", &query, None).await.status, 200);
    assert_unauthorized(&gateway.search("guarded", &query, None).await);
    assert_unauthorized(&gateway.search("reviewed", &query, None).await);
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn static_bearer_token_is_accepted_only_when_it_matches() {
    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let (gateway, _dir) = start(&upstream).await;
    let query = json!({"query": QUERY});
    assert_eq!(gateway.search("guarded", &query, Some(CALLER_TOKEN)).await.status, 200);
    let near_miss = format!("{CALLER_TOKEN}x");
    for wrong in ["wrong", &CALLER_TOKEN[..CALLER_TOKEN.len() - 1], near_miss.as_str()] {
        assert_unauthorized(&gateway.search("guarded", &query, Some(wrong)).await);
    }
    // Another scheme, or a token on a provider that only takes anonymous calls, is not accepted.
    let basic = gateway
        .post_with("/nexent/v1/guarded/search", &query, None, &[("authorization", &format!("Token {CALLER_TOKEN}"))])
        .await;
    assert_unauthorized(&basic);
    assert_unauthorized(&gateway.search("open", &query, Some("wrong")).await);
    // The static token of one provider is not a ServiceAccount token of another.
    assert_unauthorized(&gateway.search("reviewed", &query, Some(CALLER_TOKEN)).await);
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn mcp_refuses_unauthenticated_callers_before_any_mcp_processing() {
    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let (gateway, _dir) = start(&upstream).await;
    // Not even a JSON-RPC message: the refusal comes first.
    let garbage = gateway.post_raw("/mcp/guarded", b"not json-rpc".to_vec(), None, &[]).await;
    assert_unauthorized(&garbage);
    assert_unauthorized(&gateway.mcp_initialize("guarded", None).await);
    assert_unauthorized(&gateway.mcp_initialize("guarded", Some("wrong")).await);
    let unknown = gateway.mcp_initialize("nowhere", None).await;
    assert_eq!(unknown.status, 404);

    let accepted = gateway.mcp_initialize("guarded", Some(CALLER_TOKEN)).await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    assert_eq!(accepted.json()["result"]["serverInfo"]["name"], "memgate-gateway");
    let open = gateway.mcp_initialize("open", None).await;
    assert_eq!(open.status, 200, "{}", open.text);
}

#[tokio::test]
async fn service_account_access_without_a_kubernetes_api_is_unavailable_not_open() {
    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let (gateway, _dir) = start(&upstream).await;
    let answer = gateway.search("reviewed", &json!({"query": QUERY}), Some("aaa.bbb.ccc")).await;
    assert_eq!(answer.status, 503, "{}", answer.text);
    assert_eq!(answer.json()["code"], "provider_error");
    assert_eq!(answer.json()["retry_after_seconds"], Value::Null);
    assert!(upstream.requests().is_empty());
}
