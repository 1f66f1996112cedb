//! Nexent ingest: write a request's units upstream exactly once, however often Nexent retries.
//!
//! Owned by the ingest work; the HTTP route (`/nexent/v1/<provider>/ingest`) and the Python plugin
//! call [`ingest`]. It never performs HTTP itself (each unit is one [`Engine::add`]) and never
//! puts content, ids, the idempotency key, an upstream body or a credential into an error, a log
//! event or a stored key.
//!
//! # Flow
//! 1. Check the provider serves ingest and has a write contract, and the request's bounds
//!    ([`MAX_UNITS`], [`MAX_CONTENT_CHARS`], ids): otherwise `invalid_payload`, nothing written.
//! 2. For each unit, in order: claim it in the [`Ledger`] under
//!    `(provider, idempotency_key, event_id[, unit_index])`; a recorded outcome is returned as is,
//!    with no upstream call; otherwise write it and record the outcome. When the provider binds
//!    `user_id` to the caller's subject, the provider part of the key also holds that user id
//!    ([`ledger_provider`]), so callers reusing each other's idempotency key never share outcomes.
//! 3. Summarize ([`IngestResult::summarize`]): counts derive from the unit results only.
//!
//! # Policies
//! - **Overall status**: all accepted -> `ok` (an empty request too); none accepted -> `error`;
//!   else `partial`. Degraded units are in neither count and make a call `partial` / `error` like
//!   rejected ones.
//! - **Call-level failures** (upstream 401/403, 429, 503 and 5xx other than 500/502/504, refused
//!   connection, redirect, 404, provider saturated, ledger unavailable) end the call with an
//!   [`IngestError`] carrying Nexent's code, severity and `retry_after_seconds`, whether or not
//!   earlier units were already accepted. The failing unit's claim is released (nothing was
//!   stored), so a retry writes it; units recorded before it are returned from the ledger on the
//!   retry, never written again. Units after it are untouched. 503 is taken to mean "not stored"
//!   (the service declined the request); 500, 502 and 504 are not (see below).
//! - **Degraded** (a 2xx the contract cannot read, an upstream 500 / 502 / 504, a timeout or lost
//!   connection after sending, or a claim abandoned by a crashed or cancelled call): the request
//!   was sent and whether the unit was stored is unknown, so it is recorded as degraded, never as
//!   accepted and never released. A 500/502/504 may come from the service after its insert or
//!   from an ingress that lost the answer, so it is not a call-level failure: the call goes on
//!   with the next unit. On a retry a degraded unit is re-sent only when the contract says the
//!   upstream drops exact repeats (`dedupes_exact_repeats`, e.g. Mem0 Platform); otherwise it is
//!   NOT re-sent and is reported degraded again, because a second write could duplicate the
//!   memory.
//! - **Concurrency**: a unit claimed by another call (another replica with a shared ledger) is
//!   waited for, up to the provider timeout, and its outcome returned; if it is still in
//!   progress the call fails retryable (`provider_error`) without writing.
//! - **Ledger failures**: no unit is written without a claim (`provider_error`, retryable). If the
//!   outcome cannot be recorded after a write, the outcome is still returned; the claim then
//!   lapses into degraded, so a retry does not write again.
//! - **One deadline per call** ([`CallControl`]): a unit is started only before the call's
//!   deadline ([`DEFAULT_CALL_TIMEOUT`] unless the caller sets one); each started unit still gets
//!   its full provider timeout, so a call ends at the latest one provider timeout after its
//!   deadline and no unit is cut short into degraded by it. Units left when the deadline passes
//!   are not sent: the call fails with [`IngestError::DeadlineExceeded`] (`timeout`, retryable);
//!   units done before are in the ledger, so Nexent's retry returns them and writes the rest.
//! - **Caller gone** ([`CallControl::cancelled`]): checked before each unit (and while waiting
//!   for a unit another call holds). The unit being written is finished and recorded; no further
//!   unit is started and the call ends with [`IngestError::Cancelled`]. Dropping the future itself
//!   mid-unit instead leaves that unit's claim to lapse into degraded after the provider timeout
//!   plus [`CLAIM_GRACE`], so the route runs the call in its own task and cancels it through the
//!   token.

mod ledger;
mod redis_ledger;
mod wire;

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Provider;
use crate::engine::{AddUnit, Engine, EngineError, ErrorCode, Severity, Target, WriteOutcome};

pub use ledger::{
    Claim, ClaimPolicy, ClaimToken, DEFAULT_MAX_ENTRIES, DEFAULT_RESULT_TTL, DEFAULT_RETRY_WINDOW, Ledger, LedgerError,
    LedgerKey, MemoryLedger, REASON_ABANDONED, REASON_UNREADABLE, Recorded,
};
pub use redis_ledger::{DEFAULT_COMMAND_TIMEOUT, KEY_PREFIX, RedisLedger};
pub use wire::{IngestRequest, IngestResult, IngestStatus, IngestUnit, UnitIngestResult, UnitStatus};

/// Most units one call may carry.
pub const MAX_UNITS: usize = 100;
/// Longest `unit_content`, in Unicode code points.
pub const MAX_CONTENT_CHARS: usize = 16_384;
/// Longest `event_id` and `unit_type`, in Unicode code points.
pub const MAX_ID_CHARS: usize = 256;
/// Longest `idempotency_key`, in Unicode code points.
pub const MAX_KEY_CHARS: usize = 1024;
/// How long a claim outlives the provider timeout before it counts as abandoned.
pub const CLAIM_GRACE: Duration = Duration::from_secs(10);
/// Pause between looks at a unit another call is writing.
const BUSY_POLL: Duration = Duration::from_millis(50);
/// Default deadline of one ingest call: how long Nexent waits by default
/// (`PROVIDER_REQUEST_TIMEOUT_SECONDS` and a provider's `timeout_seconds`, both 30 s).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The limits of one ingest call as a whole (see the module policies).
#[derive(Debug, Clone)]
pub struct CallControl {
    /// No unit is started after this instant.
    pub deadline: Instant,
    /// Cancelled when the caller is gone: no unit is started after that.
    pub cancelled: CancellationToken,
}

impl CallControl {
    /// A call that ends `timeout` from now and is cancelled through `cancelled`.
    pub fn new(timeout: Duration, cancelled: CancellationToken) -> CallControl {
        CallControl { deadline: Instant::now() + timeout, cancelled }
    }

    /// Why no further unit may start, if one may not.
    fn stop(&self, written: usize) -> Option<IngestError> {
        if self.cancelled.is_cancelled() {
            Some(IngestError::Cancelled { written })
        } else if Instant::now() >= self.deadline {
            Some(IngestError::DeadlineExceeded { written })
        } else {
            None
        }
    }
}

impl Default for CallControl {
    fn default() -> Self {
        CallControl::new(DEFAULT_CALL_TIMEOUT, CancellationToken::new())
    }
}

/// Why an ingest call failed as a whole. Messages are fixed text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IngestError {
    /// The request breaks a bound or an id rule; nothing was written.
    #[error("invalid ingest request: {0}")]
    InvalidPayload(&'static str),
    /// The provider does not serve Nexent ingest or has no verified write contract.
    #[error("this provider does not accept ingest")]
    NotWritable,
    /// Another call is still writing one of the units; nothing more was written.
    #[error("another request with the same idempotency key is still being written")]
    InProgress,
    /// The idempotency ledger could not be used; nothing more was written.
    #[error("the idempotency ledger is unavailable")]
    Ledger(LedgerError),
    /// The call's deadline passed before every unit was started; the units not started were not
    /// sent.
    #[error("the ingest call reached its deadline before every unit was written")]
    DeadlineExceeded {
        /// Units of this call done (now or earlier) before it stopped.
        written: usize,
    },
    /// The caller went away; the units not started were not sent.
    #[error("the caller went away before every unit was written")]
    Cancelled {
        /// Units of this call done (now or earlier) before it stopped.
        written: usize,
    },
    /// A unit's upstream call failed as a whole.
    #[error("{error}")]
    Upstream {
        /// The engine's failure.
        error: EngineError,
        /// Units of this call accepted (now or earlier) before the failing one.
        accepted_before: usize,
    },
}

impl IngestError {
    /// Nexent `code`.
    pub fn code(&self) -> ErrorCode {
        match self {
            IngestError::InvalidPayload(_) => ErrorCode::InvalidPayload,
            IngestError::Ledger(LedgerError::Full { .. }) => ErrorCode::RateLimited,
            IngestError::DeadlineExceeded { .. } | IngestError::Cancelled { .. } => ErrorCode::Timeout,
            IngestError::NotWritable | IngestError::InProgress | IngestError::Ledger(_) => ErrorCode::ProviderError,
            IngestError::Upstream { error, .. } => error.code(),
        }
    }

    /// Nexent `severity`.
    pub fn severity(&self) -> Severity {
        match self {
            IngestError::InvalidPayload(_) | IngestError::NotWritable => Severity::NonRetryable,
            IngestError::InProgress
            | IngestError::Ledger(_)
            | IngestError::DeadlineExceeded { .. }
            | IngestError::Cancelled { .. } => Severity::Retryable,
            IngestError::Upstream { error, .. } => error.severity(),
        }
    }

    /// Nexent `retry_after_seconds`: an upstream 429's numeric `Retry-After`, or when the
    /// provider's ledger share is full the seconds until its oldest entry leaves the retry window.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            IngestError::Upstream { error, .. } => error.retry_after_seconds(),
            IngestError::Ledger(LedgerError::Full { retry_after_seconds }) => Some(*retry_after_seconds),
            _ => None,
        }
    }
}

/// Write `request`'s units to `provider` through `engine`, exactly once per
/// `(idempotency_key, event_id[, unit_index])` as far as `ledger` reaches (see the module policies).
pub async fn ingest(
    engine: &Engine,
    provider: &Provider,
    ledger: &dyn Ledger,
    request: IngestRequest,
) -> Result<IngestResult, IngestError> {
    ingest_with_target(engine, provider, &provider.target, ledger, request).await
}

/// [`ingest`] with an explicit target (the provider's, with `user_id` bound to the caller when the
/// provider binds it).
pub async fn ingest_with_target(
    engine: &Engine,
    provider: &Provider,
    target: &Target,
    ledger: &dyn Ledger,
    request: IngestRequest,
) -> Result<IngestResult, IngestError> {
    ingest_controlled(engine, provider, target, ledger, request, &CallControl::default()).await
}

/// [`ingest_with_target`] under `control`: one deadline for the call and a cancellation by the
/// caller, both checked before each unit.
pub async fn ingest_controlled(
    engine: &Engine,
    provider: &Provider,
    target: &Target,
    ledger: &dyn Ledger,
    request: IngestRequest,
    control: &CallControl,
) -> Result<IngestResult, IngestError> {
    let contract = match &provider.write {
        Some(contract) if provider.nexent_ingest => contract,
        _ => return Err(IngestError::NotWritable),
    };
    validate(&request)?;
    let provider_key = format!("{}/{}", provider.namespace, provider.name);
    let ledger_scope = ledger_provider(provider, target);
    let policy =
        ClaimPolicy { hold_for: target.timeout + CLAIM_GRACE, retake_degraded: contract.dedupes_exact_repeats };

    let mut unit_results = Vec::with_capacity(request.units.len());
    let mut accepted = 0;
    for (done, unit) in request.units.iter().enumerate() {
        if let Some(stop) = control.stop(done) {
            tracing::debug!(provider = provider.name.as_str(), written = done, "ingest stopped before a unit");
            return Err(stop);
        }
        let key = LedgerKey {
            provider: ledger_scope.clone(),
            idempotency_key: request.idempotency_key.clone(),
            event_id: unit.event_id.clone(),
            unit_index: unit.unit_index,
        };
        let recorded = match wait_for_claim(ledger, &key, policy, target.timeout, &control.cancelled).await? {
            Claim::Done(recorded) => recorded,
            Claim::Busy => return Err(IngestError::InProgress),
            Claim::Claimed { token, replaces } => {
                let add = AddUnit { event_id: &unit.event_id, unit_type: &unit.unit_type, content: &unit.unit_content };
                match engine.add(&provider_key, target, provider.dialect.auth, contract, &add).await {
                    Ok(outcome) => {
                        let recorded = recorded_of(outcome);
                        if ledger.record(&key, &recorded).await.is_err() {
                            tracing::warn!(
                                provider = provider.name.as_str(),
                                "ingest outcome not recorded; the unit's claim will lapse into degraded"
                            );
                        }
                        recorded
                    }
                    Err(error) => {
                        if ledger.release(&key, &token, replaces.as_ref()).await.is_err() {
                            tracing::warn!(
                                provider = provider.name.as_str(),
                                "ingest claim not released; the unit's claim will lapse into degraded"
                            );
                        }
                        tracing::debug!(
                            provider = provider.name.as_str(),
                            error_code = error.code().as_str(),
                            accepted_before = accepted,
                            "ingest stopped at a call-level failure"
                        );
                        return Err(IngestError::Upstream { error, accepted_before: accepted });
                    }
                }
            }
        };
        let result = unit_result(&unit.event_id, recorded);
        if result.status == UnitStatus::Accepted {
            accepted += 1;
        }
        unit_results.push(result);
    }
    let result = IngestResult::summarize(&provider.name, unit_results);
    tracing::debug!(
        provider = provider.name.as_str(),
        accepted = result.accepted_count,
        rejected = result.rejected_count,
        units = result.unit_results.len(),
        "ingest finished"
    );
    Ok(result)
}

/// The `provider` part of a unit's [`LedgerKey`]: `namespace/name`, plus `\0` and the effective
/// upstream `user_id` when the provider binds it to the caller's subject (`bindUserIdToSubject`).
///
/// With binding the unit lands in the caller's own scope, so two callers sending the same
/// idempotency key are two different writes: without the user id, the second caller would be
/// answered with the first caller's recorded outcome although nothing was written in its scope.
/// Without binding every caller writes into the same configured scope and the key stays
/// `namespace/name` (unchanged, so entries recorded before stay valid). `\0` cannot occur in a
/// Kubernetes name, so the two parts cannot run into each other.
pub fn ledger_provider(provider: &Provider, target: &Target) -> String {
    let mut key = format!("{}/{}", provider.namespace, provider.name);
    if provider.access.bind_user_id_to_subject {
        key.push('\0');
        key.push_str(target.scope.user_id.as_deref().unwrap_or_default());
    }
    key
}

/// Claim `key`, waiting up to `patience` while another call holds it (and no longer than the
/// caller stays: a cancelled wait reports [`Claim::Busy`]).
async fn wait_for_claim(
    ledger: &dyn Ledger,
    key: &LedgerKey,
    policy: ClaimPolicy,
    patience: Duration,
    cancelled: &CancellationToken,
) -> Result<Claim, IngestError> {
    let give_up = Instant::now() + patience;
    loop {
        match ledger.claim(key, policy).await.map_err(IngestError::Ledger)? {
            Claim::Busy if Instant::now() < give_up && !cancelled.is_cancelled() => {
                tokio::select! {
                    () = tokio::time::sleep(BUSY_POLL) => {}
                    () = cancelled.cancelled() => {}
                }
            }
            claim => return Ok(claim),
        }
    }
}

fn recorded_of(outcome: WriteOutcome) -> Recorded {
    match outcome {
        WriteOutcome::Accepted => Recorded::Accepted,
        WriteOutcome::Rejected { reason } => Recorded::Rejected { reason: reason.to_string() },
        WriteOutcome::Degraded { reason } => Recorded::Degraded { reason: reason.to_string() },
    }
}

fn unit_result(event_id: &str, recorded: Recorded) -> UnitIngestResult {
    let (status, message) = match recorded {
        Recorded::Accepted => (UnitStatus::Accepted, None),
        Recorded::Rejected { reason } => (UnitStatus::Rejected, Some(reason)),
        Recorded::Degraded { reason } => (UnitStatus::Degraded, Some(reason)),
    };
    UnitIngestResult { unit_id: event_id.to_string(), status, message }
}

/// The request's bounds; every message names the field and the rule, never a value.
pub fn validate(request: &IngestRequest) -> Result<(), IngestError> {
    let invalid = |message| Err(IngestError::InvalidPayload(message));
    let chars = |text: &str| text.chars().count();
    if request.idempotency_key.trim().is_empty() || chars(&request.idempotency_key) > MAX_KEY_CHARS {
        return invalid("`idempotency_key` must be 1 to 1024 characters and not blank");
    }
    if request.units.len() > MAX_UNITS {
        return invalid("`units` may hold at most 100 units per request");
    }
    let mut seen = HashSet::with_capacity(request.units.len());
    for unit in &request.units {
        if unit.event_id.trim().is_empty() || chars(&unit.event_id) > MAX_ID_CHARS {
            return invalid("every unit's `event_id` must be 1 to 256 characters and not blank");
        }
        if chars(&unit.unit_type) > MAX_ID_CHARS {
            return invalid("every unit's `unit_type` must be at most 256 characters");
        }
        if unit.unit_content.trim().is_empty() || chars(&unit.unit_content) > MAX_CONTENT_CHARS {
            return invalid("every unit's `unit_content` must be 1 to 16384 characters and not blank");
        }
        if !seen.insert((unit.event_id.as_str(), unit.unit_index)) {
            return invalid("units must not repeat the same `event_id` and `unit_index`");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::engine::UrlCache;

    /// A provider writing to a port nothing listens on: any unit sent would fail `Connect`.
    fn unreachable_provider() -> std::sync::Arc<Provider> {
        let text = "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {name: p, namespace: agents}\n\
                    spec:\n  dialect: {builtin: mem0-oss-rest-2026-08}\n  endpoint: {origin: \"http://127.0.0.1:1\", \
                    allowInsecureHttp: true}\n  credentials: {secretRef: {name: s, key: k}}\n  scope: {userId: u, \
                    agentId: a}\n  nexent: {ingest: true}\n  access: {anonymous: true}\n---\napiVersion: v1\nkind: Secret\n\
                    metadata: {name: s, namespace: agents}\nstringData: {k: key}\n";
        let docs: Vec<_> = memgate_crds::manifest::documents(text)
            .expect("yaml")
            .into_iter()
            .map(|(i, v)| (format!("t#{i}"), v))
            .collect();
        let snapshot = crate::config::build_snapshot(&docs, &Default::default()).expect("valid");
        std::sync::Arc::clone(snapshot.provider("p").expect("served"))
    }

    fn three() -> IngestRequest {
        request((0..3).map(|i| unit(&format!("e{i}"), None, "content")).collect())
    }

    /// No unit starts after the call's deadline or once the caller is gone: nothing is sent.
    #[tokio::test]
    async fn a_call_past_its_deadline_or_cancelled_starts_no_unit() {
        let engine = Engine::new(crate::engine::EngineConfig::default()).expect("engine");
        let provider = unreachable_provider();
        let ledger = MemoryLedger::default();
        let past = CallControl { deadline: Instant::now(), cancelled: CancellationToken::new() };
        let err = ingest_controlled(&engine, &provider, &provider.target, &ledger, three(), &past).await;
        assert_eq!(err.unwrap_err(), IngestError::DeadlineExceeded { written: 0 });
        let gone = CallControl::new(Duration::from_secs(60), CancellationToken::new());
        gone.cancelled.cancel();
        let err = ingest_controlled(&engine, &provider, &provider.target, &ledger, three(), &gone).await;
        assert_eq!(err.unwrap_err(), IngestError::Cancelled { written: 0 });
        assert!(ledger.is_empty(), "no unit was claimed");
        let live = CallControl::default();
        let err = ingest_controlled(&engine, &provider, &provider.target, &ledger, three(), &live).await;
        assert!(matches!(err, Err(IngestError::Upstream { error: EngineError::Connect, .. })), "{err:?}");
    }

    fn unit(event_id: &str, index: Option<i64>, content: &str) -> IngestUnit {
        IngestUnit {
            event_id: event_id.into(),
            event_type: "message".into(),
            unit_type: "fact".into(),
            unit_content: content.into(),
            unit_index: index,
            metadata: Map::new(),
        }
    }

    fn request(units: Vec<IngestUnit>) -> IngestRequest {
        IngestRequest {
            tenant_id: "t".into(),
            user_id: "u".into(),
            agent_id: None,
            conversation_id: None,
            units,
            idempotency_key: "nexent:t:a:u:c:message:e".into(),
            metadata: Map::new(),
        }
    }

    #[test]
    fn bounds_are_enforced_without_echoing_values() {
        assert_eq!(validate(&request(vec![unit("e", None, "fine")])), Ok(()));
        assert_eq!(validate(&request(Vec::new())), Ok(()));
        let at_bound: Vec<IngestUnit> = (0..MAX_UNITS).map(|i| unit(&format!("e{i}"), None, "x")).collect();
        assert_eq!(validate(&request(at_bound)), Ok(()));
        assert_eq!(validate(&request(vec![unit("e", None, &"é".repeat(MAX_CONTENT_CHARS))])), Ok(()));
        assert_eq!(validate(&request(vec![unit("e", Some(0), "a"), unit("e", Some(1), "b")])), Ok(()));

        let secret = "secret-content-5b2e";
        let too_many: Vec<IngestUnit> = (0..=MAX_UNITS).map(|i| unit(&format!("e{i}"), None, secret)).collect();
        let mut blank_key = request(vec![unit("e", None, secret)]);
        blank_key.idempotency_key = " ".into();
        let cases = [
            request(too_many),
            blank_key,
            request(vec![unit("", None, secret)]),
            request(vec![unit(&"e".repeat(MAX_ID_CHARS + 1), None, secret)]),
            request(vec![unit("e", None, " \n")]),
            request(vec![unit("e", None, &format!("{secret}{}", "x".repeat(MAX_CONTENT_CHARS)))]),
            request(vec![unit("e", None, secret), unit("e", None, secret)]),
        ];
        for case in cases {
            let err = validate(&case).expect_err("refused");
            assert_eq!((err.code(), err.severity()), (ErrorCode::InvalidPayload, Severity::NonRetryable));
            assert!(!err.to_string().contains(secret));
        }
    }

    fn provider(bind: bool) -> Provider {
        let builtin = memgate_presets::get("mem0-oss-rest-2026-08").expect("built-in dialect");
        Provider {
            name: "repo-memory".into(),
            namespace: "agents".into(),
            dialect_id: builtin.id.clone(),
            dialect: builtin.spec.clone(),
            encoding: builtin.content_encoding,
            write: builtin.write.clone(),
            target: Target {
                origin: "https://memory.example.com".into(),
                base_path: String::new(),
                scope: memgate_crds::Scope { user_id: Some("configured".into()), ..Default::default() },
                credential: memgate_crds::validation::credential_value("test", b"k").expect("credential"),
                timeout: Duration::from_secs(5),
                max_in_flight: None,
                urls: UrlCache::default(),
            },
            mcp: false,
            nexent_search: true,
            nexent_ingest: true,
            access: crate::config::Access { bind_user_id_to_subject: bind, ..Default::default() },
            limits: None,
            series: Default::default(),
            key_text: Default::default(),
        }
    }

    fn key(provider: &Provider, user: Option<&str>) -> LedgerKey {
        let mut target = provider.target.clone();
        if let Some(user) = user {
            target.scope.user_id = Some(user.into());
        }
        LedgerKey {
            provider: ledger_provider(provider, &target),
            idempotency_key: "nexent:t:a:u:c:message:e".into(),
            event_id: "e".into(),
            unit_index: None,
        }
    }

    #[test]
    fn ledger_key_holds_the_bound_caller_only_when_binding_is_on() {
        let bound = provider(true);
        let (a, b) = (key(&bound, Some("system:serviceaccount:ns:a")), key(&bound, Some("system:serviceaccount:ns:b")));
        assert_eq!(a.provider, "agents/repo-memory\0system:serviceaccount:ns:a");
        assert_ne!(a, b);
        assert_ne!(a.digest(), b.digest(), "another caller reusing the idempotency key gets its own record");
        assert_eq!(a, key(&bound, Some("system:serviceaccount:ns:a")), "the same caller's retry finds its record");

        // Without binding every caller writes into the configured scope: the key is unchanged.
        let unbound = provider(false);
        assert_eq!(key(&unbound, None).provider, "agents/repo-memory");
        assert_eq!(key(&unbound, Some("ignored")).provider, "agents/repo-memory");
    }

    #[test]
    fn errors_carry_nexent_classification() {
        let rate = IngestError::Upstream {
            error: EngineError::RateLimited { retry_after_seconds: Some(9) },
            accepted_before: 2,
        };
        assert_eq!(
            (rate.code(), rate.severity(), rate.retry_after_seconds()),
            (ErrorCode::RateLimited, Severity::Retryable, Some(9))
        );
        let auth = IngestError::Upstream { error: EngineError::Unauthorized, accepted_before: 0 };
        assert_eq!((auth.code(), auth.severity()), (ErrorCode::Unauthorized, Severity::NonRetryable));
        assert_eq!(IngestError::InProgress.severity(), Severity::Retryable);
        assert_eq!(IngestError::Ledger(LedgerError::Unavailable).code(), ErrorCode::ProviderError);
        assert_eq!(IngestError::NotWritable.severity(), Severity::NonRetryable);
    }
}
