//! The caller's trace: W3C Trace Context (`traceparent`, `tracestate`) read from request headers,
//! and carried into the futures that create spans so those spans become its children.
//!
//! Owns header extraction and attaching the context to a future. Never reads other headers (no
//! baggage: it could carry user ids), and does nothing while export is off, so a process without
//! OTLP configuration pays one atomic load per request.

use std::future::Future;

use opentelemetry::Context;
use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// A caller's valid remote trace context, kept in request extensions between the HTTP layer and
/// the code that opens the call's span.
#[derive(Clone, Debug)]
pub struct CallerTrace(Context);

impl CallerTrace {
    /// The caller's trace from `traceparent` (and `tracestate`), or `None` when export is off or
    /// the header is absent or invalid (the span then starts a new trace).
    pub fn from_headers(headers: &http::HeaderMap) -> Option<CallerTrace> {
        if !crate::exporting() {
            return None;
        }
        Self::extract(headers)
    }

    /// The caller's trace whatever the export state (what [`CallerTrace::from_headers`] uses).
    pub fn extract(headers: &http::HeaderMap) -> Option<CallerTrace> {
        let context = TraceContextPropagator::new().extract(&Headers(headers));
        context.span().span_context().is_valid().then_some(CallerTrace(context))
    }

    /// The caller's trace id as 32 lower-case hex digits.
    pub fn trace_id(&self) -> String {
        self.0.span().span_context().trace_id().to_string()
    }

    /// The caller's span id (the parent of the spans opened under it) as 16 lower-case hex digits.
    pub fn parent_span_id(&self) -> String {
        self.0.span().span_context().span_id().to_string()
    }

    /// Run `future` with the caller's trace as the current context: spans it opens are children of
    /// the caller's span.
    pub fn attach<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        future.with_context(self.0)
    }
}

/// `future` carrying the current trace context, for handing work to `tokio::spawn` without losing
/// the caller's trace.
pub fn in_current_trace<F: Future>(future: F) -> impl Future<Output = F::Output> {
    future.with_current_context()
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The W3C trace id of `span` as 32 lower-case hex digits, when trace export is on and the span
/// belongs to a valid trace (`None` otherwise).
pub fn trace_id_of(span: &tracing::Span) -> Option<String> {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    if !crate::exporting() {
        return None;
    }
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context.is_valid().then(|| span_context.trace_id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, http::HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_valid_traceparent_gives_the_callers_trace_and_span() {
        let trace = CallerTrace::extract(&headers(&[(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )]))
        .expect("valid");
        assert_eq!(trace.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.parent_span_id(), "00f067aa0ba902b7");
    }

    #[test]
    fn absent_or_invalid_traceparents_give_none() {
        assert!(CallerTrace::extract(&headers(&[])).is_none());
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "not a traceparent",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let mut map = http::HeaderMap::new();
            map.insert("traceparent", http::HeaderValue::from_str(bad).expect("ascii"));
            assert!(CallerTrace::extract(&map).is_none(), "{bad}");
        }
    }

    #[test]
    fn nothing_is_read_while_export_is_off() {
        let valid = headers(&[("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]);
        assert!(!crate::exporting());
        assert!(CallerTrace::from_headers(&valid).is_none());
    }
}
