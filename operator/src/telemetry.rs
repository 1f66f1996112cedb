//! Logs and traces of the operator, through [`memgate_telemetry`]: JSON lines on stderr (level from
//! `RUST_LOG`, default `info`) and, when the standard `OTEL_*` variables ask for it, OTLP/HTTP export
//! of one span per reconcile ([`RECONCILE_SPAN`]).
//!
//! Libraries that log request or response bodies below `info` (kube's client, which would show a
//! Secret it reads; hyper; h2) are capped whatever `RUST_LOG` says, so no log level can print a
//! Secret value. The reconcile span carries only the kind of key, the namespace or preset name it
//! reconciles, the outcome and the failing stage: never spec contents, Secret names or values.

use memgate_telemetry::{Options, Telemetry};
use tracing::Span;
use tracing::field::Empty;

/// Name of the span around one reconcile of a key.
pub const RECONCILE_SPAN: &str = "reconcile";

/// Libraries capped at these levels.
const CAPS: [&str; 6] =
    ["kube_client=info", "kube_runtime=info", "hyper=info", "hyper_util=info", "h2=info", "reqwest=info"];

static OPTIONS: Options = Options {
    service_name: "memgate-operator",
    log_caps: &CAPS,
    exported_spans: &[RECONCILE_SPAN],
    drop_log_event: memgate_telemetry::keep_every_event,
};

/// Install the global JSON log subscriber and, when configured, trace export; a second call leaves
/// the first in place. Call [`Telemetry::shutdown`] on the result before exiting.
pub fn init() -> Telemetry {
    memgate_telemetry::init(&OPTIONS)
}

/// The span of one reconcile: `memgate.reconcile.kind` (`namespace` / `preset`) and
/// `memgate.reconcile.key` (the namespace or DialectPreset name) now, the outcome by [`finish`].
pub fn reconcile_span(kind: &'static str, key: &str) -> Span {
    tracing::info_span!(
        "reconcile",
        otel.kind = "internal",
        memgate.reconcile.kind = kind,
        memgate.reconcile.key = key,
        memgate.reconcile.outcome = Empty,
        memgate.reconcile.stage = Empty,
        otel.status_code = Empty,
    )
}

/// Record how a reconcile ended: `ok`, or `error` with the stage that failed (`secrets`,
/// `render`, `apply`, `delete`, `status`, `timeout`).
pub fn finish(span: &Span, failed_stage: Option<&'static str>) {
    match failed_stage {
        None => {
            span.record("memgate.reconcile.outcome", "ok");
        }
        Some(stage) => {
            span.record("memgate.reconcile.outcome", "error");
            span.record("memgate.reconcile.stage", stage);
            span.record("otel.status_code", "ERROR");
        }
    }
}
