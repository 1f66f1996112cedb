//! The routes the data listener takes before the router (`server::data_routes`: Nexent search and
//! `POST /mcp/{provider}`) answer every request exactly as the router does: the same status,
//! headers in the same order, and body bytes, for answers and every refusal, with requests they
//! take and requests they hand back to the router. Real local upstreams answer the searches.

mod ingest_support;
mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use http::{Request, Response};
use http_body_util::BodyExt;
use memgate_crds::Scope;
use memgate_crds::validation::credential_value;
use memgate_gateway::auth::Authenticator;
use memgate_gateway::config::{ConfigHandle, Provider, Snapshot};
use memgate_gateway::engine::{Engine, EngineConfig};
use memgate_gateway::listener::{ClientAddr, DirectAnswer};
use memgate_gateway::mcp::McpHttpConfig;
use memgate_gateway::server;
use memgate_gateway::state::{AppState, Settings};
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};
use tower::ServiceExt;

const TOKEN: &str = "direct-route-token";

fn provider(name: &str, origin: &str, change: impl FnOnce(&mut Provider)) -> (String, Arc<Provider>) {
    let scope = Scope { user_id: Some("repository-memory".into()), agent_id: Some("qwen-code".into()), app_id: None };
    let target = ingest_support::target(origin, "", scope, CREDENTIAL, Duration::from_secs(5));
    let mut provider = ingest_support::provider(name, "mem0-oss-rest-2026-08", target);
    provider.access.anonymous = true;
    provider.mcp = true;
    change(&mut provider);
    (name.to_string(), Arc::new(provider))
}

/// A request as the listener hands it on: body read whole, the client's address in its extensions.
fn request(method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(target);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut request = request.body(Body::from(body.to_string())).expect("request");
    request.extensions_mut().insert(ClientAddr(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    request
}

/// Status, every header in order, and the body's bytes.
async fn parts(response: Response<Body>) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let (head, body) = response.into_parts();
    let headers = head
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect();
    let body = body.collect().await.expect("body").to_bytes().to_vec();
    (head.status.as_u16(), headers, body)
}

/// Method, target, headers, body, and whether the direct route takes it.
type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, &'a str, bool);

#[tokio::test]
async fn the_direct_routes_answer_byte_for_byte_as_the_router() {
    let results = Server::always(Reply::json(&json!({"results": [
        {"id": "m0", "memory": "memory \"0\"\n", "score": 0.9, "updated_at": "2026-08-02T00:00:00Z",
         "metadata": {"title": "T", "uri": "https://example.test/0"}},
        {"id": "m1", "memory": "memory 1"}
    ]})))
    .await;
    let busy = Server::always(Reply::Full {
        status: 429,
        headers: vec![("retry-after".into(), "7".into())],
        body: b"{}".to_vec(),
    })
    .await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("address"))
    };
    let providers = BTreeMap::from([
        provider("p", &results.origin(), |_| {}),
        provider("busy", &busy.origin(), |_| {}),
        provider("gone", &closed, |_| {}),
        provider("ingest-only", &results.origin(), |p| {
            p.nexent_search = false;
            p.mcp = false;
        }),
        provider("keyed", &results.origin(), |p| {
            p.access.anonymous = false;
            p.access.bearer_token = Some(credential_value("test", TOKEN.as_bytes()).expect("token"));
            p.access.bearer_token_secret = Some("caller-token".into());
        }),
    ]);
    let state = Arc::new(AppState::new(
        Arc::new(ConfigHandle::new(Snapshot { providers, disabled: Vec::new() })),
        Engine::new(EngineConfig::default()).expect("engine"),
        Authenticator::new(None),
        Settings::default(),
    ));
    let http = McpHttpConfig { allowed_hosts: Vec::new(), allowed_origins: vec!["https://app.example".into()] };
    let (router, direct) = server::data_routes(Arc::clone(&state), http.clone());

    let json = [("host", "localhost:8080"), ("content-type", "application/json")];
    let bearer = format!("Bearer {TOKEN}");
    let cases: Vec<Case<'_>> = vec![
        ("POST", "/nexent/v1/p/search", json.to_vec(), r#"{"query":"  where is  it ","limit":1}"#, true),
        ("POST", "/nexent/v1/p/search?x=1", json.to_vec(), r#"{"query":"q","top_k":3,"tenant_id":"t"}"#, true),
        ("POST", "/nexent/v1/p/search", json.to_vec(), r#"{"query":"   "}"#, true),
        ("POST", "/nexent/v1/p/search", json.to_vec(), r#"{"query":"q","limit":0}"#, true),
        ("POST", "/nexent/v1/p/search", json.to_vec(), "{not json", true),
        ("POST", "/nexent/v1/busy/search", json.to_vec(), r#"{"query":"q"}"#, true),
        ("POST", "/nexent/v1/gone/search", json.to_vec(), r#"{"query":"q"}"#, true),
        ("POST", "/nexent/v1/nobody/search", json.to_vec(), r#"{"query":"q"}"#, true),
        ("POST", "/nexent/v1/ingest-only/search", json.to_vec(), r#"{"query":"q"}"#, true),
        ("POST", "/nexent/v1/keyed/search", json.to_vec(), r#"{"query":"q"}"#, true),
        ("POST", "/nexent/v1/keyed/search", [&json[..], &[("authorization", "Bearer wrong")]].concat(), "{}", true),
        (
            "POST",
            "/nexent/v1/keyed/search",
            [&json[..], &[("authorization", bearer.as_str())]].concat(),
            r#"{"query":"q"}"#,
            true,
        ),
        (
            "POST",
            "/nexent/v1/p/search",
            vec![("host", "evil.example"), ("content-type", "application/json")],
            "{}",
            true,
        ),
        ("POST", "/nexent/v1/p/search", vec![("content-type", "application/json")], "{}", true),
        ("POST", "/nexent/v1/p/search", [&json[..], &[("origin", "https://evil.example")]].concat(), "{}", true),
        (
            "POST",
            "/nexent/v1/p/search",
            [&json[..], &[("origin", "https://app.example")]].concat(),
            r#"{"query":"q"}"#,
            true,
        ),
        ("POST", "/nexent/v1/p/search", vec![("host", "localhost"), ("content-type", "text/plain")], "{}", true),
        (
            "POST",
            "/nexent/v1/p/search",
            [&json[..], &[("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]].concat(),
            r#"{"query":"q"}"#,
            true,
        ),
        // Handed back: another method, a segment axum decodes, other paths.
        ("GET", "/nexent/v1/p/search", json.to_vec(), "", false),
        ("POST", "/nexent/v1/%70/search", json.to_vec(), r#"{"query":"q"}"#, false),
        ("POST", "/nexent/v1/p/search/", json.to_vec(), r#"{"query":"q"}"#, false),
        ("POST", "/nexent/v1//search", json.to_vec(), r#"{"query":"q"}"#, false),
        ("POST", "/nexent/v1/a/b/search", json.to_vec(), r#"{"query":"q"}"#, false),
        ("POST", "/nexent/v1/p/ingest", json.to_vec(), r#"{"idempotency_key":"k","units":[]}"#, false),
        ("GET", "/healthz", vec![("host", "localhost")], "", false),
    ];
    let mut cases = cases;
    let mcp_bodies = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"where is it"}}}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"context_search","arguments":{"query":"  "}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"other","arguments":{"query":"q"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"prompts/list"}"#,
        "{not json",
        r#"{"hello":"world"}"#,
    ];
    let mcp = [
        ("host", "localhost"),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    for body in mcp_bodies {
        for version in ["2025-06-18", "2025-11-25"] {
            let headers = [&mcp[..], &[("mcp-protocol-version", version)]].concat();
            for provider in ["/mcp/p", "/mcp/busy", "/mcp/gone", "/mcp/nobody", "/mcp/ingest-only", "/mcp/keyed"] {
                cases.push(("POST", provider, headers.clone(), body, true));
            }
            cases.push((
                "POST",
                "/mcp/keyed",
                [&headers[..], &[("authorization", bearer.as_str())]].concat(),
                body,
                true,
            ));
            cases.push(("POST", "/mcp/p", [&headers[..], &[("origin", "https://evil.example")]].concat(), body, true));
            cases.push((
                "POST",
                "/mcp/p",
                vec![("host", "evil.example"), ("content-type", "application/json")],
                body,
                true,
            ));
            cases.push(("POST", "/mcp/%70", headers.clone(), body, false));
        }
    }
    cases.push(("POST", "/mcp/p", vec![("host", "localhost"), ("content-type", "text/plain")], "{}", true));
    cases.push(("POST", "/mcp/p", mcp[..2].to_vec(), mcp_bodies[0], true));
    cases.push(("GET", "/mcp/p", mcp.to_vec(), "", false));
    cases.push(("DELETE", "/mcp/p", mcp.to_vec(), "", false));
    cases.push(("POST", "/mcp/", mcp.to_vec(), mcp_bodies[0], false));
    cases.push(("POST", "/mcp/p/x", mcp.to_vec(), mcp_bodies[0], false));
    let mut statuses = std::collections::BTreeSet::new();
    for (method, target, headers, body, taken) in cases {
        let routed =
            parts(router.clone().oneshot(request(method, target, &headers, body)).await.expect("routed")).await;
        let answered = match direct(request(method, target, &headers, body)) {
            DirectAnswer::Taken(answer) => {
                assert!(taken, "{method} {target} is the router's");
                answer.await
            }
            DirectAnswer::Declined(request) => {
                assert!(!taken, "{method} {target} {headers:?} was handed back");
                router.clone().oneshot(request).await.expect("routed")
            }
        };
        let answered = parts(answered).await;
        statuses.insert(answered.0);
        assert_eq!(
            answered,
            routed,
            "{method} {target} {headers:?}: {} / {}",
            String::from_utf8_lossy(&answered.2),
            String::from_utf8_lossy(&routed.2)
        );
    }
    assert!(results.requests().len() >= 20, "the searches reached the upstream");
    let expected = [200, 202, 400, 401, 403, 404, 405, 406, 415, 429, 502];
    assert!(expected.iter().all(|s| statuses.contains(s)), "answers compared: {statuses:?}");
}
