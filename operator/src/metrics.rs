//! Prometheus metrics of the operator, exposed as OpenMetrics text on `/metrics`.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `memgate_operator_reconciles_total` | counter | `kind` (`namespace`, `preset`), `outcome` (`ok`, `error`) |
//! | `memgate_operator_reconcile_errors_total` | counter | `kind`, `reason` (`secrets`, `render`, `apply`, `delete`, `status`, `timeout`) |
//! | `memgate_operator_reconcile_duration_seconds` | histogram | `kind` |
//! | `memgate_operator_writes_total` | counter | `resource` (the written kind), `operation` (`apply`, `delete`, `status`) |
//! | `memgate_operator_watch_errors_total` | counter | `resource` |
//! | `memgate_operator_events_total` | counter | `outcome` (`published`, `failed`) |
//! | `memgate_operator_queue_depth` | gauge | - |
//! | `memgate_operator_leader` | gauge | - (1 while this process reconciles) |
//!
//! Labels are fixed vocabularies: never an object name, a namespace or anything read from a Secret.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// `Content-Type` of the exposition.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const DURATION_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindOutcome {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindReason {
    kind: &'static str,
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Write {
    resource: &'static str,
    operation: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Resource {
    resource: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

/// The operator's metric families.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindOutcome, Counter>,
    errors: Family<KindReason, Counter>,
    duration: Family<Kind, Histogram, fn() -> Histogram>,
    writes: Family<Write, Counter>,
    watch_errors: Family<Resource, Counter>,
    events: Family<Outcome, Counter>,
    queue_depth: Gauge,
    leader: Gauge,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Register every family.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let reconciles = Family::<KindOutcome, Counter>::default();
        registry.register("memgate_operator_reconciles", "Reconciles, by key kind and outcome", reconciles.clone());
        let errors = Family::<KindReason, Counter>::default();
        registry.register(
            "memgate_operator_reconcile_errors",
            "Failed reconciles, by the stage that failed",
            errors.clone(),
        );
        let duration: Family<Kind, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        registry.register_with_unit(
            "memgate_operator_reconcile_duration",
            "Time one reconcile took",
            Unit::Seconds,
            duration.clone(),
        );
        let writes = Family::<Write, Counter>::default();
        registry.register(
            "memgate_operator_writes",
            "Writes to the API server, by resource and operation",
            writes.clone(),
        );
        let watch_errors = Family::<Resource, Counter>::default();
        registry.register(
            "memgate_operator_watch_errors",
            "Failed list or watch calls, by resource",
            watch_errors.clone(),
        );
        let events = Family::<Outcome, Counter>::default();
        registry.register("memgate_operator_events", "Kubernetes Events published", events.clone());
        let queue_depth = Gauge::default();
        registry.register("memgate_operator_queue_depth", "Keys waiting to be reconciled", queue_depth.clone());
        let leader = Gauge::default();
        registry.register(
            "memgate_operator_leader",
            "1 while this process holds the Lease and reconciles",
            leader.clone(),
        );
        Metrics { registry, reconciles, errors, duration, writes, watch_errors, events, queue_depth, leader }
    }

    /// One reconcile of a `kind` key finished; `error` is the failing stage.
    pub fn reconciled(&self, kind: &'static str, error: Option<&'static str>, elapsed: Duration) {
        let outcome = if error.is_some() { "error" } else { "ok" };
        self.reconciles.get_or_create(&KindOutcome { kind, outcome }).inc();
        if let Some(reason) = error {
            self.errors.get_or_create(&KindReason { kind, reason }).inc();
        }
        self.duration.get_or_create(&Kind { kind }).observe(elapsed.as_secs_f64());
    }

    /// A write to the API server.
    pub fn wrote(&self, resource: &'static str, operation: &'static str) {
        self.writes.get_or_create(&Write { resource, operation }).inc();
    }

    /// A failed list or watch.
    pub fn watch_failed(&self, resource: &'static str) {
        self.watch_errors.get_or_create(&Resource { resource }).inc();
    }

    /// An Event was published (or not).
    pub fn event(&self, published: bool) {
        let outcome = if published { "published" } else { "failed" };
        self.events.get_or_create(&Outcome { outcome }).inc();
    }

    /// Current queue depth.
    pub fn queue_depth(&self, depth: usize) {
        self.queue_depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
    }

    /// Whether this process leads.
    pub fn leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_every_family_with_fixed_labels() {
        let metrics = Metrics::new();
        metrics.reconciled("namespace", None, Duration::from_millis(20));
        metrics.reconciled("namespace", Some("apply"), Duration::from_millis(5));
        metrics.wrote("ConfigMap", "apply");
        metrics.watch_failed("secrets");
        metrics.event(true);
        metrics.queue_depth(3);
        metrics.leader(true);
        let text = metrics.encode();
        for line in [
            "memgate_operator_reconciles_total{kind=\"namespace\",outcome=\"ok\"} 1",
            "memgate_operator_reconcile_errors_total{kind=\"namespace\",reason=\"apply\"} 1",
            "memgate_operator_reconcile_duration_seconds_count{kind=\"namespace\"} 2",
            "memgate_operator_writes_total{resource=\"ConfigMap\",operation=\"apply\"} 1",
            "memgate_operator_watch_errors_total{resource=\"secrets\"} 1",
            "memgate_operator_events_total{outcome=\"published\"} 1",
            "memgate_operator_queue_depth 3",
            "memgate_operator_leader 1",
        ] {
            assert!(text.contains(line), "missing {line} in:\n{text}");
        }
    }
}
