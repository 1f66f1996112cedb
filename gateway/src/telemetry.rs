//! Structured logs and the spans of the two surfaces.
//!
//! Owns the log set-up (JSON lines on stderr, level from `RUST_LOG`, default `info`, libraries
//! that would log request contents capped) and the span
//! names and attributes. Spans and events carry only the provider name, the operation, the outcome,
//! the error code and the result count: never the query, content, scope ids, subjects, endpoints
//! or credentials.
//!
//! - Nexent path: span `nexent.memory.external_provider` with `memory.operation`,
//!   `memory.provider.name`, `memory.outcome`, `memory.error.code`, `memory.result.count` (the names
//!   Nexent's own telemetry uses).
//!   An ingest adds `memory.unit.accepted_count` and `memory.unit.rejected_count`.
//! - MCP path: span `mcp.context_search` with the same attributes.

use tracing::field::Empty;
use tracing::{Level, Metadata, Span};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use crate::metrics::Operation;

/// Libraries capped at these levels whatever `RUST_LOG` says: below them they log request and
/// response contents (MCP arguments, HTTP bodies, the TokenReview body with its token).
const CAPS: [&str; 6] = ["rmcp=warn", "kube_client=info", "hyper=info", "hyper_util=info", "h2=info", "reqwest=info"];

/// Install the global JSON log subscriber writing to stderr. Safe to call once per process; a
/// second call leaves the first subscriber in place.
pub fn init() {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    for cap in CAPS {
        if let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let quiet = FilterFn::new(|meta| !is_rmcp_error_answer(meta));
    let layer = fmt::layer()
        .json()
        .with_writer(std::io::stderr)
        .with_current_span(true)
        .with_span_list(false)
        .with_filter(filter)
        .with_filter(quiet);
    let _ = tracing_subscriber::registry().with(layer).try_init();
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
    match operation {
        Operation::NexentSearch => tracing::info_span!(
            "nexent.memory.external_provider",
            memory.operation = "search",
            memory.provider.name = provider,
            memory.outcome = Empty,
            memory.error.code = Empty,
            memory.result.count = Empty,
        ),
        Operation::NexentIngest => tracing::info_span!(
            "nexent.memory.external_provider",
            memory.operation = "ingest",
            memory.provider.name = provider,
            memory.outcome = Empty,
            memory.error.code = Empty,
            memory.unit.accepted_count = Empty,
            memory.unit.rejected_count = Empty,
        ),
        Operation::McpContextSearch => tracing::info_span!(
            "mcp.context_search",
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
        span.record("memory.error.code", code);
    }
    if let Some(count) = result_count {
        span.record("memory.result.count", count);
    }
}
