//! What real MCP clients send besides `tools/*` stays quiet in the running binary.
//!
//! - Qwen Code (and other clients) call `prompts/list` and `resources/list` on every connection
//!   although the server declares only `tools`: each answers JSON-RPC `-32601`, logged at debug,
//!   never WARN (rmcp logs every error answer at WARN; the gateway drops that copy).
//! - After a 401 from `/mcp/<provider>`, Qwen Code (through the MCP TypeScript SDK's auth flow)
//!   probes OAuth discovery documents under `/.well-known/`: each is a plain 404 that logs
//!   nothing, creates no metrics series and never reaches the upstream, until OAuth support lands.

mod serve_support;
mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use serve_support::{CALLER_TOKEN, Gateway, ProviderYaml, secret_yaml, upstream_secret};
use support::{Reply, Server};

const MCP_HEADERS: [(&str, &str); 2] =
    [("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-11-25")];

async fn guarded_gateway(upstream: &Server, log_filter: &str) -> (Gateway, tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let guarded = ProviderYaml::new("guarded", &upstream.origin())
        .access("{bearerToken: {secretRef: {name: callers, key: token}}}");
    let text = [upstream_secret(), secret_yaml("callers", "token", CALLER_TOKEN), guarded.yaml()].join("---\n");
    std::fs::write(dir.path().join("gateway.yaml"), text).expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[("RUST_LOG", log_filter)]).await;
    (gateway, dir, logs)
}

/// The log lines written after the first `skip` lines.
fn new_lines(gateway: &Gateway, skip: usize) -> Vec<Value> {
    gateway
        .logs()
        .lines()
        .skip(skip)
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("log line is not JSON ({err}): {line}")))
        .collect()
}

#[tokio::test]
async fn unoffered_mcp_methods_answer_method_not_found_logged_at_debug_only() {
    let upstream = Server::always(Reply::json(&json!({"results": []}))).await;
    let (gateway, _dir, _logs) = guarded_gateway(&upstream, "info,memgate_gateway=debug").await;
    let before = gateway.logs().lines().count();

    let methods = ["prompts/list", "resources/list", "resources/templates/list"];
    for (id, method) in methods.iter().enumerate() {
        let request = json!({"jsonrpc": "2.0", "id": id + 10, "method": method, "params": {}});
        let answer = gateway.post_with("/mcp/guarded", &request, Some(CALLER_TOKEN), &MCP_HEADERS).await;
        assert_eq!(answer.status, 200, "{method}: {}", answer.text);
        assert_eq!(answer.json()["error"]["code"], -32601, "{method}: {}", answer.text);
        assert_eq!(answer.json()["id"], id + 10);
    }
    // The tool itself still works on the same gateway.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let answer = gateway.post_with("/mcp/guarded", &list, Some(CALLER_TOKEN), &MCP_HEADERS).await;
    assert_eq!(answer.json()["result"]["tools"][0]["name"], "context_search", "{}", answer.text);

    let lines = new_lines(&gateway, before);
    let loud: Vec<&Value> = lines.iter().filter(|line| line["level"] == "WARN" || line["level"] == "ERROR").collect();
    assert!(loud.is_empty(), "WARN/ERROR lines for client probes: {loud:?}");
    for method in methods {
        let debug = lines.iter().filter(|line| line["level"] == "DEBUG" && line["fields"]["method"] == method).count();
        assert_eq!(debug, 1, "one debug line for {method}: {lines:?}");
    }
}

#[tokio::test]
async fn oauth_discovery_probes_after_a_401_are_quiet_404s() {
    let upstream = Server::always(Reply::json(&json!({"results": []}))).await;
    let (gateway, _dir, _logs) = guarded_gateway(&upstream, "info").await;

    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let refused = gateway.post_with("/mcp/guarded", &call, None, &MCP_HEADERS).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.header("www-authenticate").as_deref(), Some("Bearer"));

    let metrics_before = gateway.get("/metrics").await.text;
    let logs_before = gateway.logs();
    // The documents the MCP TypeScript SDK's discovery tries for `<base>/mcp/guarded` (RFC 9728
    // protected resource, RFC 8414 and OpenID Connect metadata, path-inserted and at the root).
    let probes = [
        "/.well-known/oauth-protected-resource/mcp/guarded",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server/mcp/guarded",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration/mcp/guarded",
        "/.well-known/openid-configuration",
        "/mcp/guarded/.well-known/openid-configuration",
    ];
    let started = Instant::now();
    for _ in 0..5 {
        for probe in probes {
            let answer = gateway.get(probe).await;
            assert_eq!(answer.status, 404, "{probe}: {}", answer.text);
        }
    }
    // Generous ceiling: 35 loopback requests answered without any slow path.
    assert!(started.elapsed() < Duration::from_secs(15), "probes took {:?}", started.elapsed());

    assert_eq!(gateway.logs(), logs_before, "a probe wrote a log line");
    assert_eq!(gateway.get("/metrics").await.text, metrics_before, "a probe changed the metrics");
    assert!(upstream.requests().is_empty(), "a probe reached the upstream");
}
