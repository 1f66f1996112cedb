//! Per-caller and upstream limits of a provider (`spec.limits`), enforced on every call.
//!
//! | limit | bucket key | cost | where it holds |
//! |---|---|---|---|
//! | `perCaller` | provider + verified caller | 1 per search or MCP tool call | all replicas (Redis), else per replica |
//! | `perCallerIngest` | provider + verified caller | 1 per ingest unit | all replicas (Redis), else per replica |
//! | `upstream.requestsPerSecond` | provider | 1 per search, 1 per ingest unit | all replicas (Redis), else per replica |
//! | `upstream.maxInFlight` | provider | one slot per call | per replica, always |
//!
//! The caller is its verified identity ([`crate::auth::CallerIdentity`]'s audit form); anonymous
//! callers share one bucket per client address. Every rate is a token bucket ([`bucket`]). With a
//! Redis store ([`SharedBuckets`]) the buckets are shared by the replicas; while the store is
//! unavailable (a command failed or took longer than [`shared::COMMAND_TIMEOUT`]) each replica
//! enforces every limit on its own for [`STORE_PAUSE`] before trying the store again, so `n`
//! replicas allow up to `n` times a limit meanwhile, and no call waits on a dead store. A call over
//! `maxInFlight` waits for a slot for at most half the provider's timeout.

pub mod bucket;
pub mod local;
pub mod shared;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::auth::{Caller, CallerIdentity};
use crate::config::Provider;
use crate::metrics::LimitCounters;
pub use bucket::{Answer, Rate, Verdict, retry_after_seconds};
pub use local::LocalBuckets;
pub use shared::SharedBuckets;

/// How long a replica uses only its own buckets after the Redis store failed.
pub const STORE_PAUSE: Duration = Duration::from_secs(5);

/// Which limit refused a call (the `limit` label and the audit event's `limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// `spec.limits.perCaller`.
    PerCaller,
    /// `spec.limits.perCallerIngest`.
    PerCallerIngest,
    /// `spec.limits.upstream.requestsPerSecond`.
    UpstreamRate,
    /// `spec.limits.upstream.maxInFlight`.
    UpstreamInFlight,
}

impl Limit {
    /// The wire word: `per_caller`, `per_caller_ingest`, `upstream_rate`, `upstream_in_flight`.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::PerCaller => "per_caller",
            Limit::PerCallerIngest => "per_caller_ingest",
            Limit::UpstreamRate => "upstream_rate",
            Limit::UpstreamInFlight => "upstream_in_flight",
        }
    }
}

/// A call refused by a limit: nothing was sent upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// The limit.
    pub limit: Limit,
    /// Whole seconds until the call could pass (at least 1).
    pub retry_after_seconds: u64,
}

/// A call let through: holds its `maxInFlight` slot until dropped.
#[derive(Debug, Default)]
pub struct Admission {
    _slot: Option<OwnedSemaphorePermit>,
}

/// The gateway's limits: its buckets (local, and shared when a Redis store is configured) and the
/// providers' `maxInFlight` slots.
#[derive(Debug)]
pub struct Limiter {
    local: LocalBuckets,
    shared: Option<SharedBuckets>,
    store_paused_until: Mutex<Option<Instant>>,
    slots: Mutex<HashMap<String, (u32, Arc<Semaphore>)>>,
    counters: LimitCounters,
}

impl Limiter {
    /// Limits kept in this process, counted in `counters`.
    pub fn new(counters: LimitCounters) -> Limiter {
        Limiter {
            local: LocalBuckets::default(),
            shared: None,
            store_paused_until: Mutex::new(None),
            slots: Mutex::default(),
            counters,
        }
    }

    /// Share the rate limits with the other replicas through `shared`.
    pub fn with_shared(mut self, shared: SharedBuckets) -> Limiter {
        self.shared = Some(shared);
        self
    }

    /// Admit one search or MCP tool call of `caller` to `provider`.
    pub async fn admit_search(&self, provider: &Provider, caller: &Caller) -> Result<Admission, Limited> {
        let Some(limits) = &provider.limits else { return Ok(Admission::default()) };
        if let Some(rate) = &limits.per_caller {
            let rate = Rate::per(rate.requests_per_minute, Duration::from_secs(60), rate.burst());
            self.take(provider, Limit::PerCaller, &caller_key(caller), rate, 1).await?;
        }
        self.admit_upstream(provider, 1).await
    }

    /// Admit one ingest of `units` units of `caller` to `provider`.
    pub async fn admit_ingest(&self, provider: &Provider, caller: &Caller, units: u64) -> Result<Admission, Limited> {
        let Some(limits) = &provider.limits else { return Ok(Admission::default()) };
        if let Some(rate) = &limits.per_caller_ingest {
            let rate = Rate::per(rate.units_per_hour, Duration::from_secs(3600), rate.burst());
            self.take(provider, Limit::PerCallerIngest, &caller_key(caller), rate, units.max(1)).await?;
        }
        self.admit_upstream(provider, units.max(1)).await
    }

    async fn admit_upstream(&self, provider: &Provider, cost: u64) -> Result<Admission, Limited> {
        let Some(upstream) = provider.limits.as_ref().and_then(|l| l.upstream) else {
            return Ok(Admission::default());
        };
        if let Some(per_second) = upstream.requests_per_second {
            let rate = Rate::per(per_second, Duration::from_secs(1), per_second);
            self.take(provider, Limit::UpstreamRate, "", rate, cost).await?;
        }
        let Some(max) = upstream.max_in_flight else { return Ok(Admission::default()) };
        let semaphore = self.slots_of(provider.key(), max);
        let wait = provider.target.timeout / 2;
        match tokio::time::timeout(wait, semaphore.acquire_owned()).await {
            Ok(Ok(slot)) => Ok(Admission { _slot: Some(slot) }),
            // Timed out (the semaphore is never closed).
            _ => Err(self.refused(provider, Limit::UpstreamInFlight, 1)),
        }
    }

    /// The `maxInFlight` semaphore of `provider`, replaced when the configured size changed (calls
    /// holding a slot of the old one finish on it).
    fn slots_of(&self, provider: &str, max: u32) -> Arc<Semaphore> {
        let mut slots = self.slots.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match slots.get(provider) {
            Some((size, semaphore)) if *size == max => Arc::clone(semaphore),
            _ => {
                let semaphore = Arc::new(Semaphore::new(usize::try_from(max).unwrap_or(1).max(1)));
                slots.insert(provider.to_string(), (max, Arc::clone(&semaphore)));
                semaphore
            }
        }
    }

    /// Take `cost` tokens from `provider`'s bucket of `limit` for `caller_key`.
    async fn take(
        &self,
        provider: &Provider,
        limit: Limit,
        caller_key: &str,
        rate: Rate,
        cost: u64,
    ) -> Result<(), Limited> {
        let key = format!("{}|{}|{caller_key}", provider.key(), limit.as_str());
        match self.decide(&key, rate, cost).await {
            Answer::Allowed => Ok(()),
            Answer::Refused { retry_after_us } => {
                Err(self.refused(provider, limit, retry_after_seconds(retry_after_us)))
            }
        }
    }

    async fn decide(&self, key: &str, rate: Rate, cost: u64) -> Answer {
        if let Some(shared) = &self.shared
            && !self.store_paused()
        {
            match shared.take(key, rate, cost).await {
                Ok(verdict) => return verdict,
                Err(_) => {
                    tracing::warn!(
                        pause_seconds = STORE_PAUSE.as_secs(),
                        "limit store unavailable; limits held per replica meanwhile"
                    );
                    *self.store_paused_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(Instant::now() + STORE_PAUSE);
                }
            }
        }
        if self.shared.is_some() {
            self.counters.fallback();
        }
        let (verdict, untracked) = self.local.take(key, rate, cost, now_us());
        if untracked {
            tracing::warn!("limit table full; a caller's call was allowed untracked");
        }
        verdict.into()
    }

    fn store_paused(&self) -> bool {
        let paused = self.store_paused_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        paused.is_some_and(|until| Instant::now() < until)
    }

    fn refused(&self, provider: &Provider, limit: Limit, retry_after_seconds: u64) -> Limited {
        self.counters.limited(&provider.name, limit.as_str());
        Limited { limit, retry_after_seconds }
    }
}

/// The bucket key of `caller`: its verified identity; anonymous callers by client address.
pub fn caller_key(caller: &Caller) -> String {
    match (&caller.identity, caller.client) {
        (CallerIdentity::Anonymous, Some(address)) => format!("anonymous@{address}"),
        (identity, _) => identity.to_string(),
    }
}

fn now_us() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_keyed_by_identity_and_anonymous_ones_by_address() {
        let sa = Caller {
            identity: CallerIdentity::ServiceAccount { namespace: "team-a".into(), name: "agent".into() },
            client: Some([10, 0, 0, 7].into()),
            ..Caller::default()
        };
        assert_eq!(caller_key(&sa), "serviceaccount:team-a:agent");
        let anonymous = Caller { client: Some([10, 0, 0, 7].into()), ..Caller::default() };
        assert_eq!(caller_key(&anonymous), "anonymous@10.0.0.7");
        assert_eq!(caller_key(&Caller::default()), "anonymous");
    }

    #[test]
    fn limit_words_are_the_documented_ones() {
        let words: Vec<_> = [Limit::PerCaller, Limit::PerCallerIngest, Limit::UpstreamRate, Limit::UpstreamInFlight]
            .map(Limit::as_str)
            .into();
        assert_eq!(words, ["per_caller", "per_caller_ingest", "upstream_rate", "upstream_in_flight"]);
    }
}
