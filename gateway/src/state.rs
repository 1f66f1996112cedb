//! The gateway's shared state and the one search entry both surfaces use.
//!
//! Owns what a request needs besides its own input: the live config, the bounded engine, the
//! metrics, the kill switches, the authenticator and the ingest ledger. [`AppState::search`] is
//! the only path from a surface to the engine's search, [`AppState::ingest`] the only one to
//! [`crate::ingest`]: both apply `bindUserIdToSubject`, and record the metrics, the audit event, the
//! span (only while traces are exported) and, at `debug`, one log event per call (provider,
//! operation, outcome, error code, counts: never the query or content). Counters are always kept; a
//! log line per call is opt-in because formatting it costs more than the rest of a cheap call.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;
use tracing::Instrument;

use crate::audit::{AuditOutcome, Auditor, CallFacts, Units, refusal_outcome};
use crate::auth::{Authenticator, Caller};
use crate::config::{ConfigHandle, Provider};
use crate::engine::{Engine, EngineError, Item, Target};
use crate::ingest::{CallControl, IngestError, IngestRequest, IngestResult, Ledger, MemoryLedger, UnitStatus};
use crate::limits::{Limited, Limiter, SharedBuckets};
use crate::mcp::ProviderSearch;
use crate::metrics::{Metrics, Operation, Outcome};
use crate::telemetry;

/// Environment variable switching every search off (`false`/`0`/`no`/`off`).
pub const SEARCH_SWITCH_ENV: &str = "EXTERNAL_MEMORY_SEARCH_ENABLED";
/// Environment variable switching every ingest off (`false`/`0`/`no`/`off`).
pub const INGEST_SWITCH_ENV: &str = "EXTERNAL_MEMORY_INGEST_ENABLED";
/// Default and maximum of the Nexent `limit`.
pub const DEFAULT_NEXENT_MAX_LIMIT: u32 = 20;

/// Deployment-wide kill switches. Unlike Nexent (whose chart defaults its switches to off), the
/// gateway defaults both to on: a gateway only runs because providers were declared for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillSwitches {
    /// Searches are served.
    pub search: bool,
    /// Ingests are served.
    pub ingest: bool,
}

impl Default for KillSwitches {
    fn default() -> Self {
        KillSwitches { search: true, ingest: true }
    }
}

impl KillSwitches {
    /// Read [`SEARCH_SWITCH_ENV`] and [`INGEST_SWITCH_ENV`].
    pub fn from_env() -> KillSwitches {
        let read = |name: &str| switch_value(std::env::var(name).ok().as_deref());
        KillSwitches { search: read(SEARCH_SWITCH_ENV), ingest: read(INGEST_SWITCH_ENV) }
    }
}

/// Unset, empty, `true`, `1`, `yes`, `on` (any case): on. `false`, `0`, `no`, `off`: off. Anything
/// else is off as well (fail closed on a typo).
pub fn switch_value(raw: Option<&str>) -> bool {
    match raw.map(|v| v.trim().to_ascii_lowercase()) {
        None => true,
        Some(v) => matches!(v.as_str(), "" | "true" | "1" | "yes" | "on"),
    }
}

/// Settings of the serving surfaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Largest Nexent `limit` honoured; larger ones are capped.
    pub nexent_max_limit: u32,
    /// Kill switches.
    pub switches: KillSwitches,
    /// Deadline of one Nexent ingest call (see [`crate::ingest::CallControl`]).
    pub ingest_call_timeout: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            nexent_max_limit: DEFAULT_NEXENT_MAX_LIMIT,
            switches: KillSwitches::default(),
            ingest_call_timeout: crate::ingest::DEFAULT_CALL_TIMEOUT,
        }
    }
}

/// Everything shared by the request handlers.
#[derive(Debug)]
pub struct AppState {
    config: Arc<ConfigHandle>,
    engine: Engine,
    metrics: Metrics,
    auth: Authenticator,
    settings: Settings,
    ledger: SharedLedger,
    audit: Auditor,
    limiter: Limiter,
}

/// The ingest ledger behind a `Debug` that says nothing about it (a Redis URL may hold a password).
struct SharedLedger(Arc<dyn Ledger>);

impl std::fmt::Debug for SharedLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ledger")
    }
}

impl AppState {
    /// Assemble the state, with an in-process [`MemoryLedger`] for ingest (see [`AppState::with_ledger`]).
    pub fn new(config: Arc<ConfigHandle>, engine: Engine, auth: Authenticator, settings: Settings) -> AppState {
        let ledger = SharedLedger(Arc::new(MemoryLedger::default()));
        let metrics = Metrics::new();
        let auth = auth.with_checks(metrics.auth_checks());
        let limiter = Limiter::new(metrics.limit_counters());
        AppState { config, engine, metrics, auth, settings, ledger, audit: Auditor::default(), limiter }
    }

    /// Share the providers' rate limits with the other replicas through `shared` (see [`crate::limits`]).
    pub fn with_shared_limits(mut self, shared: SharedBuckets) -> AppState {
        self.limiter = Limiter::new(self.metrics.limit_counters()).with_shared(shared);
        self
    }

    /// Write an audit event of every call through `audit` (see [`crate::audit`]).
    pub fn with_auditor(mut self, audit: Auditor) -> AppState {
        self.audit = audit;
        self
    }

    /// Use `ledger` for ingest idempotency instead (e.g. a [`crate::ingest::RedisLedger`] shared by replicas).
    pub fn with_ledger(mut self, ledger: Arc<dyn Ledger>) -> AppState {
        self.ledger = SharedLedger(ledger);
        self
    }

    /// The live config.
    pub fn config(&self) -> &Arc<ConfigHandle> {
        &self.config
    }

    /// The metrics registry.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The authenticator.
    pub fn auth(&self) -> &Authenticator {
        &self.auth
    }

    /// The settings.
    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// The served provider called `name`, if any.
    pub fn provider(&self, name: &str) -> Option<Arc<Provider>> {
        self.config.snapshot().provider(name).cloned()
    }

    /// Record a call the gateway refused before searching (`code`: the Nexent error code;
    /// `caller`: who it was, when already verified).
    pub fn record_refusal(
        &self,
        provider: &Provider,
        operation: Operation,
        caller: Option<&Caller>,
        code: &'static str,
        elapsed: Duration,
    ) {
        self.metrics.record(&provider.name, operation, Outcome::Refused(code), elapsed);
        tracing::debug!(provider = %provider.name, operation = operation.as_str(), outcome = "refused", error_code = code, "call refused");
        let facts = CallFacts { caller, error_code: Some(code), ..CallFacts::default() };
        self.audit.record(provider.key(), operation, refusal_outcome(code), elapsed, facts);
    }

    /// Search `provider` for `query` (already normalised) on behalf of `caller`, at most `limit`
    /// items. With `bindUserIdToSubject` the caller's subject is the `user_id`; a caller without a
    /// subject then fails as [`EngineError::InvalidRequest`] without any upstream request (access
    /// control refuses such callers first). Dropping the future aborts the upstream request and
    /// records the call as cancelled.
    pub async fn search(
        &self,
        provider: &Provider,
        caller: &Caller,
        query: &str,
        limit: u32,
        operation: Operation,
    ) -> Result<Vec<Item>, EngineError> {
        let span = telemetry::provider_span(operation, &provider.name);
        // Before the recording, which borrows its scope ids once they are sent.
        let target = target_for(provider, caller);
        let mut record = Recording::start(self, provider, operation, &span, caller);
        record.facts.query = Some(query);
        let _admission = match self.limiter.admit_search(provider, caller).await {
            Ok(admission) => admission,
            Err(limited) => return Err(record.limited(limited)),
        };
        record.facts.scope = target.as_deref().map(|t| &t.scope);
        let result = match target.as_deref() {
            Some(target) => {
                let search =
                    self.engine.search(provider.key(), target, &provider.dialect, provider.encoding, query, limit);
                search.instrument(span.clone()).await
            }
            None => Err(EngineError::InvalidRequest),
        };
        match &result {
            Ok(items) => record.finish(Outcome::Ok(items.len())),
            Err(err) => {
                record.facts.upstream_status = err.upstream_status();
                record.finish(Outcome::Error(err.code().as_str()));
            }
        }
        result
    }

    /// Write `request`'s units to `provider` on behalf of `caller` through [`crate::ingest`] and
    /// the ledger, recording metrics (the call and its units by status), the span and one log
    /// event. With `bindUserIdToSubject` a caller without a subject fails as
    /// [`EngineError::InvalidRequest`] without any upstream request. `control` bounds the call as a
    /// whole (deadline, caller gone: checked before each unit). Run it to completion (the route
    /// spawns it and cancels through `control`): a dropped call leaves its current unit to lapse
    /// into degraded.
    pub async fn ingest(
        &self,
        provider: &Provider,
        caller: &Caller,
        request: IngestRequest,
        control: &CallControl,
    ) -> Result<IngestResult, IngestError> {
        let operation = Operation::NexentIngest;
        let span = telemetry::provider_span(operation, &provider.name);
        // Before the recording, which borrows its scope ids once they are sent.
        let target = target_for(provider, caller);
        let mut record = Recording::start(self, provider, operation, &span, caller);
        let key = &request.idempotency_key;
        let valid_key = !key.is_empty() && key.chars().count() <= crate::ingest::MAX_KEY_CHARS;
        record.facts.idempotency_key = valid_key.then(|| key.clone());
        let units = u64::try_from(request.units.len()).unwrap_or(u64::MAX);
        let _admission = match self.limiter.admit_ingest(provider, caller, units).await {
            Ok(admission) => admission,
            Err(limited) => {
                return Err(IngestError::Upstream { error: record.limited(limited), accepted_before: 0 });
            }
        };
        record.facts.scope = target.as_deref().map(|t| &t.scope);
        let result = match target.as_deref() {
            Some(target) => {
                crate::ingest::ingest_controlled(
                    &self.engine,
                    provider,
                    target,
                    self.ledger.0.as_ref(),
                    request,
                    control,
                )
                .instrument(span.clone())
                .await
            }
            None => Err(IngestError::Upstream { error: EngineError::InvalidRequest, accepted_before: 0 }),
        };
        match &result {
            Ok(outcome) => {
                let degraded = outcome.unit_results.iter().filter(|u| u.status == UnitStatus::Degraded).count();
                self.metrics.record_units(
                    &provider.name,
                    operation,
                    outcome.accepted_count,
                    outcome.rejected_count,
                    degraded,
                );
                telemetry::record_unit_counts(&span, outcome.accepted_count, outcome.rejected_count);
                let (accepted, rejected) = (outcome.accepted_count, outcome.rejected_count);
                record.facts.units = Some(Units { accepted, rejected, degraded });
                record.finish(Outcome::Ok(outcome.accepted_count));
            }
            Err(IngestError::Cancelled { .. }) => record.finish(Outcome::Cancelled),
            Err(err) => {
                if let IngestError::Upstream { error, .. } = err {
                    record.facts.upstream_status = error.upstream_status();
                }
                record.finish(Outcome::Error(err.code().as_str()));
            }
        }
        result
    }
}

/// The provider's target, with `user_id` bound to the caller's subject when the provider binds it;
/// `None` when it binds and the caller has no subject, or a subject that is not a valid scope id
/// for the provider's dialect (the same rule as `spec.scope.userId`, see
/// [`memgate_crds::validation::scope_id_problem`]): nothing is sent upstream then.
fn target_for<'a>(provider: &'a Provider, caller: &Caller) -> Option<Cow<'a, Target>> {
    if provider.access.bind_user_id_to_subject {
        let subject = caller.subject.clone()?;
        let builtin = memgate_presets::get(&provider.dialect_id).is_some();
        if memgate_crds::validation::scope_id_problem(&subject, builtin).is_some() {
            tracing::warn!(provider = %provider.name, "caller subject refused as user_id: not a valid scope id");
            return None;
        }
        let mut scope = provider.target.scope.clone();
        scope.user_id = Some(subject);
        Some(Cow::Owned(Target { scope, ..provider.target.clone() }))
    } else {
        Some(Cow::Borrowed(&provider.target))
    }
}

/// Records a call once (metrics, span, log line, audit event): on [`Recording::finish`], or as
/// cancelled when dropped unfinished.
struct Recording<'a> {
    metrics: &'a Metrics,
    audit: &'a Auditor,
    provider: &'a Provider,
    operation: Operation,
    started: Instant,
    span: &'a tracing::Span,
    facts: CallFacts<'a>,
    done: bool,
}

impl<'a> Recording<'a> {
    fn start(
        state: &'a AppState,
        provider: &'a Provider,
        operation: Operation,
        span: &'a tracing::Span,
        caller: &'a Caller,
    ) -> Self {
        let facts = CallFacts { caller: Some(caller), ..CallFacts::default() };
        let (metrics, audit) = (&state.metrics, &state.audit);
        Recording { metrics, audit, provider, operation, started: Instant::now(), span, facts, done: false }
    }

    /// Finish as refused by a limit; the error the call fails with.
    fn limited(&mut self, limited: Limited) -> EngineError {
        self.facts.limit = Some(limited.limit.as_str());
        let error = EngineError::Limited { limit: limited.limit, retry_after_seconds: limited.retry_after_seconds };
        self.finish(Outcome::Limited(error.code().as_str()));
        error
    }

    fn finish(&mut self, outcome: Outcome) {
        self.done = true;
        let elapsed = self.started.elapsed();
        self.metrics.record_with(&self.provider.series, &self.provider.name, self.operation, outcome, elapsed);
        let (name, code, count) = match outcome {
            Outcome::Ok(count) => ("ok", None, Some(count)),
            Outcome::Error(code) | Outcome::Refused(code) | Outcome::Limited(code) => ("error", Some(code), None),
            Outcome::Cancelled => ("cancelled", None, None),
        };
        telemetry::finish_span(self.span, name, code, count);
        if self.audit.enabled() {
            let audited = match outcome {
                Outcome::Limited(_) => AuditOutcome::Limited,
                Outcome::Ok(_) => AuditOutcome::Ok,
                Outcome::Error(_) => AuditOutcome::Error,
                Outcome::Refused(code) => refusal_outcome(code),
                Outcome::Cancelled => AuditOutcome::Cancelled,
            };
            let mut facts = std::mem::take(&mut self.facts);
            facts.error_code = code;
            if self.operation != Operation::NexentIngest {
                facts.results = count;
            }
            facts.trace_id = memgate_telemetry::trace_id_of(self.span);
            self.audit.record(self.provider.key(), self.operation, audited, elapsed, facts);
        }
        let _entered = self.span.enter();
        let duration_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        if self.operation == Operation::NexentIngest {
            tracing::debug!(
                provider = %self.provider.name,
                operation = self.operation.as_str(),
                outcome = name,
                error_code = code.unwrap_or(""),
                accepted = count.unwrap_or(0),
                duration_ms,
                "ingest finished"
            );
            return;
        }
        tracing::debug!(
            provider = %self.provider.name,
            operation = self.operation.as_str(),
            outcome = name,
            error_code = code.unwrap_or(""),
            results = count.unwrap_or(0),
            duration_ms,
            "search finished"
        );
    }
}

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish(Outcome::Cancelled);
        }
    }
}

/// The provider a request's caller was authorised against, put into the request extensions by
/// [`crate::server::mcp_guard`] next to the [`Caller`]. The MCP search uses exactly this provider
/// (not a fresh config lookup), so the access rules checked and the provider searched come from
/// the same config snapshot even when a reload lands in between.
#[derive(Debug, Clone)]
pub struct AuthorizedProvider(pub Arc<Provider>);

/// Where an MCP tool call refused by a limit leaves its `Retry-After` seconds for
/// [`crate::server::mcp_guard`] to send as a header (put into the request extensions by the guard).
#[derive(Debug, Clone, Default)]
pub struct RetryAfter(Arc<std::sync::OnceLock<u64>>);

impl RetryAfter {
    /// The seconds left by a limited call, if any.
    pub fn get(&self) -> Option<u64> {
        self.0.get().copied()
    }
}

/// The MCP surface's view of the gateway. Access control happens before the MCP router
/// ([`crate::server::mcp_guard`]), which puts the [`Caller`] and the [`AuthorizedProvider`] into
/// the request extensions; a search without both (the guard did not run), or for another
/// provider than the one authorised, fails closed with [`EngineError::InvalidRequest`] and no
/// upstream request.
impl ProviderSearch for AppState {
    fn exists(&self, provider: &str) -> bool {
        self.provider(provider).is_some_and(|p| p.mcp)
    }

    fn search<'a>(
        &'a self,
        provider: &'a str,
        query: String,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
        self.search_in_request(provider, query, limit, &NO_EXTENSIONS)
    }

    fn search_in_request<'a>(
        &'a self,
        provider: &'a str,
        query: String,
        limit: u32,
        request: &'a http::Extensions,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
        let caller = request.get::<Caller>().cloned();
        // The provider the guard authorised the caller against, never a newer snapshot's.
        let authorized = request.get::<AuthorizedProvider>().map(|a| Arc::clone(&a.0));
        let trace = request.get::<memgate_telemetry::CallerTrace>().cloned();
        let retry_after = request.get::<RetryAfter>().cloned();
        Box::pin(async move {
            let (Some(caller), Some(authorized)) = (caller, authorized) else {
                tracing::warn!(provider, "MCP search without an authenticated caller refused");
                return Err(EngineError::InvalidRequest);
            };
            if authorized.name != provider || !authorized.mcp {
                tracing::warn!(provider, "MCP search for a provider other than the authorised one refused");
                return Err(EngineError::InvalidRequest);
            }
            let search = AppState::search(self, &authorized, &caller, &query, limit, Operation::McpContextSearch);
            // The transport runs this call on its own task: the caller's trace comes with the request.
            let result = match trace {
                Some(trace) => trace.attach(search).await,
                None => search.await,
            };
            if let (Err(EngineError::Limited { retry_after_seconds, .. }), Some(slot)) = (&result, retry_after) {
                let _ = slot.0.set(*retry_after_seconds);
            }
            result
        })
    }

    fn record_invalid_call(&self, provider: &str, request: &http::Extensions) {
        let (Some(caller), Some(authorized)) = (request.get::<Caller>(), request.get::<AuthorizedProvider>()) else {
            return;
        };
        if authorized.0.name == provider {
            let operation = Operation::McpContextSearch;
            self.record_refusal(&authorized.0, operation, Some(caller), "invalid_payload", Duration::ZERO);
        }
    }
}

static NO_EXTENSIONS: std::sync::LazyLock<http::Extensions> = std::sync::LazyLock::new(http::Extensions::new);

#[cfg(test)]
mod tests {
    use super::*;

    fn bound_provider(dialect: &str, scope: &str) -> Arc<Provider> {
        let text = format!(
            "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: p, namespace: agents}}\nspec:\n  \
             dialect: {{{dialect}}}\n  endpoint: {{origin: \"http://127.0.0.1:1\", allowInsecureHttp: true}}\n  \
             credentials: {{secretRef: {{name: s, key: k}}}}\n  scope: {scope}\n  access: {{bindUserIdToSubject: true, \
             serviceAccounts: {{audience: memgate, allowed: [{{namespace: agents}}]}}}}\n---\napiVersion: v1\nkind: Secret\n\
             metadata: {{name: s, namespace: agents}}\nstringData: {{k: key}}\n---\napiVersion: memgate.io/v1alpha1\n\
             kind: DialectPreset\nmetadata: {{name: team}}\nspec:\n  dialectVersion: 1\n  auth: x-api-key\n  search: \
             {{method: POST, path: /s, queryLocation: json, userIdLocation: json, agentIdLocation: omit, appIdLocation: omit, \
             limitField: limit}}\n  response: {{collection: results, idField: id, contentField: memory, titleField: omit, \
             uriField: omit, scoreField: omit, updatedAtField: omit}}\n"
        );
        let docs: Vec<_> = memgate_crds::manifest::documents(&text)
            .expect("yaml")
            .into_iter()
            .map(|(i, v)| (format!("t#{i}"), v))
            .collect();
        let snapshot = crate::config::build_snapshot(&docs, &Default::default()).expect("valid config");
        Arc::clone(snapshot.provider("p").expect("served"))
    }

    #[test]
    fn a_bound_subject_follows_the_scope_id_rule_of_the_dialect() {
        let builtin = bound_provider("builtin: mem0-oss-rest-2026-08", "{agentId: qwen-code}");
        let caller = |subject: &str| Caller { subject: Some(subject.to_string()), ..Caller::default() };
        let sa = "system:serviceaccount:agents:qwen-code";
        let target = target_for(&builtin, &caller(sa)).expect("a ServiceAccount subject is a valid id");
        assert_eq!(target.scope.user_id.as_deref(), Some(sa));
        for bad in ["alice smith", " alice", "alice\u{3000}", "", "a\nb"] {
            assert!(target_for(&builtin, &caller(bad)).is_none(), "{bad:?} must not reach a Mem0 upstream");
        }
        assert!(target_for(&builtin, &Caller::default()).is_none());
        let custom = bound_provider("presetRef: team", "{}");
        assert!(target_for(&custom, &caller("alice smith")).is_some(), "custom dialects keep the general rule");
        assert!(target_for(&custom, &caller("a\nb")).is_none());
    }

    #[test]
    fn switches_default_on_and_fail_closed_on_unknown_values() {
        for on in [None, Some(""), Some("true"), Some("TRUE"), Some("1"), Some(" yes "), Some("on")] {
            assert!(switch_value(on), "{on:?}");
        }
        for off in [Some("false"), Some("False"), Some("0"), Some("no"), Some("off"), Some("flase")] {
            assert!(!switch_value(off), "{off:?}");
        }
    }
}
