//! rmcp's own client (the official Rust MCP SDK) against `mcp::router` over real TCP, in both
//! lifecycles: the `initialize` handshake and 2026-07-28 `server/discover`.
//!
//! The backend is [`StaticSearchForTest`]; the engine behind the real gateway is tested against
//! real upstream servers in `failure_matrix.rs` and, through this surface, in `mcp_surface.rs`.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use memgate_gateway::engine::{EngineError, Item};
use memgate_gateway::mcp::{FAILURE_TEXT, INPUT_ERROR_TEXT, ProviderSearch, router};
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

/// Stands in for the engine: `docs` answers six fixed items (the first echoing the query), any
/// other provider fails as an upstream 503 would.
struct StaticSearchForTest;

impl ProviderSearch for StaticSearchForTest {
    fn exists(&self, provider: &str) -> bool {
        matches!(provider, "docs" | "broken")
    }

    fn search<'a>(
        &'a self,
        provider: &'a str,
        query: String,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
        Box::pin(async move {
            if provider != "docs" {
                return Err(EngineError::ServerError(503));
            }
            Ok((0..6)
                .map(|n| Item {
                    id: format!("doc-{n}"),
                    content: format!("<p>{query}</p> limit={limit}"),
                    title: None,
                    uri: None,
                    score: Some(f64::from(n) / 10.0),
                    updated_at: None,
                })
                .collect())
        })
    }
}

async fn gateway() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(Arc::new(StaticSearchForTest), Vec::new());
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

fn lifecycles() -> [(ClientLifecycleMode, ProtocolVersion); 2] {
    [
        (ClientLifecycleMode::Initialize, ProtocolVersion::V_2025_11_25),
        (
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
            ProtocolVersion::V_2026_07_28,
        ),
    ]
}

async fn connect(addr: SocketAddr, provider: &str, lifecycle: ClientLifecycleMode) -> RunningService<RoleClient, ()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp/{provider}"));
    ().serve_with_lifecycle(transport, lifecycle).await.expect("the client connects")
}

async fn call(client: &RunningService<RoleClient, ()>, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    let params = CallToolRequestParams::new("context_search").with_arguments(arguments as JsonObject);
    client.call_tool(params).await.expect("a tool result")
}

fn text_of(result: &CallToolResult) -> String {
    assert_eq!(result.content.len(), 1, "{result:?}");
    result.content[0].as_text().expect("a text block").text.clone()
}

#[tokio::test]
async fn rmcp_clients_of_both_lifecycles_list_and_call_context_search() {
    let addr = gateway().await;
    for (lifecycle, version) in lifecycles() {
        let client = connect(addr, "docs", lifecycle).await;
        assert_eq!(client.peer_info().map(|info| info.protocol_version.clone()), Some(version.clone()));

        let tools = client.list_all_tools().await.expect("tools");
        assert_eq!(tools.len(), 1);
        let tool = serde_json::to_value(&tools[0]).expect("serializes");
        assert_eq!(tool["name"], json!("context_search"));
        assert_eq!(tool["title"], json!("Search external context"));
        assert_eq!(tool["annotations"], json!({"destructiveHint": false}));
        assert_eq!(tool["inputSchema"]["additionalProperties"], json!(false));

        let result = call(&client, json!({"query": " where\n\tis  it "})).await;
        assert_eq!(result.is_error, Some(false), "{version}");
        let text = text_of(&result);
        assert!(!text.contains('<') && !text.contains('>'), "{text}");
        let parsed: Value = serde_json::from_str(&text).expect("JSON text");
        assert_eq!(Some(parsed.clone()), result.structured_content);
        let items = parsed["untrusted_external_context"]["items"].as_array().expect("items").clone();
        assert_eq!(items.len(), 5);
        // Integral scores go out as JavaScript writes them (`0`, not `0.0`).
        assert_eq!(items[0], json!({"id": "doc-0", "content": "<p>where is it</p> limit=5", "score": 0}));

        for invalid in [json!({}), json!({"query": " \t\n"}), json!({"query": "policy", "repository": "other"})] {
            let result = call(&client, invalid).await;
            assert_eq!((result.is_error, text_of(&result)), (Some(true), INPUT_ERROR_TEXT.to_string()));
        }
        client.cancel().await.expect("closes");
    }
}

#[tokio::test]
async fn rmcp_clients_see_the_fixed_failure_text() {
    let addr = gateway().await;
    for (lifecycle, _) in lifecycles() {
        let client = connect(addr, "broken", lifecycle).await;
        let result = call(&client, json!({"query": "secret-query-4410"})).await;
        assert_eq!((result.is_error, text_of(&result)), (Some(true), FAILURE_TEXT.to_string()));
        assert_eq!(result.structured_content, None);
        client.cancel().await.expect("closes");
    }
}
