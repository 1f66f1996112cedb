//! The direct path of `/mcp/{provider}`: a stateless `tools/call` of `context_search` from a client
//! of a protocol version before 2026-07-28 (Qwen Code, the official SDKs' current releases, Nexent)
//! answered without rmcp's per-request service.
//!
//! rmcp 3.11.0 serves every stateless POST through a one-shot service: a serve loop task, a handler
//! task and a response-send task, joined by channels and cancellation tokens
//! (`streamable_http_server/tower.rs` `handle_post`, `service.rs` `serve_inner`). For the one
//! request agents make on every turn that costs more than the search itself, so this path answers
//! it in the request's own task, after parsing the body once with rmcp's own message type.
//!
//! It takes only requests whose handling by rmcp is known exactly; everything else (other methods,
//! 2026-07-28 requests with their per-request `_meta` and `Mcp-*` headers, `_meta` of any kind,
//! unusual `Accept` syntax, a missing or unknown `MCP-Protocol-Version`) goes to rmcp unchanged.
//! For the requests it takes, it mirrors rmcp's checks that can refuse them (`Accept` naming both
//! `application/json` and `text/event-stream`, the JSON content type, a known protocol version
//! header) and rmcp's answer: the same JSON-RPC response, its result passed through
//! `ServerResult::strip_result_type_for_legacy_peer` and `strip_non_object_output_for_legacy_peer`
//! as rmcp's `ServerHandler` dispatch does for peers before 2026-07-28 (`handler/server.rs`),
//! serialised by rmcp's types, `200` `application/json`. A client that disconnects drops the call,
//! which aborts the upstream request, as rmcp's cancellation does. The unit test
//! `the_direct_path_answers_exactly_as_rmcp_does` sends one corpus of requests through both paths.

use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientJsonRpcMessage, ClientRequest, JsonObject, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};

use super::server::TOOL_NAME;

/// The protocol version header (rmcp's `HEADER_MCP_PROTOCOL_VERSION`).
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// A `tools/call` of `context_search` the direct path answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DirectCall {
    /// The JSON-RPC id, echoed in the answer.
    pub(crate) id: RequestId,
    /// The call's arguments, as rmcp would hand them to the tool.
    pub(crate) arguments: Option<JsonObject>,
}

/// The call in `body` when the request is one the direct path takes (see the module docs); `None`
/// sends it to rmcp.
pub(crate) fn direct_call(headers: &HeaderMap, body: &[u8]) -> Option<DirectCall> {
    if !accepts_json_and_event_stream(headers) || !has_json_content_type(headers) || !legacy_version(headers) {
        return None;
    }
    let Ok(ClientJsonRpcMessage::Request(request)) = serde_json::from_slice::<ClientJsonRpcMessage>(body) else {
        return None;
    };
    let ClientRequest::CallToolRequest(call) = request.request else { return None };
    let params = call.params;
    let no_meta = params.meta.as_ref().is_none_or(|meta| meta.0.is_empty());
    let plain = params.input_responses.is_none() && params.request_state.is_none();
    (params.name == TOOL_NAME && no_meta && plain).then_some(DirectCall { id: request.id, arguments: params.arguments })
}

/// rmcp's answer to the call `id` that ended with `result`.
pub(crate) fn answer(id: RequestId, result: CallToolResult) -> Response {
    let mut result = ServerResult::from(CallToolResponse::from(result));
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    match serde_json::to_vec(&ServerJsonRpcMessage::response(result, id)) {
        Ok(body) => {
            (StatusCode::OK, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
        }
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Every `Accept` value is plain (no parameters, no quotes: rmcp's quality rules then never apply)
/// and together they name both media types rmcp requires.
fn accepts_json_and_event_stream(headers: &HeaderMap) -> bool {
    let mut json = false;
    let mut event_stream = false;
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else { return false };
        if value.contains([';', '"']) {
            return false;
        }
        for essence in value.split(',').map(str::trim) {
            json |= essence.eq_ignore_ascii_case("application/json");
            event_stream |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && event_stream
}

/// rmcp's content type rule: the first `Content-Type`'s essence is `application/json`.
fn has_json_content_type(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).and_then(|value| value.to_str().ok()).is_some_and(|value| {
        let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
        essence.trim().eq_ignore_ascii_case("application/json")
    })
}

/// Exactly one `MCP-Protocol-Version`, a version rmcp knows from before 2026-07-28, and no other
/// `Mcp-*` header (no session id, no SEP-2243 standard headers).
fn legacy_version(headers: &HeaderMap) -> bool {
    let mut versions = headers.get_all(PROTOCOL_VERSION_HEADER).iter();
    let (Some(version), None) = (versions.next(), versions.next()) else { return false };
    let others = headers.keys().any(|name| name.as_str().starts_with("mcp-") && name != PROTOCOL_VERSION_HEADER);
    let known = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|known| known.as_str().as_bytes() == version.as_bytes() && *known < ProtocolVersion::V_2026_07_28);
    known && !others
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use futures::future::BoxFuture;
    use tower::ServiceExt;

    use super::*;
    use crate::engine::{EngineError, Item};
    use crate::mcp::{McpHttpConfig, ProviderSearch, router_served};

    /// Answers provider `p` with one item naming the query; the query `fail` fails.
    struct Echo;

    impl ProviderSearch for Echo {
        fn exists(&self, provider: &str) -> bool {
            provider == "p"
        }

        fn search<'a>(
            &'a self,
            _provider: &'a str,
            query: String,
            _limit: u32,
        ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
            Box::pin(async move {
                if query == "fail" {
                    return Err(EngineError::Timeout);
                }
                let item = Item {
                    id: "m-1".into(),
                    content: format!("about <{query}> \"quoted\" é 😀"),
                    title: Some("T".into()),
                    uri: None,
                    score: Some(0.5),
                    updated_at: None,
                };
                Ok(vec![item])
            })
        }
    }

    fn call(id: &str, params: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
    }

    /// Bodies: calls of every shape the direct path might take or must leave, and other messages.
    fn bodies() -> Vec<String> {
        let mut bodies = Vec::new();
        for id in ["1", "\"a\"", "-5", "9007199254740993", "0", "\"\"", "1.5", "null", "true"] {
            bodies.push(call(id, r#"{"name":"context_search","arguments":{"query":"hello"}}"#));
        }
        for params in [
            r#"{"name":"context_search","arguments":{"query":"fail"}}"#,
            r#"{"name":"context_search","arguments":{"query":""}}"#,
            r#"{"name":"context_search","arguments":{"query":"   "}}"#,
            r#"{"name":"context_search","arguments":{"query":"x","extra":1}}"#,
            r#"{"name":"context_search","arguments":{"query":7}}"#,
            r#"{"name":"context_search","arguments":{}}"#,
            r#"{"name":"context_search"}"#,
            r#"{"name":"context_search","arguments":null}"#,
            r#"{"name":"context_search","arguments":[]}"#,
            r#"{"name":"context_search","arguments":{"query":"a","query":"b"}}"#,
            r#"{"name":"context_search","arguments":{"query":"<b>\"q\"</b>\n\u0001"}}"#,
            r#"{"name":"context_search","arguments":{"query":"hello"},"extra":true}"#,
            r#"{"name":"context_search","arguments":{"query":"hello"},"_meta":{}}"#,
            r#"{"name":"context_search","arguments":{"query":"hello"},"_meta":{"progressToken":1}}"#,
            r#"{"name":"context_search","arguments":{"query":"hello"},"requestState":"s"}"#,
            r#"{"name":"other_tool","arguments":{"query":"hello"}}"#,
            r#"{"arguments":{"query":"hello"}}"#,
            r#"[]"#,
        ] {
            bodies.push(call("3", params));
        }
        bodies.extend(
            [
                r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
                r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                r#"{"jsonrpc":"1.0","id":6,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"id":6,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}},"extra":1}"#,
                r#"[{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}]"#,
                r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
            ]
            .map(str::to_string),
        );
        bodies
    }

    async fn send(router: &axum::Router, headers: &[(&str, &str)], body: &str) -> (u16, Option<String>, Vec<u8>) {
        let mut request = Request::post("/mcp/p").header("host", "localhost");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response =
            router.clone().oneshot(request.body(Body::from(body.to_string())).expect("request")).await.expect("answer");
        let status = response.status().as_u16();
        let content_type = response.headers().get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("?").to_string());
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        (status, content_type, bytes.to_vec())
    }

    #[tokio::test]
    async fn the_direct_path_answers_exactly_as_rmcp_does() {
        let direct = router_served(Arc::new(Echo), McpHttpConfig::default(), true);
        let rmcp = router_served(Arc::new(Echo), McpHttpConfig::default(), false);
        let versions: [&[&str]; 8] = [
            &[],
            &["2024-11-05"],
            &["2025-03-26"],
            &["2025-06-18"],
            &["2025-11-25"],
            &["2026-07-28"],
            &["2099-01-01"],
            &["2025-11-25", "2025-11-25"],
        ];
        let accepts: [&[&str]; 7] = [
            &["application/json, text/event-stream"],
            &["text/event-stream,application/json"],
            &["Application/JSON , Text/Event-Stream"],
            &["application/json", "text/event-stream"],
            &["application/json"],
            &["application/json;q=0.9, text/event-stream"],
            &[],
        ];
        let content_types = ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON"];
        let extras: [&[(&str, &str)]; 3] = [&[], &[("mcp-session-id", "s-1")], &[("mcp-method", "tools/call")]];
        let bodies = bodies();
        let (mut compared, mut taken) = (0, 0);
        for version in versions {
            for accept in accepts {
                for content_type in content_types {
                    for extra in extras {
                        let mut headers: Vec<(&str, &str)> = vec![("content-type", content_type)];
                        headers.extend(version.iter().map(|v| ("mcp-protocol-version", *v)));
                        headers.extend(accept.iter().map(|a| ("accept", *a)));
                        headers.extend(extra.iter().copied());
                        let mut map = HeaderMap::new();
                        for (name, value) in &headers {
                            map.append(*name, HeaderValue::from_str(value).expect("value"));
                        }
                        for body in &bodies {
                            taken += usize::from(direct_call(&map, body.as_bytes()).is_some());
                            let ours = send(&direct, &headers, body).await;
                            let theirs = send(&rmcp, &headers, body).await;
                            assert_eq!(
                                (ours.0, &ours.1, String::from_utf8_lossy(&ours.2)),
                                (theirs.0, &theirs.1, String::from_utf8_lossy(&theirs.2)),
                                "{headers:?} {body}"
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(taken >= 400, "the corpus exercises the direct path: {taken} of {compared}");
    }

    #[test]
    fn what_sdk_clients_send_takes_the_direct_path() {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        headers.insert(PROTOCOL_VERSION_HEADER, HeaderValue::from_static("2025-11-25"));
        let body = call("2", r#"{"name":"context_search","arguments":{"query":"deploys"}}"#);
        let taken = direct_call(&headers, body.as_bytes()).expect("taken");
        assert_eq!(taken.id, RequestId::Number(2));
        headers.insert(PROTOCOL_VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        assert_eq!(direct_call(&headers, body.as_bytes()), None, "2026-07-28 requests stay with rmcp");
    }
}
