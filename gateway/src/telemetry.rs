//! Structured logs and the spans of the two surfaces.
//!
//! Owns the log and trace set-up of the gateway (through [`memgate_telemetry`]: JSON lines on
//! stderr, level from `RUST_LOG`, default `info`, libraries that would log request contents capped;
//! OTLP trace export when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//! set), the caller's W3C `traceparent` ([`caller_trace`]), and the span names and attributes.
//! Spans carry only the provider name, the operation, the outcome, the error code and counts:
//! never the query, content, scope ids, subjects, endpoints or credentials. Only the two spans
//! below are exported; events and library spans stay in the local log.
//!
//! - Nexent path: span `nexent.memory.external_provider` with `memory.operation`,
//!   `memory.provider.name`, `memory.outcome`, `memory.error.code`, `memory.result.count` (the names
//!   Nexent's own telemetry uses).
//!   An ingest adds `memory.unit.accepted_count` and `memory.unit.rejected_count`.
//! - MCP path: span `mcp.context_search` with the same attributes.
//!
//! Nexent's backend opens its own span of the same name around the plugin call
//! (ModelEngine-Group/nexent `backend/services/memory_external_provider_service.py`); its
//! `memory.outcome` values are `success` / `error` / `degraded` with `memory.error.code` `none` when
//! nothing failed, while memgate's are its metrics' outcomes (`ok` / `error` / `cancelled`) and the
//! error code is absent on success.
//!
//! Both are server spans (`otel.kind`), children of the caller's span when the request carries a
//! valid `traceparent`, with status error (`otel.status_code`) when the call failed.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use memgate_telemetry::{CallerTrace, Options, Telemetry};
use tracing::field::Empty;
use tracing::{Level, Metadata, Span};

use crate::metrics::Operation;

/// Name of the Nexent path's span.
pub const NEXENT_SPAN: &str = "nexent.memory.external_provider";
/// Name of the MCP path's span.
pub const MCP_SPAN: &str = "mcp.context_search";

/// Libraries capped at these levels whatever `RUST_LOG` says: below them they log request and
/// response contents (MCP arguments, HTTP bodies, the TokenReview body with its token).
const CAPS: [&str; 6] = ["rmcp=warn", "kube_client=info", "hyper=info", "hyper_util=info", "h2=info", "reqwest=info"];

static OPTIONS: Options = Options {
    service_name: "memgate-gateway",
    log_caps: &CAPS,
    exported_spans: &[NEXENT_SPAN, MCP_SPAN],
    drop_log_event: is_rmcp_error_answer,
};

/// Install the global log subscriber (JSON on stderr) and, when the `OTEL_*` variables ask for it,
/// trace export. Call once per process; a second call leaves the first set-up in place. Call
/// [`Telemetry::shutdown`] on the result before exiting so buffered spans are sent.
pub fn init() -> Telemetry {
    memgate_telemetry::init(&OPTIONS)
}

/// Middleware: reads the caller's W3C trace context (only while traces are exported), keeps it in
/// the request extensions (for the MCP transport, which runs the tool call on a task of its own:
/// `tokio::spawn` in rmcp 3.11 `transport/streamable_http_server/tower.rs`, so the context of this
/// task does not reach it; the request's `http::request::Parts` do) and
/// runs the rest of the request in it, so the call's span is a child of the caller's span.
pub async fn caller_trace(request: Request, next: Next) -> Response {
    in_caller_trace(request, |request| next.run(request)).await
}

/// [`caller_trace`] around `run`, for a route served without the router.
pub async fn in_caller_trace<F, Fut>(mut request: Request, run: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    match CallerTrace::from_headers(request.headers()) {
        Some(trace) => {
            request.extensions_mut().insert(trace.clone());
            trace.attach(run(request)).await
        }
        None => run(request).await,
    }
}

/// rmcp's WARN line for every JSON-RPC error answer (`response error`, fields `id` and `error`;
/// rmcp 3.11 `service.rs`). The only errors this gateway's handler answers are the client's: a
/// method it does not offer (`prompts/list`, `resources/list`, which clients call on every
/// connection although only `tools` is declared) or an unknown tool name. The handler logs those
/// at debug ([`crate::mcp`]), so this copy is dropped.
pub fn is_rmcp_error_answer(meta: &Metadata<'_>) -> bool {
    meta.target() == "rmcp::service"
        && *meta.level() == Level::WARN
        && meta.fields().field("id").is_some()
        && meta.fields().field("error").is_some()
}

/// The span of one provider call on `operation`'s surface; outcome fields are recorded by
/// [`finish_span`].
pub fn provider_span(operation: Operation, provider: &str) -> Span {
    if !memgate_telemetry::exporting() {
        // Nothing would receive it: the log layer does not need the span (the debug-level call
        // line carries the same fields), and creating one costs a few microseconds per call.
        return Span::none();
    }
    match operation {
        Operation::NexentSearch => tracing::info_span!(
            NEXENT_SPAN,
            otel.kind = "server",
            otel.status_code = Empty,
            memory.operation = "search",
            memory.provider.name = provider,
            memory.outcome = Empty,
            memory.error.code = Empty,
            memory.result.count = Empty,
        ),
        Operation::NexentIngest => tracing::info_span!(
            NEXENT_SPAN,
            otel.kind = "server",
            otel.status_code = Empty,
            memory.operation = "ingest",
            memory.provider.name = provider,
            memory.outcome = Empty,
            memory.error.code = Empty,
            memory.unit.accepted_count = Empty,
            memory.unit.rejected_count = Empty,
        ),
        Operation::McpContextSearch => tracing::info_span!(
            MCP_SPAN,
            otel.kind = "server",
            otel.status_code = Empty,
            memory.operation = "context_search",
            memory.provider.name = provider,
            memory.outcome = Empty,
            memory.error.code = Empty,
            memory.result.count = Empty,
        ),
    }
}

/// Record how the call of `span` ended.
pub fn finish_span(span: &Span, outcome: &str, error_code: Option<&str>, result_count: Option<usize>) {
    span.record("memory.outcome", outcome);
    if let Some(code) = error_code {
        span.record("otel.status_code", "error");
        span.record("memory.error.code", code);
    }
    if let Some(count) = result_count {
        span.record("memory.result.count", as_i64(count));
    }
}

/// Record an ingest's unit counts on its span.
pub fn record_unit_counts(span: &Span, accepted: usize, rejected: usize) {
    span.record("memory.unit.accepted_count", as_i64(accepted));
    span.record("memory.unit.rejected_count", as_i64(rejected));
}

/// Counts as `i64`: OpenTelemetry has no unsigned integers, and tracing-opentelemetry 0.34's span
/// visitor has no `record_u64`, so an unsigned field would be exported as a string.
fn as_i64(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
