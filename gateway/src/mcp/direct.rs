//! The direct path of `/mcp/{provider}`: a stateless `tools/call` of `context_search` answered
//! without rmcp's per-request service, from a client of either protocol era: one before 2026-07-28
//! (Qwen Code, the official SDKs' handshake sessions, Nexent) or a 2026-07-28 one (per-request
//! `_meta`, SEP-2243 `Mcp-Method`/`Mcp-Name` headers, no handshake).
//!
//! rmcp 3.11.0 serves every stateless POST through a one-shot service: a serve loop task, a handler
//! task and a response-send task, joined by channels and cancellation tokens
//! (`streamable_http_server/tower.rs` `handle_post` and `serve_negotiated_request_directly`,
//! `service.rs` `serve_inner`). For the one request agents make on every turn that costs more than
//! the search itself, so this path answers it in the request's own task, after reading the body
//! once: a plain call in one typed pass ([`read_call`]), any other body with rmcp's own message
//! type ([`direct_call`]).
//!
//! It takes only requests whose handling by rmcp is known exactly; everything else goes to rmcp
//! unchanged: other methods, a request naming its authority twice (target and `Host`: rmcp reads
//! `Host` first, the gateway's check the target), unusual `Accept` syntax, a missing, repeated or unknown
//! `MCP-Protocol-Version`, any `Mcp-*` header the era does not call for (a session id,
//! `Mcp-Param-*`), and
//! - before 2026-07-28: a `_meta` with any key;
//! - 2026-07-28: anything but exactly one `Mcp-Method: tools/call` and one plain
//!   `Mcp-Name: context_search` (no Base64 form), and a `_meta` other than the three lifecycle keys
//!   (`protocolVersion` naming 2026-07-28, well-formed `clientCapabilities`, and `clientInfo` if
//!   sent, well-formed), which rmcp's `validate_standard_headers`,
//!   `validate_request_protocol_version_meta` and its handler's metadata check all pass.
//!
//! For the requests it takes, it mirrors rmcp's checks that can refuse them (`Accept` naming both
//! `application/json` and `text/event-stream`, the JSON content type) and rmcp's answer: the same
//! JSON-RPC response, `200` `application/json`, its result shaped as rmcp's `ServerHandler` dispatch
//! shapes it for the request's era (`handler/server.rs`): `fill_missing_cache_hints` for 2026-07-28,
//! `strip_result_type_for_legacy_peer` and `strip_non_object_output_for_legacy_peer` before it,
//! serialised by rmcp's types, or, for a found result, written byte for byte as they write it
//! ([`found_body`]). A client that disconnects drops the call, which aborts the upstream
//! request, as rmcp's cancellation does. The unit tests `the_direct_path_answers_exactly_as_rmcp_does`
//! and `per_request_calls_are_answered_exactly_as_rmcp_does` send corpora of requests through both
//! paths, and hold the typed reading of each to rmcp's.

use std::borrow::Cow;
use std::fmt::Write as _;

use axum::http::header::{ACCEPT, CONTENT_TYPE, HOST};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcVersion2_0, ProtocolVersion,
    RequestId, RequestMetaObject, ServerJsonRpcMessage, ServerResult,
};
use serde::Deserialize;

use super::server::{Outcome, TOOL_NAME, query_argument};
use crate::profile::{ProfileOutput, normalize_query, push_json_string};

// Header names as `HeaderName`s: a lookup by `&str` parses and checks the name on every call.
/// The protocol version header (rmcp's `HEADER_MCP_PROTOCOL_VERSION`).
const PROTOCOL_VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// SEP-2243's method header (rmcp's `HEADER_MCP_METHOD`).
const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
/// SEP-2243's name header (rmcp's `HEADER_MCP_NAME`).
const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// The `_meta` keys of the 2026-07-28 lifecycle (rmcp's `RequestMetaObject::META_KEY_*`).
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// The protocol era of a direct call: it decides how rmcp's dispatch shapes the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// A version negotiated by the `initialize` handshake (2024-11-05 .. 2025-11-25).
    Handshake,
    /// 2026-07-28: every request carries its own lifecycle `_meta`.
    PerRequest,
}

/// A `tools/call` of `context_search` the direct path answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DirectCall {
    /// The JSON-RPC id, echoed in the answer.
    pub(crate) id: RequestId,
    /// The normalised query when the arguments are exactly a valid `{"query": ..}` (what the tool
    /// would search for); `None` answers the tool's input error.
    pub(crate) query: Option<String>,
    /// The client's protocol era.
    pub(crate) era: Era,
}

/// The call in `message` when the request is one the direct path takes (see the module docs);
/// `None` sends it to rmcp.
pub(crate) fn direct_call(uri: &Uri, headers: &HeaderMap, message: ClientJsonRpcMessage) -> Option<DirectCall> {
    let era = head_era(uri, headers)?;
    let ClientJsonRpcMessage::Request(request) = message else { return None };
    // rmcp keeps a request's `_meta` in its extensions, not in its params, once deserialised.
    let meta = era.takes_meta(Some(request.request.get_meta()));
    let ClientRequest::CallToolRequest(call) = request.request else { return None };
    let params = call.params;
    let plain = params.input_responses.is_none() && params.request_state.is_none();
    (params.name == TOOL_NAME && meta && plain).then(|| DirectCall {
        id: request.id,
        query: query_argument(params.arguments.as_ref()),
        era,
    })
}

/// The call in `body` read without rmcp's message parse, when the request is one the direct path
/// takes and its body is exactly a plain call: a JSON object with `jsonrpc` `"2.0"`, an `id`,
/// `method` `"tools/call"` and `params` holding `name` `"context_search"`, `arguments` holding
/// exactly a string `query`, and (optionally) `_meta`, no other key at any level, none twice.
/// `None` leaves the body to [`direct_call`] after rmcp's parse, so this reader only has to be
/// right where it says yes: there it gives the call [`direct_call`] gives (the unit tests compare
/// the two on every request of their corpora, the `mcp_direct_read` fuzz target on any input).
///
/// Why: rmcp's `JsonRpcMessage` parse buffers the body through its untagged and flattened enums
/// (rmcp 3.11 `model.rs`, `from_buffered_deserializer`), about three times the cost of reading the
/// same body into a `Value`; this reader is one typed pass that borrows the query where it can.
pub(crate) fn read_call(uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Option<DirectCall> {
    let era = head_era(uri, headers)?;
    let wire: WireCall<'_> = serde_json::from_slice(body).ok()?;
    let plain = wire.method == "tools/call" && wire.params.name == TOOL_NAME;
    (plain && era.takes_meta(wire.params.meta.as_ref())).then(|| DirectCall {
        id: wire.id,
        query: normalize_query(&wire.params.arguments.query).ok(),
        era,
    })
}

/// The JSON-RPC request [`read_call`] reads; rmcp's own types for the version and the id, so both
/// are read by the code rmcp reads them with.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCall<'a> {
    #[serde(rename = "jsonrpc")]
    _version: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: WireParams<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: WireArguments<'a>,
    /// An object when present (`null` is left to rmcp).
    #[serde(rename = "_meta", default, deserialize_with = "present_meta")]
    meta: Option<RequestMetaObject>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireArguments<'a> {
    #[serde(borrow)]
    query: Cow<'a, str>,
}

/// `_meta` as rmcp's type, called only when the key is present: `null` is an error (so the body
/// goes to rmcp), not an absent `_meta`.
fn present_meta<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<RequestMetaObject>, D::Error> {
    RequestMetaObject::deserialize(deserializer).map(Some)
}

/// The era of a request whose head the direct path takes: the checks of the module docs on the
/// target, `Accept`, `Content-Type` and the `Mcp-*` headers.
fn head_era(uri: &Uri, headers: &HeaderMap) -> Option<Era> {
    // The gateway checked the target's authority when it has one (absolute form, HTTP/2), rmcp
    // checks `Host` first: where both are present they could differ, and rmcp's answer is its own.
    if uri.authority().is_some() && headers.contains_key(HOST) {
        return None;
    }
    if !accepts_json_and_event_stream(headers) || !has_json_content_type(headers) {
        return None;
    }
    era(headers)
}

impl Era {
    /// Whether a call of this era with `meta` is taken: none (absent or empty) before 2026-07-28;
    /// exactly the lifecycle keys for 2026-07-28 ([`per_request_meta`]).
    fn takes_meta(self, meta: Option<&RequestMetaObject>) -> bool {
        match self {
            Era::Handshake => meta.is_none_or(|meta| meta.0.is_empty()),
            Era::PerRequest => meta.is_some_and(per_request_meta),
        }
    }
}

/// The direct path's two readings of a POST to `/mcp/{provider}` carrying `body` from an SDK client
/// of the 2025-11-25 era, or with `modern` of 2026-07-28 (its headers as the Python SDK sends
/// them): [`read_call`]'s and [`direct_call`]'s after rmcp's parse, as `Debug` text (`None`: not
/// taken). For the `mcp_direct_read` fuzz target, which holds the first to the second.
#[doc(hidden)]
pub fn readings(modern: bool, body: &[u8]) -> (Option<String>, Option<String>) {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    let version = if modern { "2026-07-28" } else { "2025-11-25" };
    headers.insert(PROTOCOL_VERSION_HEADER, HeaderValue::from_static(version));
    if modern {
        headers.insert(METHOD_HEADER, HeaderValue::from_static("tools/call"));
        headers.insert(NAME_HEADER, HeaderValue::from_static(TOOL_NAME));
    }
    let uri = Uri::from_static("/mcp/p");
    let typed = read_call(&uri, &headers, body);
    let message = serde_json::from_slice::<ClientJsonRpcMessage>(body).ok();
    let general = message.and_then(|message| direct_call(&uri, &headers, message));
    (typed.map(|call| format!("{call:?}")), general.map(|call| format!("{call:?}")))
}

/// rmcp's answer to the call `id` of a client in `era` that ended with `outcome`.
///
/// A found result (every call an agent makes that succeeds) is written straight into one buffer
/// of the size it needs, byte for byte what rmcp writes for it (see [`found_body`]); the error
/// results go through rmcp's own types.
pub(crate) fn answer(id: RequestId, era: Era, outcome: Outcome) -> Response {
    let body = match outcome {
        Outcome::Found(output) => found_body(&id, era, &output),
        other => match rmcp_body(id, era, other.into_result()) {
            Ok(body) => body,
            Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        },
    };
    (StatusCode::OK, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// rmcp's bytes for `result`: shaped for `era` as its `ServerHandler` dispatch shapes a call's
/// result (`handler/server.rs`), serialised by its types.
fn rmcp_body(id: RequestId, era: Era, result: CallToolResult) -> serde_json::Result<Vec<u8>> {
    let mut result = ServerResult::from(CallToolResponse::from(result));
    match era {
        Era::Handshake => {
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
        }
        Era::PerRequest => result.fill_missing_cache_hints(),
    }
    serde_json::to_vec(&ServerJsonRpcMessage::response(result, id))
}

/// The bytes [`rmcp_body`] writes for a found result, without building rmcp's value: the
/// JSON-RPC envelope, `resultType: "complete"` for 2026-07-28 (`fill_missing_cache_hints`; a
/// handshake-era result has none), the one text block, `structuredContent` (an object, so kept
/// for every era) and `isError: false`, in rmcp's field order. The unit tests hold the two paths'
/// bytes equal over corpora of results.
fn found_body(id: &RequestId, era: Era, output: &ProfileOutput) -> Vec<u8> {
    // The text (escaped: a few bytes more) and the structured value (about the text's length).
    let mut body = String::with_capacity(2 * output.text.len() + output.text.len() / 4 + 160);
    body.push_str(r#"{"jsonrpc":"2.0","id":"#);
    match id {
        RequestId::Number(number) => {
            let _ = write!(body, "{number}");
        }
        RequestId::String(text) => push_json_string(&mut body, text),
    }
    body.push_str(r#","result":{"#);
    if era == Era::PerRequest {
        body.push_str(r#""resultType":"complete","#);
    }
    body.push_str(r#""content":[{"type":"text","text":"#);
    push_json_string(&mut body, &output.text);
    body.push_str(r#"}],"structuredContent":"#);
    output.push_structured_json(&mut body);
    body.push_str(r#","isError":false}}"#);
    body.into_bytes()
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

/// The era named by exactly one `MCP-Protocol-Version` with exactly the other `Mcp-*` headers that
/// era calls for: none before 2026-07-28 (no session id, no SEP-2243 headers); for 2026-07-28 one
/// `Mcp-Method: tools/call` and one `Mcp-Name: context_search`, byte for byte.
fn era(headers: &HeaderMap) -> Option<Era> {
    let version = single(headers, &PROTOCOL_VERSION_HEADER)?;
    let mut others =
        headers.keys().filter(|name| name.as_str().starts_with("mcp-") && *name != PROTOCOL_VERSION_HEADER);
    if version.as_bytes() == ProtocolVersion::V_2026_07_28.as_str().as_bytes() {
        let method = single(headers, &METHOD_HEADER).is_some_and(|value| value.as_bytes() == b"tools/call");
        let name = single(headers, &NAME_HEADER).is_some_and(|value| value.as_bytes() == TOOL_NAME.as_bytes());
        let unexpected = others.any(|header| header != METHOD_HEADER && header != NAME_HEADER);
        return (method && name && !unexpected).then_some(Era::PerRequest);
    }
    let handshake = ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|known| known.as_str().as_bytes() == version.as_bytes() && *known < ProtocolVersion::V_2026_07_28);
    (handshake && others.next().is_none()).then_some(Era::Handshake)
}

/// The one value of header `name`; `None` when absent or repeated.
fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a HeaderValue> {
    let mut values = headers.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else { return None };
    Some(value)
}

/// A 2026-07-28 `_meta` with the lifecycle keys and nothing else: a `protocolVersion` of 2026-07-28,
/// well-formed `clientCapabilities`, and `clientInfo` well-formed when sent.
fn per_request_meta(meta: &RequestMetaObject) -> bool {
    let known = meta
        .0
        .keys()
        .all(|key| [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO].contains(&key.as_str()));
    let version = meta.protocol_version().is_some_and(|version| version == ProtocolVersion::V_2026_07_28);
    let client_info = !meta.0.contains_key(META_CLIENT_INFO) || meta.client_info().is_some();
    known && version && meta.client_capabilities().is_some() && client_info
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
                match query.as_str() {
                    "fail" => Err(EngineError::Timeout),
                    "none" => Ok(Vec::new()),
                    "many" => Ok(many_items()),
                    _ => Ok(vec![Item {
                        id: "m-1".into(),
                        content: format!("about <{query}> \"quoted\" é 😀"),
                        title: Some("T".into()),
                        uri: None,
                        score: Some(0.5),
                        updated_at: None,
                    }]),
                }
            })
        }
    }

    /// Seven items covering every field, escape and kind of score the answer writes (more than
    /// the profile keeps, one over its text budget).
    fn many_items() -> Vec<Item> {
        let scores =
            [Some(1.0), Some(-0.0), Some(1e21), Some(1.5e-7), None, Some(0.1 + 0.2), Some(9_007_199_254_740_993.0)];
        scores
            .into_iter()
            .enumerate()
            .map(|(n, score)| Item {
                id: format!("m-{n} \u{1}\\"),
                content: format!("line\nbreak\ttab \u{0}\u{1f}\u{7f} <{n}> \u{2028} {}", "x".repeat(n * 300)),
                title: (n % 2 == 0).then(|| format!("title \"{n}\" 中")),
                uri: (n % 3 == 0).then(|| format!("https://example.com/{n}?a=1&b=<2>")),
                score,
                updated_at: (n % 2 == 1).then(|| "2026-12-01T08:30:00Z".to_string()),
            })
            .collect()
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
            r#"{"name":"context_search","arguments":{"query":"many"}}"#,
            r#"{"name":"context_search","arguments":{"query":"none"}}"#,
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
                // Near misses of the typed reader's shape: key order, whitespace, escapes, repeats,
                // nulls, trailing bytes.
                r#"{"params":{"arguments":{"query":"hello"},"name":"context_search"},"method":"tools/call","id":8,"jsonrpc":"2.0"}"#,
                " {\n\t\"jsonrpc\" : \"2.0\" , \"id\" : 9 , \"method\":\"tools/call\",\"params\":{\"name\":\"context_search\",\"arguments\":{\"query\":\"hello\"}}}\r\n ",
                r#"{"jsonrpc":"2.0","id":10,"method":"tools\/call","params":{"name":"context\u005fsearch","arguments":{"\u0071uery":"h\u00e9llo \ud83d\ude00"}}}"#,
                r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":12,"id":13,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"context_search","name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"},"_meta":null}}"#,
                r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"},"_meta":[]}}"#,
                r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"context_search","arguments":{"query":null}}}"#,
                r#"{"jsonrpc":"2.0","id":18,"method":"tools/call","params":null}"#,
                r#"{"jsonrpc":"2.0","id":19,"method":"tools/call"}"#,
                r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}} x"#,
                r#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}{}"#,
                r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":"\u0000\"","method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0 ","id":22,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"Context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":24,"method":"tools/list","params":{"name":"context_search","arguments":{"query":"hello"}}}"#,
                r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
            ]
            .map(str::to_string),
        );
        bodies
    }

    async fn send(router: &axum::Router, headers: &[(&str, &str)], body: &str) -> (u16, Option<String>, Vec<u8>) {
        send_to(router, "/mcp/p", Some("localhost"), headers, body).await
    }

    async fn send_to(
        router: &axum::Router,
        target: &str,
        host: Option<&str>,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Option<String>, Vec<u8>) {
        let mut request = Request::post(target);
        if let Some(host) = host {
            request = request.header("host", host);
        }
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
        let (mut compared, mut taken, mut typed) = (0, 0, 0);
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
                            let rmcp_read = taken_call(&map, body);
                            taken += usize::from(rmcp_read.is_some());
                            typed += usize::from(typed_reader_agrees(&map, body, rmcp_read.as_ref()));
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
        assert!(typed >= 400, "the corpus exercises the typed reader: {typed} of {taken}");
    }

    /// The call the direct path takes from `body` with `headers` after rmcp's parse, if any.
    fn taken_call(headers: &HeaderMap, body: &str) -> Option<DirectCall> {
        let uri = Uri::from_static("/mcp/p");
        serde_json::from_str::<ClientJsonRpcMessage>(body).ok().and_then(|message| direct_call(&uri, headers, message))
    }

    /// Whether the typed reader took `body`; fails when it took it but rmcp's reading (`rmcp_read`)
    /// gives another call or none.
    fn typed_reader_agrees(headers: &HeaderMap, body: &str, rmcp_read: Option<&DirectCall>) -> bool {
        let typed = read_call(&Uri::from_static("/mcp/p"), headers, body.as_bytes());
        if let Some(typed) = &typed {
            assert_eq!(Some(typed), rmcp_read, "the typed reader took {body} with {headers:?}");
        }
        typed.is_some()
    }

    fn header_map(headers: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name");
            map.append(name, HeaderValue::from_str(value).expect("value"));
        }
        map
    }

    /// 2026-07-28 requests: SEP-2243 headers and lifecycle `_meta` of every shape the direct path
    /// might take or must leave to rmcp, each answered by both paths.
    #[tokio::test]
    async fn per_request_calls_are_answered_exactly_as_rmcp_does() {
        let direct = router_served(Arc::new(Echo), McpHttpConfig::default(), true);
        let rmcp = router_served(Arc::new(Echo), McpHttpConfig::default(), false);
        let standard: [&[(&str, &str)]; 11] = [
            &[],
            &[("mcp-method", "tools/call"), ("mcp-name", "context_search")],
            &[("mcp-method", "tools/call")],
            &[("mcp-method", "tools/call"), ("mcp-name", "other_tool")],
            &[("mcp-method", "tools/list"), ("mcp-name", "context_search")],
            &[("mcp-method", "tools/call"), ("mcp-name", "=?base64?Y29udGV4dF9zZWFyY2g=?=")],
            &[("mcp-method", "tools/call"), ("mcp-method", "tools/call"), ("mcp-name", "context_search")],
            &[("mcp-method", "TOOLS/CALL"), ("mcp-name", "context_search")],
            &[("mcp-method", "tools/call"), ("mcp-name", "context_search"), ("mcp-session-id", "s-1")],
            &[("mcp-method", "tools/call"), ("mcp-name", "context_search"), ("mcp-param-query", "hello")],
            &[("mcp-method", "tools/call"), ("mcp-name", "context_search "), ("mcp-name", "context_search")],
        ];
        let capabilities = r#""io.modelcontextprotocol/clientCapabilities":{}"#;
        let version = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28""#;
        let info = r#""io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}"#;
        let metas = [
            format!("{{{version},{capabilities},{info}}}"),
            format!("{{{version},{capabilities}}}"),
            format!(
                r#"{{{version},"io.modelcontextprotocol/clientCapabilities":{{"sampling":{{}},"tasks":{{}}}},{info}}}"#
            ),
            format!(r#"{{{version},{capabilities},"io.modelcontextprotocol/clientInfo":{{"name":1}}}}"#),
            format!("{{{version}}}"),
            format!("{{{capabilities},{info}}}"),
            format!(r#"{{"io.modelcontextprotocol/protocolVersion":"2025-11-25",{capabilities}}}"#),
            format!(r#"{{"io.modelcontextprotocol/protocolVersion":"2099-01-01",{capabilities}}}"#),
            format!(r#"{{{version},{capabilities},"progressToken":1}}"#),
            format!(r#"{{{version},"io.modelcontextprotocol/clientCapabilities":"x"}}"#),
            format!(r#"{{{version},{capabilities},"io.modelcontextprotocol/logLevel":"debug"}}"#),
            "{}".to_string(),
        ];
        let arguments = [
            r#"{"query":"hello"}"#,
            r#"{"query":"fail"}"#,
            r#"{"query":"many"}"#,
            r#"{"query":"none"}"#,
            r#"{"query":""}"#,
            r#"{"query":"x","n":1}"#,
        ];
        let mut bodies = Vec::new();
        for meta in &metas {
            for arguments in arguments {
                bodies
                    .push(call("1", &format!(r#"{{"name":"context_search","arguments":{arguments},"_meta":{meta}}}"#)));
            }
            bodies.push(call(
                r#""b""#,
                &format!(r#"{{"name":"other_tool","arguments":{{"query":"hello"}},"_meta":{meta}}}"#),
            ));
            bodies.push(call("2", &format!(r#"{{"name":"context_search","_meta":{meta}}}"#)));
            bodies.push(format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{{"_meta":{meta}}}}}"#));
        }
        bodies.push(call("4", r#"{"name":"context_search","arguments":{"query":"hello"}}"#));
        let (mut compared, mut taken, mut typed) = (0, 0, 0);
        for protocol in ["2026-07-28", "2025-11-25"] {
            for extra in standard {
                let mut headers = vec![
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-protocol-version", protocol),
                ];
                headers.extend(extra.iter().copied());
                let map = header_map(&headers);
                for body in &bodies {
                    let rmcp_read = taken_call(&map, body);
                    taken += usize::from(rmcp_read.as_ref().is_some_and(|call| call.era == Era::PerRequest));
                    let read = typed_reader_agrees(&map, body, rmcp_read.as_ref());
                    typed += usize::from(read && rmcp_read.is_some_and(|call| call.era == Era::PerRequest));
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
        assert!(taken >= 15, "the corpus exercises the 2026-07-28 direct path: {taken} of {compared}");
        assert!(typed >= 15, "the corpus exercises the typed reader on 2026-07-28 calls: {typed} of {taken}");
    }

    /// An absolute-form target names the authority the gateway checks; rmcp checks `Host` first.
    #[tokio::test]
    async fn a_request_naming_its_authority_twice_is_answered_as_rmcp_does() {
        let direct = router_served(Arc::new(Echo), McpHttpConfig::default(), true);
        let rmcp = router_served(Arc::new(Echo), McpHttpConfig::default(), false);
        let headers = [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let body = call("1", r#"{"name":"context_search","arguments":{"query":"hello"}}"#);
        for target in ["/mcp/p", "http://localhost/mcp/p", "http://localhost:8080/mcp/p"] {
            for host in [None, Some("localhost"), Some("evil.example"), Some("127.0.0.1:9")] {
                let ours = send_to(&direct, target, host, &headers, &body).await;
                let theirs = send_to(&rmcp, target, host, &headers, &body).await;
                assert_eq!(
                    (ours.0, String::from_utf8_lossy(&ours.2)),
                    (theirs.0, String::from_utf8_lossy(&theirs.2)),
                    "{target} {host:?}"
                );
            }
        }
    }

    /// rmcp's handler refuses a request `_meta` version its server does not support: every version
    /// the direct path takes must stay supported.
    #[test]
    fn the_server_supports_every_version_the_direct_path_takes() {
        use rmcp::ServerHandler;
        let server = crate::mcp::ContextSearchServer::new(Arc::new(Echo));
        let supported = server.supported_protocol_versions();
        for version in ProtocolVersion::KNOWN_VERSIONS {
            let headers = header_map(&[
                ("mcp-protocol-version", version.as_str()),
                ("mcp-method", "tools/call"),
                ("mcp-name", "context_search"),
            ]);
            let headers_only_version = header_map(&[("mcp-protocol-version", version.as_str())]);
            if era(&headers).is_some() || era(&headers_only_version).is_some() {
                assert!(supported.contains(version), "{version:?} is taken but not supported");
            }
        }
    }

    #[test]
    fn what_sdk_clients_send_takes_the_direct_path() {
        let legacy = header_map(&[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ]);
        let body = call("2", r#"{"name":"context_search","arguments":{"query":"deploys"}}"#);
        let taken = taken_call(&legacy, &body).expect("taken");
        assert_eq!((&taken.id, taken.era), (&RequestId::Number(2), Era::Handshake));
        let uri = Uri::from_static("/mcp/p");
        assert_eq!(read_call(&uri, &legacy, body.as_bytes()), Some(taken), "read typed");

        // What the Python SDK 2.3.0 sends on a 2026-07-28 connection (`mcp/client/session.py`,
        // `_make_modern_stamp`): the version, method and name headers, and the three lifecycle keys.
        let modern = header_map(&[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "context_search"),
        ]);
        let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"mcp","version":"2.3.0"},"io.modelcontextprotocol/clientCapabilities":{}}"#;
        let body = call("3", &format!(r#"{{"name":"context_search","arguments":{{"query":"deploys"}},{meta}}}"#));
        let taken = taken_call(&modern, &body).expect("taken");
        assert_eq!(taken.era, Era::PerRequest);
        assert_eq!(read_call(&uri, &modern, body.as_bytes()), Some(taken), "read typed");
        let without_meta = call("3", r#"{"name":"context_search","arguments":{"query":"deploys"}}"#);
        assert_eq!(taken_call(&modern, &without_meta), None, "rmcp refuses a 2026-07-28 call without _meta");
        assert_eq!(read_call(&uri, &modern, without_meta.as_bytes()), None);
    }
}
