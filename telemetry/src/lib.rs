//! memgate's process telemetry, shared by the gateway and the operator: one call sets up JSON logs
//! on stderr and, when the standard `OTEL_*` variables ask for it, OTLP/HTTP trace export.
//!
//! Owns: the global `tracing` subscriber, the OpenTelemetry tracer provider and its shutdown
//! flush, and reading the caller's W3C trace context (`traceparent`, `tracestate`) from request
//! headers. Never does: decide span names or attributes (each binary declares its own spans and
//! lists which of them are exported), log or export event fields (only the listed spans reach the
//! exporter, with the fields they declare), or fail a call because export fails.
//!
//! ```no_run
//! static OPTIONS: memgate_telemetry::Options = memgate_telemetry::Options {
//!     service_name: "memgate-operator",
//!     log_caps: &["kube_client=info"],
//!     exported_spans: &["reconcile"],
//!     drop_log_event: memgate_telemetry::keep_every_event,
//! };
//! let telemetry = memgate_telemetry::init(&OPTIONS);
//! // ... run ...
//! telemetry.shutdown();
//! ```
//!
//! Export is on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set
//! ([`settings`]); `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP_HEADERS`,
//! `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_TRACES_SAMPLER` and `OTEL_BSP_*` work as the OpenTelemetry
//! SDK documents them. Spans are batched on a background thread and posted as OTLP protobuf over
//! HTTP; a full queue drops spans, a failed export drops its batch and is logged once per outage
//! ([`quiet`]).

pub mod propagation;
pub mod quiet;
pub mod settings;

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Metadata;
use tracing_subscriber::filter::{FilterExt, FilterFn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, fmt};

pub use propagation::{CallerTrace, in_current_trace, trace_id_of};

/// What one binary wants from [`init`].
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names one.
    pub service_name: &'static str,
    /// `target=level` directives added to the log filter whatever `RUST_LOG` says (libraries that
    /// would log request contents below those levels).
    pub log_caps: &'static [&'static str],
    /// Names of the spans that are exported; every other span and every event stays local.
    pub exported_spans: &'static [&'static str],
    /// Log events dropped from the JSON log (e.g. a library's noisy copy of an answer).
    pub drop_log_event: fn(&Metadata<'_>) -> bool,
}

/// For [`Options::drop_log_event`]: drop nothing.
pub fn keep_every_event(_meta: &Metadata<'_>) -> bool {
    false
}

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// True once [`init`] has set up trace export in this process.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The process's telemetry; call [`Telemetry::shutdown`] before exiting so buffered spans are sent.
#[derive(Debug)]
#[must_use = "call shutdown() before the process exits, or buffered spans are lost"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// True when spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Send the spans still buffered and stop exporting. Blocks for at most the export timeout
    /// (`OTEL_EXPORTER_OTLP_TIMEOUT`, default 10 s); from async code run it on a blocking thread.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            EXPORTING.store(false, Ordering::Relaxed);
            if provider.shutdown().is_err() {
                tracing::warn!("trace export: the last spans could not be sent at shutdown");
            }
        }
    }
}

/// Install the global subscriber: JSON log lines on stderr (level from `RUST_LOG`, default
/// `info`, capped by [`Options::log_caps`]) and, when the environment asks for it, OTLP export of
/// [`Options::exported_spans`]. A second call in one process leaves the first subscriber in place
/// and exports nothing.
pub fn init(options: &Options) -> Telemetry {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    for cap in options.log_caps {
        if let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let drop_log_event = options.drop_log_event;
    let log_layer = fmt::layer()
        .json()
        .with_writer(std::io::stderr)
        .with_current_span(true)
        .with_span_list(false)
        // One filter: nested ones (`.with_filter(a).with_filter(b)`) would lose the inner
        // filter's refusal of a span, so a capped library's spans would still be created.
        .with_filter(filter.and(FilterFn::new(move |meta| !drop_log_event(meta))));

    let decision = settings::from_lookup(|name| std::env::var(name).ok());
    let (provider, problem) = match &decision {
        Ok(Some(export)) => match build_provider(export, options.service_name) {
            Ok(provider) => (Some(provider), None),
            Err(kind) => (None, Some(kind.to_string())),
        },
        Ok(None) => (None, None),
        Err(err) => (None, Some(err.to_string())),
    };
    let exported = options.exported_spans;
    let trace_layer = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("memgate"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(FilterFn::new(move |meta| meta.is_span() && exported.contains(&meta.name())))
    });
    // Without export the registry gets the log layer alone: an absent (`None`) layer counts as
    // interested in every callsite, so every span the log filter refuses would still be created.
    let registry = tracing_subscriber::registry().with(log_layer);
    let installed = match trace_layer {
        Some(trace_layer) => registry.with(trace_layer).try_init().is_ok(),
        None => registry.try_init().is_ok(),
    };
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    let provider = match provider {
        Some(provider) if installed => provider,
        Some(provider) => {
            let _ = provider.shutdown();
            return Telemetry { provider: None };
        }
        None => return Telemetry { provider: None },
    };
    EXPORTING.store(true, Ordering::Relaxed);
    tracing::info!(spans = ?exported, "trace export on (OTLP over HTTP)");
    Telemetry { provider: Some(provider) }
}

/// Why the exporter could not be built (the category only: the builder's own messages quote the
/// endpoint).
#[derive(Debug, thiserror::Error)]
enum BuildError {
    #[error(
        "trace export: the OTLP exporter could not be set up from the OTEL_EXPORTER_OTLP_* settings; traces are not exported"
    )]
    Exporter,
}

fn build_provider(export: &settings::ExportSettings, service_name: &str) -> Result<SdkTracerProvider, BuildError> {
    // The workspace's TLS is rustls on ring (as kube and the engine use); reqwest needs it installed.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(export.traces_endpoint.clone())
        .build()
        .map_err(|_| BuildError::Exporter)?;
    Ok(SdkTracerProvider::builder()
        .with_resource(resource(service_name))
        .with_batch_exporter(quiet::QuietExporter::new(exporter))
        .build())
}

/// The SDK's resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, SDK name and version), with
/// `service_name` when the environment names no service.
fn resource(service_name: &str) -> Resource {
    let detected = Resource::builder().build();
    let named = detected
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    if named { detected } else { Resource::builder().with_service_name(service_name.to_string()).build() }
}
