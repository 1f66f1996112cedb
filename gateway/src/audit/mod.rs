//! The audit trail: one JSON event per Nexent search, Nexent ingest and MCP `context_search` call
//! (served, refused or cut short), saying who asked what of which provider, never what was asked.
//!
//! Owns the event's shape (documented by `docs/audit-event.schema.json`, which a test checks real
//! events against) and the rule of what goes in: the verified caller, the provider, the scope ids
//! sent upstream, the outcome with its error code and upstream status, latency, counts, the
//! ingest's idempotency key and the trace id. Never the query, the content, an upstream body or a
//! credential: a query can only appear as [`digest`] of it under a key the gateway is given.
//! Events leave through [`sink::AuditLog`] without blocking the call.

pub mod digest;
pub mod sink;

use std::time::Duration;

use serde::Serialize;

use crate::auth::Caller;
pub use crate::metrics::AuditCounters;
use crate::metrics::Operation;
pub use digest::DigestKey;
pub use sink::{AuditLog, Destination};

/// Value of every event's `schema` key.
pub const SCHEMA: &str = "memgate.io/audit/v1";

/// How a call ended, as the audit trail says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditOutcome {
    /// Answered.
    Ok,
    /// Failed (upstream failure, bad request, kill switch, identity not verifiable now).
    Error,
    /// Refused by a limit.
    Limited,
    /// The caller was not authenticated or not allowed.
    Denied,
    /// The caller went away before the answer.
    Cancelled,
}

/// Scope ids sent upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeIds {
    /// `user_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// `agent_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// `app_id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_id: Option<String>,
}

impl From<&memgate_crds::Scope> for ScopeIds {
    fn from(scope: &memgate_crds::Scope) -> ScopeIds {
        ScopeIds { user_id: scope.user_id.clone(), agent_id: scope.agent_id.clone(), app_id: scope.app_id.clone() }
    }
}

/// Units of an ingest, by status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Units {
    /// Written (or already written under the same idempotency key).
    pub accepted: usize,
    /// Refused by the upstream.
    pub rejected: usize,
    /// Outcome unknown (e.g. the upstream timed out after the request was sent).
    pub degraded: usize,
}

/// One audit event (one line of the audit log).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// When the call ended (RFC 3339, UTC).
    pub time: String,
    /// `<namespace>/<name>` of the gateway (`--gateway-id`), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// `<namespace>/<name>` of the provider.
    pub provider: String,
    /// `mcp` or `nexent`.
    pub surface: &'static str,
    /// `search`, `ingest` or `context_search`.
    pub operation: &'static str,
    /// The caller as verified ([`crate::auth::CallerIdentity`]), or `unverified` when the call was
    /// refused before the caller was known.
    pub caller: String,
    /// The kind of [`AuditEvent::caller`]: `serviceaccount`, `oidc`, `bearer`, `anonymous`, `unverified`.
    pub caller_kind: &'static str,
    /// The scope ids sent upstream (absent when nothing was sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<ScopeIds>,
    /// How the call ended.
    pub outcome: AuditOutcome,
    /// The Nexent error code of a failed or refused call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<&'static str>,
    /// The upstream's HTTP status when it answered with an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_status: Option<u16>,
    /// Milliseconds from the call's admission to its end.
    pub latency_ms: f64,
    /// Items returned by a search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub results: Option<usize>,
    /// Units of a completed ingest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub units: Option<Units>,
    /// The ingest's idempotency key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The W3C trace id of the call's span (when traces are exported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// [`DigestKey::digest`] of the normalised query, when the gateway has a digest key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_digest: Option<String>,
    /// The limit that refused a `limited` call: `per_caller`, `per_caller_ingest`,
    /// `upstream_rate` or `upstream_in_flight`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<&'static str>,
}

/// Surface and operation words of `operation`.
pub fn surface_and_operation(operation: Operation) -> (&'static str, &'static str) {
    match operation {
        Operation::NexentSearch => ("nexent", "search"),
        Operation::NexentIngest => ("nexent", "ingest"),
        Operation::McpContextSearch => ("mcp", "context_search"),
    }
}

/// What is known of a call when it ends, before it becomes an [`AuditEvent`].
#[derive(Debug, Clone, Default)]
pub struct CallFacts<'a> {
    /// The caller, `None` when refused before it was verified.
    pub caller: Option<&'a Caller>,
    /// Scope ids sent upstream.
    pub scope: Option<&'a memgate_crds::Scope>,
    /// Error code of a failure or refusal.
    pub error_code: Option<&'static str>,
    /// Upstream HTTP status of a failure.
    pub upstream_status: Option<u16>,
    /// Search results.
    pub results: Option<usize>,
    /// Ingest units.
    pub units: Option<Units>,
    /// Ingest idempotency key.
    pub idempotency_key: Option<String>,
    /// Trace id of the call's span.
    pub trace_id: Option<String>,
    /// The normalised query (only ever digested).
    pub query: Option<&'a str>,
    /// The limit that refused the call ([`crate::limits::Limit::as_str`]).
    pub limit: Option<&'static str>,
}

/// The audit side of the gateway: the stream (when `--audit-log` is set), the digest key and the
/// gateway's id. Without a stream every method is a no-op.
#[derive(Debug, Clone, Default)]
pub struct Auditor {
    log: Option<AuditLog>,
    digest_key: Option<DigestKey>,
    gateway: Option<String>,
}

impl Auditor {
    /// Audit to `log`, naming `gateway`, digesting queries with `digest_key` when given.
    pub fn new(log: AuditLog, digest_key: Option<DigestKey>, gateway: Option<String>) -> Auditor {
        Auditor { log: Some(log), digest_key, gateway }
    }

    /// True when events are written.
    pub fn enabled(&self) -> bool {
        self.log.is_some()
    }

    /// Record the end of one call to `provider` (`<namespace>/<name>`).
    pub fn record(
        &self,
        provider: &str,
        operation: Operation,
        outcome: AuditOutcome,
        elapsed: Duration,
        facts: CallFacts<'_>,
    ) {
        let Some(log) = &self.log else { return };
        log.record(self.event(provider, operation, outcome, elapsed, facts));
    }

    /// The event [`Auditor::record`] writes (pure but for the clock).
    pub fn event(
        &self,
        provider: &str,
        operation: Operation,
        outcome: AuditOutcome,
        elapsed: Duration,
        facts: CallFacts<'_>,
    ) -> AuditEvent {
        let (surface, operation) = surface_and_operation(operation);
        let (caller, caller_kind) = match facts.caller {
            Some(caller) => (caller.identity.to_string(), caller.identity.kind()),
            None => ("unverified".to_string(), "unverified"),
        };
        let query_digest = self.digest_key.as_ref().zip(facts.query).map(|(key, query)| key.digest(query.as_bytes()));
        AuditEvent {
            schema: SCHEMA,
            time: now_rfc3339(),
            gateway: self.gateway.clone(),
            provider: provider.to_string(),
            surface,
            operation,
            caller,
            caller_kind,
            scope: facts.scope.map(ScopeIds::from),
            outcome,
            error_code: facts.error_code,
            upstream_status: facts.upstream_status,
            latency_ms: (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
            results: facts.results,
            units: facts.units,
            idempotency_key: facts.idempotency_key,
            trace_id: facts.trace_id,
            query_digest,
            limit: facts.limit,
        }
    }
}

/// The outcome of a call the gateway refused with Nexent error `code` before searching: `denied`
/// for an unauthenticated or forbidden caller, otherwise `error`.
pub fn refusal_outcome(code: &str) -> AuditOutcome {
    match code {
        "unauthorized" | "forbidden" => AuditOutcome::Denied,
        _ => AuditOutcome::Error,
    }
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Millisecond)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::CallerIdentity;

    #[test]
    fn an_event_names_the_verified_caller_and_digests_the_query_only_with_a_key() {
        let caller = Caller {
            subject: Some("system:serviceaccount:team-a:agent".into()),
            identity: CallerIdentity::ServiceAccount { namespace: "team-a".into(), name: "agent".into() },
            client: None,
        };
        let facts =
            || CallFacts { caller: Some(&caller), query: Some("where does alice live"), ..CallFacts::default() };
        let plain = Auditor::default().event(
            "ns/p",
            Operation::NexentSearch,
            AuditOutcome::Ok,
            Duration::from_micros(1500),
            facts(),
        );
        assert_eq!((plain.caller.as_str(), plain.caller_kind), ("serviceaccount:team-a:agent", "serviceaccount"));
        assert_eq!((plain.surface, plain.operation, plain.latency_ms), ("nexent", "search", 1.5));
        assert_eq!(plain.query_digest, None);
        let line = serde_json::to_string(&plain).expect("serializes");
        assert!(!line.contains("alice"), "{line}");
        let keyed =
            Auditor { digest_key: Some(DigestKey::new(b"0123456789abcdef").expect("key")), ..Auditor::default() };
        let event = keyed.event("ns/p", Operation::McpContextSearch, AuditOutcome::Ok, Duration::ZERO, facts());
        assert!(event.query_digest.as_deref().is_some_and(|d| d.starts_with("hmac-sha256:")));
        let refused = keyed.event(
            "ns/p",
            Operation::McpContextSearch,
            AuditOutcome::Denied,
            Duration::ZERO,
            CallFacts::default(),
        );
        assert_eq!((refused.caller.as_str(), refused.caller_kind), ("unverified", "unverified"));
    }

    #[test]
    fn refusals_map_to_denied_limited_or_error() {
        assert_eq!(refusal_outcome("unauthorized"), AuditOutcome::Denied);
        assert_eq!(refusal_outcome("forbidden"), AuditOutcome::Denied);
        assert_eq!(refusal_outcome("provider_error"), AuditOutcome::Error);
    }
}
