//! Prometheus metrics of the gateway, exposed as OpenMetrics text on `/metrics`.
//!
//! Owns the metric families and their only labels: `provider` (a configured provider name, never a
//! path segment that matched nothing), `operation`, `outcome` and `error_code`. No query text,
//! content, scope id, subject or credential is ever a label value.
//!
//! | metric | type | recorded |
//! |---|---|---|
//! | `memgate_gateway_requests_total` | counter | every call to a known provider |
//! | `memgate_gateway_request_duration_seconds` | histogram | every call to a known provider |
//! | `memgate_gateway_search_results` | histogram | successful searches: items returned |
//! | `memgate_gateway_ingest_units_total` | counter | completed ingests: units by status (`outcome` = `accepted` / `rejected` / `degraded`) |
//! | `memgate_gateway_auth_checks_total` | counter | every caller check: `operation` = the method (`anonymous`, `bearer_token`, `service_account`, `oidc`, `none`), `outcome` = `accepted` / `refused`, `error_code` = the fixed reason of a refusal (e.g. `expired`, `audience`, `insufficient_scope`) |
//! | `memgate_gateway_audit_events_total` | counter | audit events written (no labels; only with `--audit-log`) |
//! | `memgate_gateway_audit_events_dropped_total` | counter | audit events dropped: queue full or write failed (no labels) |
//! | `memgate_gateway_runtime_alive_tasks` | gauge | tokio tasks alive in the gateway's runtime, read at scrape time (no labels) |

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Content type of [`Metrics::encode`]'s output.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const DURATION_BUCKETS: [f64; 12] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
const RESULT_BUCKETS: [f64; 8] = [0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0];

/// What was called: the `operation` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `POST /nexent/v1/{provider}/search`.
    NexentSearch,
    /// `context_search` through `/mcp/{provider}`.
    McpContextSearch,
    /// `POST /nexent/v1/{provider}/ingest`.
    NexentIngest,
}

impl Operation {
    /// Its slot in a [`ProviderSeries`].
    fn index(self) -> usize {
        match self {
            Operation::NexentSearch => 0,
            Operation::McpContextSearch => 1,
            Operation::NexentIngest => 2,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::NexentSearch => "nexent_search",
            Operation::McpContextSearch => "mcp_context_search",
            Operation::NexentIngest => "nexent_ingest",
        }
    }
}

/// How a call ended: the `outcome` and `error_code` labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The call succeeded: a search with this many items, an ingest with this many units accepted.
    Ok(usize),
    /// The upstream call failed with this Nexent error code.
    Error(&'static str),
    /// The gateway refused the call before any upstream request (auth, kill switch, bad request),
    /// with this Nexent error code.
    Refused(&'static str),
    /// A provider's `spec.limits` refused the call before any upstream request, with this Nexent
    /// error code (counted as `refused`, like the other refusals).
    Limited(&'static str),
    /// The caller went away before the call finished.
    Cancelled,
}

impl Outcome {
    fn labels(self) -> (&'static str, &'static str) {
        match self {
            Outcome::Ok(_) => ("ok", ""),
            Outcome::Error(code) => ("error", code),
            Outcome::Refused(code) | Outcome::Limited(code) => ("refused", code),
            Outcome::Cancelled => ("cancelled", ""),
        }
    }
}

/// The label set of every family.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Labels {
    provider: String,
    operation: &'static str,
    outcome: &'static str,
    error_code: &'static str,
}

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// A handle counting caller checks (`memgate_gateway_auth_checks_total`) and TokenReview verdicts
/// by where they came from (`memgate_gateway_token_reviews_total`); cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct AuthChecks(Family<Labels, Counter>, Family<ReviewLabels, Counter>);

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReviewLabels {
    answered_by: &'static str,
    verdict: &'static str,
}

impl AuthChecks {
    /// Count one check of a caller of `provider` by `method` ending in `outcome`: `accepted`, or
    /// the fixed reason of a refusal (recorded as `outcome="refused"`, `error_code=<reason>`).
    pub fn record(&self, provider: &str, method: &'static str, outcome: &'static str) {
        let (outcome, error_code) = if outcome == "accepted" { ("accepted", "") } else { ("refused", outcome) };
        let labels = Labels { provider: provider.to_string(), operation: method, outcome, error_code };
        self.0.get_or_create(&labels).inc();
    }

    /// Count one TokenReview verdict (`accepted`, `rejected`, `unavailable`) answered by the
    /// `cache` or the `api_server`.
    pub fn review(&self, answered_by: &'static str, verdict: &'static str) {
        self.1.get_or_create(&ReviewLabels { answered_by, verdict }).inc();
    }
}

/// Counters of the audit stream ([`crate::audit`]).
#[derive(Debug, Clone, Default)]
pub struct AuditCounters {
    /// Events written.
    pub written: Counter,
    /// Events dropped because the queue was full (or the writer failed).
    pub dropped: Counter,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    provider: String,
    limit: &'static str,
}

/// Counters of the limits ([`crate::limits`]).
#[derive(Debug, Clone, Default)]
pub struct LimitCounters {
    limited: Family<LimitLabels, Counter>,
    fallbacks: Counter,
}

impl LimitCounters {
    /// Register the families in `registry`.
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "memgate_gateway_limited",
            "Calls refused by a provider's spec.limits, by limit",
            self.limited.clone(),
        );
        registry.register(
            "memgate_gateway_limit_store_fallbacks",
            "Limit checks decided by the replica's own buckets because the Redis store was unavailable",
            self.fallbacks.clone(),
        );
    }

    /// Count one call of `provider` refused by `limit`.
    pub fn limited(&self, provider: &str, limit: &'static str) {
        self.limited.get_or_create(&LimitLabels { provider: provider.to_string(), limit }).inc();
    }

    /// Count one check decided locally because the store was unavailable.
    pub fn fallback(&self) {
        self.fallbacks.inc();
    }
}

/// A provider's series of successful calls, one set per operation, taken from the families on
/// its first successful call and kept with the provider: later calls count into them without
/// building a label set (the provider name copied), hashing it and locking each family. The
/// series are the families' own (a scrape shows one series either way); errors and refusals,
/// rarer and of many codes, go through the families.
#[derive(Debug, Default)]
pub struct ProviderSeries([OnceLock<OkSeries>; 3]);

#[derive(Debug)]
struct OkSeries {
    /// [`Metrics::id`] of the registry the handles belong to.
    registry: u64,
    requests: Counter,
    duration: Histogram,
    /// Searches only (an ingest's results are its units, counted apart).
    results: Option<Histogram>,
}

/// Source of [`Metrics::id`].
static NEXT_REGISTRY: AtomicU64 = AtomicU64::new(0);

/// The registry and the gateway's metric families.
pub struct Metrics {
    /// Tells this registry from another one in the process (tests run several).
    id: u64,
    registry: Registry,
    requests: Family<Labels, Counter>,
    duration: HistogramFamily,
    results: HistogramFamily,
    units: Family<Labels, Counter>,
    auth_checks: AuthChecks,
    alive_tasks: Gauge,
    audit: AuditCounters,
    limits: LimitCounters,
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
    /// A fresh registry with every family registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        let duration: HistogramFamily = Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS));
        let results: HistogramFamily = Family::new_with_constructor(|| Histogram::new(RESULT_BUCKETS));
        registry.register("memgate_gateway_requests", "Calls to a provider, by outcome", requests.clone());
        registry.register_with_unit(
            "memgate_gateway_request_duration",
            "Time to answer a call to a provider",
            Unit::Seconds,
            duration.clone(),
        );
        registry.register("memgate_gateway_search_results", "Items returned by successful searches", results.clone());
        let units = Family::<Labels, Counter>::default();
        registry.register("memgate_gateway_ingest_units", "Units of completed ingests, by unit status", units.clone());
        let auth_checks = AuthChecks::default();
        registry.register(
            "memgate_gateway_auth_checks",
            "Caller checks, by method and outcome (accepted or the reason of the refusal)",
            auth_checks.0.clone(),
        );
        registry.register(
            "memgate_gateway_token_reviews",
            "ServiceAccount token verdicts, by whether the cache or the API server answered",
            auth_checks.1.clone(),
        );
        let alive_tasks = Gauge::default();
        registry.register(
            "memgate_gateway_runtime_alive_tasks",
            "Tokio tasks alive in the gateway's runtime, read at scrape time",
            alive_tasks.clone(),
        );
        let audit = AuditCounters::default();
        registry.register("memgate_gateway_audit_events", "Audit events written", audit.written.clone());
        registry.register(
            "memgate_gateway_audit_events_dropped",
            "Audit events dropped because the queue was full or the write failed",
            audit.dropped.clone(),
        );
        let limits = LimitCounters::default();
        limits.register(&mut registry);
        let id = NEXT_REGISTRY.fetch_add(1, Ordering::Relaxed);
        Metrics { id, registry, requests, duration, results, units, auth_checks, alive_tasks, audit, limits }
    }

    /// The counters of the limits.
    pub fn limit_counters(&self) -> LimitCounters {
        self.limits.clone()
    }

    /// The counters of the audit stream.
    pub fn audit_counters(&self) -> AuditCounters {
        self.audit.clone()
    }

    /// The handle the authenticator counts its checks with.
    pub fn auth_checks(&self) -> AuthChecks {
        self.auth_checks.clone()
    }

    /// [`Metrics::record`] for a provider whose successful calls count into `series` (kept with
    /// the provider; filled on its first successful call of `operation`).
    pub fn record_with(
        &self,
        series: &ProviderSeries,
        provider: &str,
        operation: Operation,
        outcome: Outcome,
        elapsed: Duration,
    ) {
        if let Outcome::Ok(count) = outcome {
            let ok = series.0[operation.index()].get_or_init(|| self.ok_series(provider, operation));
            // Handles of another registry (a provider shared by two states, in tests) are not ours.
            if ok.registry == self.id {
                ok.requests.inc();
                ok.duration.observe(elapsed.as_secs_f64());
                if let Some(results) = &ok.results {
                    results.observe(count as f64);
                }
                return;
            }
        }
        self.record(provider, operation, outcome, elapsed);
    }

    /// The series [`Metrics::record`] counts a successful call of `operation` at `provider` into.
    fn ok_series(&self, provider: &str, operation: Operation) -> OkSeries {
        let labels = Self::labels(provider, operation, Outcome::Ok(0));
        OkSeries {
            registry: self.id,
            requests: self.requests.get_or_create_owned(&labels),
            duration: self.duration.get_or_create_owned(&labels),
            results: (operation != Operation::NexentIngest).then(|| self.results.get_or_create_owned(&labels)),
        }
    }

    fn labels(provider: &str, operation: Operation, outcome: Outcome) -> Labels {
        let (outcome, error_code) = outcome.labels();
        Labels { provider: provider.to_string(), operation: operation.as_str(), outcome, error_code }
    }

    /// Record one call to `provider`.
    pub fn record(&self, provider: &str, operation: Operation, outcome: Outcome, elapsed: Duration) {
        let labels = Self::labels(provider, operation, outcome);
        self.requests.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(elapsed.as_secs_f64());
        if let Outcome::Ok(count) = outcome
            && operation != Operation::NexentIngest
        {
            self.results.get_or_create(&labels).observe(count as f64);
        }
    }

    /// Record the units of one completed ingest at `provider`, by unit status.
    pub fn record_units(
        &self,
        provider: &str,
        operation: Operation,
        accepted: usize,
        rejected: usize,
        degraded: usize,
    ) {
        for (status, count) in [("accepted", accepted), ("rejected", rejected), ("degraded", degraded)] {
            let labels = Labels {
                provider: provider.to_string(),
                operation: operation.as_str(),
                outcome: status,
                error_code: "",
            };
            self.units.get_or_create(&labels).inc_by(count as u64);
        }
    }

    /// The OpenMetrics text exposition; reads the runtime's alive task count first when called
    /// inside a tokio runtime.
    pub fn encode(&self) -> String {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let alive = runtime.metrics().num_alive_tasks();
            self.alive_tasks.set(i64::try_from(alive).unwrap_or(i64::MAX));
        }
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
    fn a_call_refused_by_a_limit_is_counted_as_refused_with_its_code() {
        assert_eq!(Outcome::Limited("rate_limited").labels(), ("refused", "rate_limited"));
        assert_eq!(Outcome::Limited("rate_limited").labels(), Outcome::Refused("rate_limited").labels());
    }

    #[test]
    fn a_providers_kept_series_are_the_families_own_and_never_another_registrys() {
        let (metrics, series) = (Metrics::new(), ProviderSeries::default());
        let ok = |metrics: &Metrics, operation| {
            metrics.record_with(&series, "repo-memory", operation, Outcome::Ok(2), Duration::from_millis(3));
        };
        ok(&metrics, Operation::NexentSearch);
        ok(&metrics, Operation::NexentSearch);
        metrics.record("repo-memory", Operation::NexentSearch, Outcome::Ok(2), Duration::from_millis(3));
        ok(&metrics, Operation::NexentIngest);
        metrics.record_with(
            &series,
            "repo-memory",
            Operation::NexentSearch,
            Outcome::Error("timeout"),
            Duration::from_secs(5),
        );
        let text = metrics.encode();
        let search = "provider=\"repo-memory\",operation=\"nexent_search\"";
        for line in [
            format!("memgate_gateway_requests_total{{{search},outcome=\"ok\",error_code=\"\"}} 3"),
            format!("memgate_gateway_request_duration_seconds_count{{{search},outcome=\"ok\",error_code=\"\"}} 3"),
            format!("memgate_gateway_search_results_count{{{search},outcome=\"ok\",error_code=\"\"}} 3"),
            format!("memgate_gateway_search_results_sum{{{search},outcome=\"ok\",error_code=\"\"}} 6.0"),
            format!("memgate_gateway_requests_total{{{search},outcome=\"error\",error_code=\"timeout\"}} 1"),
            "memgate_gateway_requests_total{provider=\"repo-memory\",operation=\"nexent_ingest\",outcome=\"ok\",error_code=\"\"} 1".into(),
        ] {
            assert!(text.lines().any(|got| got == line), "{line} missing from:\n{text}");
        }
        // An ingest's results are its units: no search-results series for it.
        assert!(
            !text.contains("memgate_gateway_search_results_count{provider=\"repo-memory\",operation=\"nexent_ingest\"")
        );

        // The same provider under another registry counts there, not into the first one's series.
        let other = Metrics::new();
        ok(&other, Operation::NexentSearch);
        let first = format!("memgate_gateway_requests_total{{{search},outcome=\"ok\",error_code=\"\"}} ");
        assert!(other.encode().lines().any(|got| got == format!("{first}1")), "{}", other.encode());
        assert!(metrics.encode().lines().any(|got| got == format!("{first}3")));
    }

    #[test]
    fn exposition_names_the_families_and_only_the_four_labels() {
        let metrics = Metrics::new();
        metrics.record("repo-memory", Operation::NexentSearch, Outcome::Ok(3), Duration::from_millis(12));
        metrics.record("repo-memory", Operation::McpContextSearch, Outcome::Error("timeout"), Duration::from_secs(5));
        let text = metrics.encode();
        assert!(text.contains("# TYPE memgate_gateway_requests counter"), "{text}");
        assert!(text.contains(
            "memgate_gateway_requests_total{provider=\"repo-memory\",operation=\"nexent_search\",outcome=\"ok\",error_code=\"\"} 1"
        ));
        assert!(text.contains("# TYPE memgate_gateway_request_duration_seconds histogram"));
        assert!(
            text.contains("memgate_gateway_search_results_count{provider=\"repo-memory\",operation=\"nexent_search\"")
        );
        assert!(text.contains("error_code=\"timeout\""));
        assert!(text.ends_with("# EOF\n"));
    }

    /// The gauge follows the runtime: a task spawned and still alive is counted at the next scrape.
    #[tokio::test]
    async fn alive_tasks_are_read_at_scrape_time() {
        let metrics = Metrics::new();
        let alive = |text: &str| -> i64 {
            text.lines()
                .find_map(|line| line.strip_prefix("memgate_gateway_runtime_alive_tasks "))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(-1)
        };
        let before = alive(&metrics.encode());
        assert!(before >= 0, "{}", metrics.encode());
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = wait.await;
        });
        assert_eq!(alive(&metrics.encode()), before + 1);
        let _ = release.send(());
        task.await.expect("task ends");
        assert_eq!(alive(&metrics.encode()), before);
        assert!(metrics.encode().contains("# TYPE memgate_gateway_runtime_alive_tasks gauge"));
    }

    #[test]
    fn ingest_units_are_counted_by_status_and_not_as_search_results() {
        let metrics = Metrics::new();
        metrics.record("repo-memory", Operation::NexentIngest, Outcome::Ok(2), Duration::from_millis(3));
        metrics.record_units("repo-memory", Operation::NexentIngest, 2, 1, 0);
        let text = metrics.encode();
        assert!(text.contains("# TYPE memgate_gateway_ingest_units counter"), "{text}");
        assert!(text.contains(
            "memgate_gateway_ingest_units_total{provider=\"repo-memory\",operation=\"nexent_ingest\",outcome=\"accepted\",error_code=\"\"} 2"
        ));
        assert!(text.contains("outcome=\"rejected\",error_code=\"\"} 1"), "{text}");
        assert!(
            !text.contains("memgate_gateway_search_results_count{provider=\"repo-memory\",operation=\"nexent_ingest\"")
        );
    }
}
