//! OpenTelemetry export of the real gateway binary to a real trace backend.
//!
//! The backend is Jaeger (v2, the OpenTelemetry-Collector based `jaeger` binary of
//! jaegertracing/jaeger v1.75.0, `cmd/jaeger`), built once from Go modules by
//! `e2e/trace-backend/provide.sh` and found here in its cache (or through `MEMGATE_JAEGER`); this
//! test never builds it and fails, naming the script, when it is missing. Jaeger runs with its
//! in-memory store and only the OTLP/HTTP receiver and the query service, every listener on a free
//! loopback port (its defaults, in `cmd/jaeger/internal/all-in-one.yaml`, listen on 4317/4318,
//! 16685/16686 and more; its query server defaults to all interfaces, so each is set here).
//!
//! The gateway exports with `OTEL_BSP_SCHEDULE_DELAY` set far beyond the test, so the spans reach
//! Jaeger only through the flush at shutdown (SIGTERM). Callers are the real Nexent HTTP surface
//! and the official MCP SDK (rmcp's client), each sending a W3C `traceparent`.

mod serve_support;
mod support;
#[path = "../../e2e/trace-backend/harness.rs"]
mod trace_backend;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, JsonObject, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use serve_support::{CALLER_TOKEN, Gateway, PATIENCE, UPSTREAM_KEY, secret_yaml};
use support::{Recorded, Reply, Server};
use trace_backend::{Jaeger, free_port};

// Unique markers planted in every place a caller or the config puts private data.
const QUERY: &str = "QUERYMARKER-8c41f2";
const CONTENT: &str = "CONTENTMARKER-37a9d0";
const UPSTREAM_ID: &str = "ITEMIDMARKER-b21e77";
const SCOPE_USER: &str = "SCOPEUSERMARKER-5d0c13";
const CALLER_IDS: [&str; 4] =
    ["TENANTMARKER-90fa1b", "USERIDMARKER-e6c3a8", "EVENTIDMARKER-1f7b42", "IDEMPOTENCYMARKER-6a2e95"];

/// The attribute keys a gateway span may carry: its declared fields, and what the SDK and Jaeger
/// add (`span.kind`; `otel.status_code` and `error` for failures; the instrumentation scope).
const ALLOWED_TAGS: [&str; 11] = [
    "memory.operation",
    "memory.provider.name",
    "memory.outcome",
    "memory.error.code",
    "memory.result.count",
    "memory.unit.accepted_count",
    "memory.unit.rejected_count",
    "span.kind",
    "otel.status_code",
    "error",
    "otel.scope.name",
];

/// A caller's trace: random ids, `traceparent` with the sampled flag.
struct CallerTrace {
    trace_id: String,
    span_id: String,
}

impl CallerTrace {
    fn new(seed: u64) -> CallerTrace {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mixed = (nanos as u64) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        CallerTrace {
            trace_id: format!("{mixed:016x}{:016x}", seed | 1 << 60),
            span_id: format!("{:016x}", mixed.rotate_left(17) | 1),
        }
    }

    fn header(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }
}

/// mem0 OSS upstream: search answers one item carrying the markers, an add is accepted.
fn upstream_reply(request: &Recorded) -> Reply {
    if request.path.ends_with("/search") {
        Reply::json(&json!({"results": [{"id": UPSTREAM_ID, "memory": CONTENT, "score": 0.9}]}))
    } else {
        Reply::json(&json!({"results": [{"id": UPSTREAM_ID, "memory": CONTENT, "event": "ADD"}]}))
    }
}

fn provider(name: &str, origin: &str) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", allowInsecureHttp: true}}\n  \
         credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{userId: {SCOPE_USER}, agentId: qwen-code}}\n  \
         timeoutMs: 5000\n  mcp: {{enabled: true}}\n  nexent: {{search: true, ingest: true}}\n  \
         access: {{bearerToken: {{secretRef: {{name: callers, key: token}}}}}}\n"
    )
}

async fn mcp_call(gateway: &Gateway, provider: &str, trace: &CallerTrace, lifecycle: ClientLifecycleMode) -> Value {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let headers = HashMap::from([(
        http::HeaderName::from_static("traceparent"),
        http::HeaderValue::from_str(&trace.header()).expect("ascii"),
    )]);
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp/{provider}", gateway.base))
        .auth_header(CALLER_TOKEN)
        .custom_headers(headers);
    let client =
        ().serve_with_lifecycle(StreamableHttpClientTransport::from_config(config), lifecycle)
            .await
            .expect("the MCP client connects");
    let Value::Object(arguments) = json!({"query": QUERY}) else { unreachable!() };
    let params = CallToolRequestParams::new("context_search").with_arguments(arguments as JsonObject);
    let result = client.call_tool(params).await.expect("a tool result");
    let _ = client.cancel().await;
    serde_json::to_value(result).expect("serialisable")
}

/// The one span of `trace`, checked to be a server span named `name`, child of the caller's span.
fn only_span<'a>(trace: &'a Value, caller: &CallerTrace, name: &str) -> &'a Value {
    let spans = trace["data"][0]["spans"].as_array().expect("spans");
    assert_eq!(spans.len(), 1, "one gateway span per call: {trace}");
    let span = &spans[0];
    assert_eq!(span["operationName"], name, "{span}");
    assert_eq!(span["traceID"], caller.trace_id.as_str(), "{span}");
    let references = span["references"].as_array().expect("references");
    assert!(
        references.iter().any(|r| r["refType"] == "CHILD_OF"
            && r["traceID"] == caller.trace_id.as_str()
            && r["spanID"] == caller.span_id.as_str()),
        "the span's parent is the caller's span: {span}"
    );
    span
}

fn tags(span: &Value) -> BTreeSet<(String, String)> {
    span["tags"]
        .as_array()
        .expect("tags")
        .iter()
        .map(|t| (t["key"].as_str().expect("key").to_string(), t["value"].to_string().trim_matches('"').to_string()))
        .collect()
}

fn tag(span: &Value, key: &str) -> Option<String> {
    tags(span).into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

#[tokio::test]
async fn spans_reach_jaeger_as_children_of_the_callers_trace_without_private_data() {
    let work = tempfile::tempdir().expect("tempdir");
    let jaeger = Jaeger::start(work.path()).await;
    let upstream = Server::start(upstream_reply).await;
    let failing = Server::always(Reply::status_json(500, &json!({"detail": CONTENT}))).await;

    let config = tempfile::tempdir().expect("tempdir");
    let text = [
        secret_yaml("upstream", "api-key", UPSTREAM_KEY),
        secret_yaml("callers", "token", CALLER_TOKEN),
        provider("repo-memory", &upstream.origin()),
        provider("broken-memory", &failing.origin()),
    ]
    .join("---\n");
    std::fs::write(config.path().join("gateway.yaml"), text).expect("write config");
    let endpoint = format!("http://127.0.0.1:{}", jaeger.otlp_http);
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        // Far beyond the test: spans reach Jaeger only through the flush at shutdown.
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
        ("OTEL_SERVICE_NAME", ""),
        ("OTEL_RESOURCE_ATTRIBUTES", ""),
    ];
    let mut gateway = Gateway::start(config.path(), work.path(), &[], &env).await;

    let traces: Vec<CallerTrace> = (1..=5).map(CallerTrace::new).collect();
    let [search, ingest, mcp_modern, mcp_legacy, failed] = &traces[..] else { unreachable!() };
    let [tenant, user, event, idempotency] = CALLER_IDS;

    let answer = gateway
        .post_with(
            "/nexent/v1/repo-memory/search",
            &json!({"query": QUERY, "tenant_id": tenant, "user_id": user, "limit": 3}),
            Some(CALLER_TOKEN),
            &[("traceparent", &search.header())],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(answer.text.contains(CONTENT), "the search found the upstream item: {}", answer.text);

    let body = json!({
        "tenant_id": tenant, "user_id": user, "idempotency_key": idempotency, "metadata": {},
        "units": [{"event_id": event, "event_type": "message", "unit_type": "fact", "unit_content": CONTENT,
                   "unit_index": 0, "metadata": {}}],
    });
    let answer = gateway
        .post_with("/nexent/v1/repo-memory/ingest", &body, Some(CALLER_TOKEN), &[("traceparent", &ingest.header())])
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json()["accepted_count"], 1, "{}", answer.text);

    let discover = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    for (trace, lifecycle) in [(mcp_modern, discover), (mcp_legacy, ClientLifecycleMode::Initialize)] {
        let result = mcp_call(&gateway, "repo-memory", trace, lifecycle).await;
        assert_eq!(result["isError"], false, "{result}");
        assert!(result.to_string().contains(CONTENT), "{result}");
    }

    let answer = gateway
        .post_with(
            "/nexent/v1/broken-memory/search",
            &json!({"query": QUERY}),
            Some(CALLER_TOKEN),
            &[("traceparent", &failed.header())],
        )
        .await;
    assert_eq!(answer.status, 502, "{}", answer.text);

    let pid = gateway.pid().expect("running").to_string();
    let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(sent.success());
    assert!(gateway.wait().await.success(), "graceful exit: {}", gateway.logs());
    assert!(gateway.logs().contains("trace export on"), "{}", gateway.logs());
    assert!(!gateway.logs().contains("trace export failing"), "{}", gateway.logs());

    let cases = [
        (search, "nexent.memory.external_provider", "search", "ok"),
        (ingest, "nexent.memory.external_provider", "ingest", "ok"),
        (mcp_modern, "mcp.context_search", "context_search", "ok"),
        (mcp_legacy, "mcp.context_search", "context_search", "ok"),
        (failed, "nexent.memory.external_provider", "search", "error"),
    ];
    let mut everything = String::new();
    for (caller, name, operation, outcome) in cases {
        let trace = jaeger.trace(&caller.trace_id, 1).await;
        let span = only_span(&trace, caller, name);
        assert_eq!(tag(span, "memory.operation").as_deref(), Some(operation), "{span}");
        assert_eq!(tag(span, "memory.outcome").as_deref(), Some(outcome), "{span}");
        assert_eq!(tag(span, "span.kind").as_deref(), Some("server"), "{span}");
        let provider = if outcome == "ok" { "repo-memory" } else { "broken-memory" };
        assert_eq!(tag(span, "memory.provider.name").as_deref(), Some(provider), "{span}");
        if outcome == "ok" {
            let count = if operation == "ingest" { "memory.unit.accepted_count" } else { "memory.result.count" };
            assert_eq!(tag(span, count).as_deref(), Some("1"), "{span}");
            let typed = span["tags"].as_array().expect("tags").iter().find(|t| t["key"] == count).expect("count");
            assert_eq!(typed["type"], "int64", "counts are integers: {span}");
            assert_eq!(tag(span, "memory.error.code"), None, "{span}");
        } else {
            assert_eq!(tag(span, "memory.error.code").as_deref(), Some("provider_error"), "{span}");
            assert_eq!(tag(span, "error").as_deref(), Some("true"), "{span}");
        }
        for (key, _) in tags(span) {
            assert!(ALLOWED_TAGS.contains(&key.as_str()), "unexpected attribute {key}: {span}");
        }
        let processes = trace["data"][0]["processes"].as_object().expect("processes");
        for process in processes.values() {
            assert_eq!(process["serviceName"], "memgate-gateway", "{process}");
        }
        everything.push_str(&trace.to_string());
    }
    everything.push_str(&jaeger.get("/api/services").await.to_string());
    let origin = upstream.origin();
    let secrets = [QUERY, CONTENT, UPSTREAM_ID, SCOPE_USER, UPSTREAM_KEY, CALLER_TOKEN, origin.as_str()];
    for secret in secrets.iter().copied().chain(CALLER_IDS) {
        assert!(!everything.contains(secret), "{secret} reached the trace backend: {everything}");
    }
}

#[tokio::test]
async fn an_unreachable_trace_endpoint_fails_no_call_and_is_logged_once() {
    let work = tempfile::tempdir().expect("tempdir");
    let upstream = Server::start(upstream_reply).await;
    let config = tempfile::tempdir().expect("tempdir");
    let text = [
        secret_yaml("upstream", "api-key", UPSTREAM_KEY),
        secret_yaml("callers", "token", CALLER_TOKEN),
        provider("repo-memory", &upstream.origin()),
    ]
    .join("---\n");
    std::fs::write(config.path().join("gateway.yaml"), text).expect("write config");
    // Nothing listens there: every export fails fast (connection refused).
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "20"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000"),
    ];
    let mut gateway = Gateway::start(config.path(), work.path(), &[], &env).await;
    for n in 0..30 {
        let trace = CallerTrace::new(100 + n);
        let answer = gateway
            .post_with(
                "/nexent/v1/repo-memory/search",
                &json!({"query": QUERY}),
                Some(CALLER_TOKEN),
                &[("traceparent", &trace.header())],
            )
            .await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !gateway.logs().contains("trace export failing") {
        assert!(tokio::time::Instant::now() < deadline, "export failure never reported: {}", gateway.logs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid = gateway.pid().expect("running").to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    assert!(gateway.wait().await.success(), "graceful exit: {}", gateway.logs());
    let logs = gateway.logs();
    assert_eq!(logs.matches("trace export failing").count(), 1, "one line per outage: {logs}");
    assert!(!logs.contains(&endpoint), "the endpoint is not logged: {logs}");
}

#[tokio::test]
async fn without_an_endpoint_or_with_the_sdk_disabled_nothing_is_exported() {
    let work = tempfile::tempdir().expect("tempdir");
    let upstream = Server::start(upstream_reply).await;
    // Stands where a collector would: any export attempt shows up as a connection.
    let collector = Server::always(Reply::json(&json!({}))).await;
    let config = tempfile::tempdir().expect("tempdir");
    let text = [
        secret_yaml("upstream", "api-key", UPSTREAM_KEY),
        secret_yaml("callers", "token", CALLER_TOKEN),
        provider("repo-memory", &upstream.origin()),
    ]
    .join("---\n");
    std::fs::write(config.path().join("gateway.yaml"), text).expect("write config");
    let endpoint = collector.origin();
    let unset = [("OTEL_EXPORTER_OTLP_ENDPOINT", ""), ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")];
    let disabled = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SDK_DISABLED", "true"),
        ("OTEL_BSP_SCHEDULE_DELAY", "20"),
    ];
    for env in [&unset[..], &disabled[..]] {
        let mut gateway = Gateway::start(config.path(), work.path(), &[], env).await;
        let answer = gateway
            .post_with(
                "/nexent/v1/repo-memory/search",
                &json!({"query": QUERY}),
                Some(CALLER_TOKEN),
                &[("traceparent", &CallerTrace::new(7).header())],
            )
            .await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        let pid = gateway.pid().expect("running").to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
        assert!(gateway.wait().await.success());
        let logs = gateway.logs();
        assert!(!logs.contains("trace export"), "{logs}");
    }
    assert_eq!(collector.connections(), 0, "nothing may be sent while export is off");
}
