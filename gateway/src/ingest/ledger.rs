//! The idempotency ledger: what became of each unit, so a retried request never writes it twice.
//!
//! ```text
//! (provider, idempotency_key, event_id[, unit_index]) -> in progress (token, until) | accepted | rejected | degraded
//! ```
//!
//! A unit is written only by the caller holding its claim. [`Ledger::claim`] is atomic: it returns
//! the recorded outcome ([`Claim::Done`]), reports another unexpired claim ([`Claim::Busy`]), or
//! takes the unit ([`Claim::Claimed`]). The holder then [`Ledger::record`]s the outcome, or
//! [`Ledger::release`]s the claim when the call failed before anything could be stored.
//!
//! Policies shared by every implementation ([`decide`]):
//! - accepted and rejected are final: returned as recorded, never re-sent.
//! - degraded (stored or not is unknown) is returned as recorded, unless the claim asks to retake it
//!   (`retake_degraded`, used when the upstream itself drops exact repeats): then it is claimed
//!   again and, if that attempt fails at call level, restored on release.
//! - a claim whose holder neither recorded nor released by its `until` time (crash, cancelled call,
//!   ledger outage mid-write) is treated exactly like degraded: the write may have happened.
//! - entries live for the result TTL (default 24 h) after their last change.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::{BoxFuture, FutureExt, ready};
use sha2::{Digest, Sha256};

/// How long an outcome is remembered: Nexent's retries come within minutes; a day is generous.
pub const DEFAULT_RESULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Most entries a [`MemoryLedger`] holds per provider before evicting that provider's oldest.
pub const DEFAULT_MAX_ENTRIES: usize = 20_000;
/// How long an entry is safe from eviction: longer than Nexent can take to send its last retry.
///
/// Nexent's `execute_with_retry` (ModelEngine-Group/nexent `sdk/nexent/memory/providers/retry.py`,
/// `RetryConfig` defaults) makes 3 attempts and sleeps `1 s * 2^(n-1)`, capped at 30 s, times a
/// jitter of 0.5..1.5 between them: at most 1.5 s + 3 s. Each attempt lasts at most the plugin's
/// timeout (Nexent's `timeout_seconds`, default 30 s; memgate's provider timeout is at most 30 s)
/// plus the 1 s the memgate plugin adds. So the last retry starts within 3 x 31 s + 4.5 s = 97.5 s
/// of the first attempt; 120 s leaves a margin.
pub const DEFAULT_RETRY_WINDOW: Duration = Duration::from_secs(120);
/// Reason reported for a unit whose earlier attempt never finished.
pub const REASON_ABANDONED: &str = "an earlier attempt did not finish; the unit may or may not be stored";
/// Reason reported for a ledger entry that cannot be read.
pub const REASON_UNREADABLE: &str =
    "the idempotency record of this unit cannot be read; the unit may or may not be stored";

/// The ledger could not be used; fixed text, never the store's address or error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// The shared store did not answer in time or refused the command.
    #[error("the idempotency ledger is unavailable")]
    Unavailable,
    /// The shared store's URL is not a usable `redis://` or `rediss://` URL.
    #[error("the idempotency ledger URL must be a redis:// or rediss:// (TLS) URL with a host")]
    InvalidUrl,
    /// The provider's share of the ledger holds only entries inside the retry window: nothing can
    /// be forgotten safely, so no new unit is taken.
    #[error("the idempotency ledger is full for this provider")]
    Full {
        /// Seconds until the provider's oldest entry leaves the retry window.
        retry_after_seconds: u64,
    },
}

/// Identity of one unit of one ingest request at one provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LedgerKey {
    /// `namespace/name` of the provider, followed by `\0` and the caller-bound upstream `user_id`
    /// when the provider binds it to the caller's subject (see [`crate::ingest::ledger_provider`]).
    pub provider: String,
    /// Nexent `idempotency_key`.
    pub idempotency_key: String,
    /// Nexent `event_id` of the unit.
    pub event_id: String,
    /// Nexent `unit_index`, which tells apart units sharing an `event_id`.
    pub unit_index: Option<i64>,
}

impl LedgerKey {
    /// The provider whose capacity this unit counts against: `namespace/name`, without the
    /// caller-bound user id that [`crate::ingest::ledger_provider`] may append.
    pub fn share(&self) -> &str {
        self.provider.split('\0').next().unwrap_or_default()
    }

    /// Hex SHA-256 over the length-prefixed fields (no separator can make two keys collide); the
    /// stored key never holds the idempotency key or event id in clear.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for field in [self.provider.as_str(), self.idempotency_key.as_str(), self.event_id.as_str()] {
            hasher.update((field.len() as u64).to_be_bytes());
            hasher.update(field.as_bytes());
        }
        match self.unit_index {
            Some(index) => {
                hasher.update([1]);
                hasher.update(index.to_be_bytes());
            }
            None => hasher.update([0]),
        }
        crate::hex::lower_hex(&hasher.finalize())
    }
}

/// A recorded unit outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Stored or queued upstream.
    Accepted,
    /// Refused upstream.
    Rejected {
        /// Fixed text.
        reason: String,
    },
    /// Stored or not is unknown.
    Degraded {
        /// Fixed text.
        reason: String,
    },
}

/// Proof of holding a unit's claim; opaque.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimToken(String);

/// What [`Ledger::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the unit: write it, then record or release.
    Claimed {
        /// Needed to release.
        token: ClaimToken,
        /// The degraded outcome being retried, restored if the retry fails at call level.
        replaces: Option<Recorded>,
    },
    /// The outcome is recorded: return it, write nothing.
    Done(Recorded),
    /// Another caller holds an unexpired claim.
    Busy,
}

/// How to claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimPolicy {
    /// How long the claim holds before it counts as abandoned (degraded).
    pub hold_for: Duration,
    /// Claim a degraded unit again (only safe when the upstream drops exact repeats).
    pub retake_degraded: bool,
}

/// Where unit outcomes are kept. Implementations must make `claim` atomic across every gateway
/// replica that shares them.
pub trait Ledger: Send + Sync {
    /// Look the unit up and, when free, claim it (see [`Claim`]).
    fn claim<'a>(&'a self, key: &'a LedgerKey, policy: ClaimPolicy) -> BoxFuture<'a, Result<Claim, LedgerError>>;

    /// Record the unit's outcome (replacing the claim); kept for the result TTL.
    fn record<'a>(&'a self, key: &'a LedgerKey, outcome: &'a Recorded) -> BoxFuture<'a, Result<(), LedgerError>>;

    /// Give the claim up when nothing was stored: the unit becomes free again, or `restore` (the
    /// degraded outcome it replaced) is put back. Does nothing when the claim is no longer held.
    fn release<'a>(
        &'a self,
        key: &'a LedgerKey,
        token: &'a ClaimToken,
        restore: Option<&'a Recorded>,
    ) -> BoxFuture<'a, Result<(), LedgerError>>;
}

/// One stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// Claimed by the holder of `token` until `until_ms` (Unix milliseconds).
    InProgress { until_ms: u64, token: String },
    /// Outcome known.
    Done(Recorded),
}

impl Entry {
    /// Text form: `P|<until_ms>|<token>`, `A`, `R|<reason>`, `D|<reason>`.
    pub(crate) fn encode(&self) -> String {
        match self {
            Entry::InProgress { until_ms, token } => format!("P|{until_ms}|{token}"),
            Entry::Done(Recorded::Accepted) => "A".to_string(),
            Entry::Done(Recorded::Rejected { reason }) => format!("R|{reason}"),
            Entry::Done(Recorded::Degraded { reason }) => format!("D|{reason}"),
        }
    }

    /// Parse [`Entry::encode`]'s form; `None` for anything else.
    pub(crate) fn decode(text: &str) -> Option<Entry> {
        if text == "A" {
            return Some(Entry::Done(Recorded::Accepted));
        }
        let (tag, rest) = text.split_once('|')?;
        match tag {
            "R" => Some(Entry::Done(Recorded::Rejected { reason: rest.to_string() })),
            "D" => Some(Entry::Done(Recorded::Degraded { reason: rest.to_string() })),
            "P" => {
                let (until, token) = rest.split_once('|')?;
                Some(Entry::InProgress { until_ms: until.parse().ok()?, token: token.to_string() })
            }
            _ => None,
        }
    }
}

/// What to do with a unit given its current entry (the policy, shared by every ledger).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Free: claim it.
    Take,
    /// Degraded (or abandoned) and retaking is allowed: claim it, remembering this outcome.
    Retake(Recorded),
    /// Return this outcome.
    Done(Recorded),
    /// Someone else holds it.
    Busy,
}

/// The policy of the module doc, for `existing` at `now_ms`.
pub(crate) fn decide(existing: Option<&Entry>, now_ms: u64, retake_degraded: bool) -> Decision {
    let degraded = |reason: &str| {
        let recorded = Recorded::Degraded { reason: reason.to_string() };
        if retake_degraded { Decision::Retake(recorded) } else { Decision::Done(recorded) }
    };
    match existing {
        None => Decision::Take,
        Some(Entry::InProgress { until_ms, .. }) if *until_ms > now_ms => Decision::Busy,
        Some(Entry::InProgress { .. }) => degraded(REASON_ABANDONED),
        Some(Entry::Done(Recorded::Degraded { reason })) => degraded(reason),
        Some(Entry::Done(recorded)) => Decision::Done(recorded.clone()),
    }
}

/// Milliseconds since the Unix epoch (wall clock: shared between replicas).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A claim marker valid for `hold_for` from now, with a token unique across processes.
pub(crate) fn new_claim(hold_for: Duration) -> Entry {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let token = format!("{:016x}{:016x}", hasher.finish(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let hold = u64::try_from(hold_for.as_millis()).unwrap_or(u64::MAX);
    Entry::InProgress { until_ms: now_ms().saturating_add(hold), token }
}

/// The in-process ledger: the default for a single gateway replica.
///
/// Bounded per provider ([`LedgerKey::share`]): each provider holds at most `max_entries` entries,
/// each kept `ttl` after its last change, so a flood of one provider's units can only evict that
/// provider's own records. Beyond the bound the provider's least recently changed entry is
/// evicted, but never one changed within the retry window ([`DEFAULT_RETRY_WINDOW`]): when every
/// entry of the provider is that young, a new claim is refused with [`LedgerError::Full`] (a
/// retryable `rate_limited` for the caller, with the seconds until the oldest entry leaves the
/// window) instead of forgetting a unit Nexent may still retry. Lost on restart (a retry after a
/// restart may write again); use [`super::RedisLedger`] for several replicas or when one
/// provider's volume needs more than the bound.
#[derive(Debug)]
pub struct MemoryLedger {
    ttl: Duration,
    max_entries: usize,
    retry_window: Duration,
    inner: Mutex<HashMap<String, Share>>,
}

/// The entries of one provider.
#[derive(Debug, Default)]
struct Share {
    /// digest -> (entry, changed at, change sequence number).
    entries: HashMap<String, (Entry, Instant, u64)>,
    /// (digest, sequence number) in change order; stale pairs are skipped.
    order: VecDeque<(String, u64)>,
    next_seq: u64,
}

impl Default for MemoryLedger {
    fn default() -> Self {
        MemoryLedger::new(DEFAULT_RESULT_TTL, DEFAULT_MAX_ENTRIES)
    }
}

impl MemoryLedger {
    /// A ledger keeping entries `ttl` and at most `max_entries` (at least 1) of them per provider,
    /// never evicting one younger than [`DEFAULT_RETRY_WINDOW`].
    pub fn new(ttl: Duration, max_entries: usize) -> MemoryLedger {
        MemoryLedger {
            ttl,
            max_entries: max_entries.max(1),
            retry_window: DEFAULT_RETRY_WINDOW,
            inner: Mutex::default(),
        }
    }

    /// The same ledger protecting entries younger than `window` from eviction instead.
    pub fn with_retry_window(mut self, window: Duration) -> MemoryLedger {
        self.retry_window = window;
        self
    }

    /// Entries currently held, all providers together (expired ones may still count until the next
    /// change of their provider).
    pub fn len(&self) -> usize {
        self.lock().values().map(|share| share.entries.len()).sum()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Share>> {
        // Every change below leaves the maps consistent before it can panic.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn claim_now(&self, key: &LedgerKey, policy: ClaimPolicy) -> Result<Claim, LedgerError> {
        let digest = key.digest();
        let mut shares = self.lock();
        let share = shares.entry(key.share().to_string()).or_default();
        let now = Instant::now();
        share.expire(now, self.ttl);
        let existing = share.entries.get(&digest).map(|(entry, _, _)| entry);
        let replaces = match decide(existing, now_ms(), policy.retake_degraded) {
            Decision::Busy => return Ok(Claim::Busy),
            Decision::Done(recorded) => return Ok(Claim::Done(recorded)),
            Decision::Take => None,
            Decision::Retake(recorded) => Some(recorded),
        };
        if !share.entries.contains_key(&digest) {
            share.make_room(now, self.max_entries, self.retry_window)?;
        }
        let claim = new_claim(policy.hold_for);
        let token = ClaimToken(claim.encode());
        share.put(digest, claim, now);
        Ok(Claim::Claimed { token, replaces })
    }

    fn record_now(&self, key: &LedgerKey, outcome: &Recorded) {
        let digest = key.digest();
        let mut shares = self.lock();
        let share = shares.entry(key.share().to_string()).or_default();
        let now = Instant::now();
        share.expire(now, self.ttl);
        if !share.entries.contains_key(&digest) && share.make_room(now, self.max_entries, self.retry_window).is_err() {
            // The claim was evicted meanwhile and no room is left: the outcome is not kept, so a
            // retry finds the unit free; only reachable when the claim outlived the window.
            return;
        }
        share.put(digest, Entry::Done(outcome.clone()), now);
    }

    fn release_now(&self, key: &LedgerKey, token: &ClaimToken, restore: Option<&Recorded>) {
        let digest = key.digest();
        let mut shares = self.lock();
        let Some(share) = shares.get_mut(key.share()) else { return };
        let held = share.entries.get(&digest).is_some_and(|(entry, _, _)| entry.encode() == token.0);
        if !held {
            return;
        }
        match restore {
            Some(outcome) => share.put(digest, Entry::Done(outcome.clone()), Instant::now()),
            None => {
                share.entries.remove(&digest);
            }
        }
    }
}

impl Share {
    /// Insert or replace `digest` (the caller made room for a new one).
    fn put(&mut self, digest: String, entry: Entry, now: Instant) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(digest.clone(), (entry, now, seq));
        self.order.push_back((digest, seq));
        // Keep the order queue bounded by dropping stale pairs once it doubles the map.
        if self.order.len() > 2 * self.entries.len() + 16 {
            let entries = &self.entries;
            self.order.retain(|(digest, seq)| entries.get(digest).is_some_and(|(_, _, s)| s == seq));
        }
    }

    /// Make room for one more entry: evict least recently changed entries older than `window`
    /// until fewer than `max_entries` remain; [`LedgerError::Full`] when the oldest is too young.
    fn make_room(&mut self, now: Instant, max_entries: usize, window: Duration) -> Result<(), LedgerError> {
        while self.entries.len() >= max_entries {
            let Some((oldest, seq)) = self.order.front().cloned() else { break };
            match self.entries.get(&oldest) {
                Some((_, changed, s)) if *s == seq => {
                    let age = now.duration_since(*changed);
                    if age < window {
                        let wait = (window - age).as_secs_f64().ceil();
                        // `wait` is at most the window in seconds: small and positive.
                        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                        let retry_after_seconds = (wait as u64).max(1);
                        return Err(LedgerError::Full { retry_after_seconds });
                    }
                    self.entries.remove(&oldest);
                }
                _ => {}
            }
            self.order.pop_front();
        }
        Ok(())
    }

    fn expire(&mut self, now: Instant, ttl: Duration) {
        while let Some((oldest, seq)) = self.order.front() {
            match self.entries.get(oldest) {
                Some((_, changed, s)) if s == seq => {
                    if now.duration_since(*changed) < ttl {
                        break;
                    }
                    self.entries.remove(oldest);
                }
                _ => {}
            }
            self.order.pop_front();
        }
    }
}

impl Ledger for MemoryLedger {
    fn claim<'a>(&'a self, key: &'a LedgerKey, policy: ClaimPolicy) -> BoxFuture<'a, Result<Claim, LedgerError>> {
        ready(self.claim_now(key, policy)).boxed()
    }

    fn record<'a>(&'a self, key: &'a LedgerKey, outcome: &'a Recorded) -> BoxFuture<'a, Result<(), LedgerError>> {
        self.record_now(key, outcome);
        ready(Ok(())).boxed()
    }

    fn release<'a>(
        &'a self,
        key: &'a LedgerKey,
        token: &'a ClaimToken,
        restore: Option<&'a Recorded>,
    ) -> BoxFuture<'a, Result<(), LedgerError>> {
        self.release_now(key, token, restore);
        ready(Ok(())).boxed()
    }
}

impl ClaimToken {
    /// The stored claim marker this token proves.
    pub(crate) fn marker(&self) -> &str {
        &self.0
    }

    /// The token of a claim marker.
    pub(crate) fn from_marker(marker: String) -> ClaimToken {
        ClaimToken(marker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(event: &str) -> LedgerKey {
        LedgerKey { provider: "ns/p".into(), idempotency_key: "k".into(), event_id: event.into(), unit_index: None }
    }

    const HOLD: ClaimPolicy = ClaimPolicy { hold_for: Duration::from_secs(60), retake_degraded: false };
    const RETAKE: ClaimPolicy = ClaimPolicy { hold_for: Duration::from_secs(60), retake_degraded: true };

    fn degraded(reason: &str) -> Recorded {
        Recorded::Degraded { reason: reason.into() }
    }

    #[test]
    fn digest_separates_fields_and_hides_them() {
        let a =
            LedgerKey { provider: "p".into(), idempotency_key: "a|b".into(), event_id: "c".into(), unit_index: None };
        let b =
            LedgerKey { provider: "p".into(), idempotency_key: "a".into(), event_id: "b|c".into(), unit_index: None };
        assert_ne!(a.digest(), b.digest());
        let indexed = LedgerKey { unit_index: Some(0), ..a.clone() };
        assert_ne!(a.digest(), indexed.digest());
        assert_eq!(a.digest().len(), 64);
        assert!(!a.digest().contains("a|b"));
    }

    #[test]
    fn entries_round_trip_and_garbage_is_refused() {
        let entries = [
            Entry::InProgress { until_ms: 42, token: "t|x".into() },
            Entry::Done(Recorded::Accepted),
            Entry::Done(Recorded::Rejected { reason: "r|s".into() }),
            Entry::Done(degraded("d")),
        ];
        for entry in entries {
            assert_eq!(Entry::decode(&entry.encode()), Some(entry));
        }
        for garbage in ["", "X|y", "P|soon|t", "P|12", "accepted"] {
            assert_eq!(Entry::decode(garbage), None, "{garbage}");
        }
    }

    #[test]
    fn policy_table() {
        let live = Entry::InProgress { until_ms: 2_000, token: "t".into() };
        let abandoned = Entry::InProgress { until_ms: 500, token: "t".into() };
        let d = Entry::Done(degraded("unknown"));
        let accepted = Entry::Done(Recorded::Accepted);
        assert_eq!(decide(None, 1_000, false), Decision::Take);
        assert_eq!(decide(Some(&live), 1_000, true), Decision::Busy);
        assert_eq!(decide(Some(&abandoned), 1_000, false), Decision::Done(degraded(REASON_ABANDONED)));
        assert_eq!(decide(Some(&abandoned), 1_000, true), Decision::Retake(degraded(REASON_ABANDONED)));
        assert_eq!(decide(Some(&d), 1_000, false), Decision::Done(degraded("unknown")));
        assert_eq!(decide(Some(&d), 1_000, true), Decision::Retake(degraded("unknown")));
        assert_eq!(decide(Some(&accepted), 1_000, true), Decision::Done(Recorded::Accepted));
    }

    #[test]
    fn memory_ledger_claims_once_and_replays_the_outcome() {
        let ledger = MemoryLedger::default();
        let Claim::Claimed { token, replaces: None } = claim(&ledger, &key("e"), HOLD) else {
            panic!("first claim takes the unit")
        };
        assert_eq!(claim(&ledger, &key("e"), HOLD), Claim::Busy);
        ledger.record_now(&key("e"), &Recorded::Accepted);
        assert_eq!(claim(&ledger, &key("e"), RETAKE), Claim::Done(Recorded::Accepted));
        // Releasing a claim that was replaced by its outcome does nothing.
        ledger.release_now(&key("e"), &token, None);
        assert_eq!(claim(&ledger, &key("e"), HOLD), Claim::Done(Recorded::Accepted));
    }

    #[test]
    fn memory_ledger_release_frees_or_restores() {
        let ledger = MemoryLedger::default();
        let Claim::Claimed { token, .. } = claim(&ledger, &key("e"), HOLD) else { panic!("claims") };
        ledger.release_now(&key("e"), &token, None);
        assert!(matches!(claim(&ledger, &key("e"), HOLD), Claim::Claimed { replaces: None, .. }));

        ledger.record_now(&key("d"), &degraded("unknown"));
        assert_eq!(claim(&ledger, &key("d"), HOLD), Claim::Done(degraded("unknown")));
        let Claim::Claimed { token, replaces: Some(previous) } = claim(&ledger, &key("d"), RETAKE) else {
            panic!("a degraded unit is retaken when allowed")
        };
        ledger.release_now(&key("d"), &token, Some(&previous));
        assert_eq!(claim(&ledger, &key("d"), HOLD), Claim::Done(degraded("unknown")));
    }

    #[test]
    fn abandoned_claim_counts_as_degraded() {
        let ledger = MemoryLedger::default();
        let short = ClaimPolicy { hold_for: Duration::ZERO, retake_degraded: false };
        assert!(matches!(claim(&ledger, &key("e"), short), Claim::Claimed { .. }));
        assert_eq!(claim(&ledger, &key("e"), HOLD), Claim::Done(degraded(REASON_ABANDONED)));
    }

    fn claim(ledger: &MemoryLedger, key: &LedgerKey, policy: ClaimPolicy) -> Claim {
        ledger.claim_now(key, policy).expect("the ledger has room")
    }

    fn key_of(provider: &str, event: &str) -> LedgerKey {
        LedgerKey { provider: provider.into(), idempotency_key: "k".into(), event_id: event.into(), unit_index: None }
    }

    #[test]
    fn memory_ledger_is_bounded_and_evicts_the_oldest_outside_the_window() {
        let ledger = MemoryLedger::new(DEFAULT_RESULT_TTL, 3).with_retry_window(Duration::ZERO);
        for event in ["a", "b", "c", "d"] {
            assert!(matches!(claim(&ledger, &key(event), HOLD), Claim::Claimed { .. }));
            ledger.record_now(&key(event), &Recorded::Accepted);
        }
        assert_eq!(ledger.len(), 3);
        assert!(matches!(claim(&ledger, &key("a"), HOLD), Claim::Claimed { .. }), "oldest evicted");
        assert_eq!(claim(&ledger, &key("d"), HOLD), Claim::Done(Recorded::Accepted));
        for round in 0..100 {
            ledger.record_now(&key(["b", "c", "d"][round % 3]), &Recorded::Accepted);
        }
        assert!(ledger.lock().values().all(|share| share.order.len() <= 2 * 3 + 16));
    }

    /// One provider's flood evicts only its own records: another provider's outcome survives.
    #[test]
    fn capacity_is_isolated_per_provider() {
        let ledger = MemoryLedger::new(DEFAULT_RESULT_TTL, 10).with_retry_window(Duration::ZERO);
        let victim = key_of("ns/a", "unit");
        assert!(matches!(claim(&ledger, &victim, HOLD), Claim::Claimed { .. }));
        ledger.record_now(&victim, &Recorded::Accepted);
        for i in 0..1000 {
            let flood = key_of("ns/b", &format!("flood-{i}"));
            assert!(matches!(claim(&ledger, &flood, HOLD), Claim::Claimed { .. }));
            ledger.record_now(&flood, &Recorded::Accepted);
        }
        assert_eq!(claim(&ledger, &victim, HOLD), Claim::Done(Recorded::Accepted));
        assert_eq!(ledger.len(), 11);
        // A caller-bound user id counts against its provider's share, not a share of its own.
        let bound = key_of("ns/b\0system:serviceaccount:x:y", "other");
        assert!(matches!(claim(&ledger, &bound, HOLD), Claim::Claimed { .. }));
        assert_eq!(ledger.len(), 11);
    }

    /// A full share whose entries are all inside the retry window refuses new units (retryable)
    /// instead of forgetting one Nexent may still retry; recorded units are still answered.
    #[test]
    fn a_full_share_refuses_new_units_inside_the_retry_window() {
        let ledger = MemoryLedger::new(DEFAULT_RESULT_TTL, 2);
        for event in ["a", "b"] {
            assert!(matches!(claim(&ledger, &key(event), HOLD), Claim::Claimed { .. }));
            ledger.record_now(&key(event), &Recorded::Accepted);
        }
        let Err(LedgerError::Full { retry_after_seconds }) = ledger.claim_now(&key("c"), HOLD) else {
            panic!("a third unit must be refused")
        };
        assert!((1..=DEFAULT_RETRY_WINDOW.as_secs()).contains(&retry_after_seconds), "{retry_after_seconds}");
        assert_eq!(claim(&ledger, &key("a"), HOLD), Claim::Done(Recorded::Accepted), "recorded units still answer");
        assert!(matches!(ledger.claim_now(&key_of("ns/other", "c"), HOLD), Ok(Claim::Claimed { .. })));
    }

    #[test]
    fn memory_ledger_forgets_after_the_ttl() {
        let ledger = MemoryLedger::new(Duration::ZERO, 10);
        ledger.record_now(&key("a"), &Recorded::Accepted);
        assert!(matches!(claim(&ledger, &key("a"), HOLD), Claim::Claimed { .. }));
    }

    #[test]
    fn tokens_are_unique() {
        let tokens: std::collections::HashSet<String> =
            (0..1000).map(|_| new_claim(Duration::from_secs(1)).encode()).collect();
        assert_eq!(tokens.len(), 1000);
    }
}
