//! The MCP surface as wired into the running binary: a `context_search` call reaches the upstream
//! with the provider's fixed scope and limit 5, providers without MCP are 404, and
//! `--allowed-host` decides which `Host` values the transport accepts.

mod serve_support;
mod support;

use serde_json::{Value, json};
use serve_support::{Answer, Gateway, ProviderYaml, body_of, mem0_results, upstream_secret};
use support::{Reply, Server};

const QUERY: &str = "mcp wiring probe 90aa";

async fn call(gateway: &Gateway, provider: &str, host: Option<&str>) -> Answer {
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "context_search", "arguments": {"query": QUERY}}
    });
    let mut headers = vec![("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-06-18")];
    if let Some(host) = host {
        headers.push(("host", host));
    }
    gateway.post_with(&format!("/mcp/{provider}"), &body, None, &headers).await
}

#[tokio::test]
async fn context_search_reaches_the_upstream_through_the_binary() {
    let upstream = Server::always(Reply::json(&mem0_results(8))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut nexent_only = ProviderYaml::new("nexent-only", &upstream.origin());
    nexent_only.mcp = false;
    let providers =
        [upstream_secret(), ProviderYaml::new("repo-memory", &upstream.origin()).yaml(), nexent_only.yaml()];
    std::fs::write(dir.path().join("gateway.yaml"), providers.join("---\n")).expect("write");
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;

    let answer = call(&gateway, "repo-memory", None).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let result = &answer.json()["result"];
    assert_eq!(result["isError"], false, "{result}");
    let items = &result["structuredContent"]["untrusted_external_context"]["items"];
    assert_eq!(items.as_array().map(Vec::len), Some(5), "{result}");
    assert_eq!(items[0]["id"], "m0");
    let sent = body_of(&upstream.requests()[0]);
    assert_eq!(sent["top_k"], 5);
    assert_eq!(sent["filters"], json!({"user_id": "repository-memory", "agent_id": "qwen-code"}));

    let hidden = call(&gateway, "nexent-only", None).await;
    assert_eq!(hidden.status, 404, "{}", hidden.text);
    assert_eq!(upstream.requests().len(), 1);
}

#[tokio::test]
async fn allowed_hosts_come_from_the_flag() {
    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = ProviderYaml::new("repo-memory", &upstream.origin()).yaml();
    std::fs::write(dir.path().join("gateway.yaml"), [upstream_secret(), provider].join("---\n")).expect("write");
    let args = ["--allowed-host", "memgate-gateway.agents.svc", "--allowed-host", "memgate-gateway.agents.svc:8080"];
    let gateway = Gateway::start(dir.path(), dir.path(), &args, &[]).await;

    let accepted = call(&gateway, "repo-memory", Some("memgate-gateway.agents.svc:8080")).await;
    assert_eq!(accepted.status, 200, "{}", accepted.text);
    assert_eq!(accepted.json()["result"]["isError"], Value::Bool(false));
    let refused = call(&gateway, "repo-memory", None).await;
    assert_eq!(refused.status, 403, "loopback is no longer allowed: {}", refused.text);
    assert_eq!(upstream.requests().len(), 1);
}
