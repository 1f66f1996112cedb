//! ServiceAccount token verification with the TokenReview API (`authentication.k8s.io/v1`).
//!
//! The review asks for exactly the provider's audience and the answer is only trusted when the API
//! server lists that audience back (it is audience-aware). Accepted verdicts are cached for
//! [`REVIEW_CACHE_TTL`] under a SHA-256 digest of audience and token, at most
//! [`REVIEW_CACHE_CAPACITY`] entries: the token itself is never stored, logged or formatted. A
//! revoked token may therefore keep working for up to the TTL. Rejections are cached apart, for
//! [`NEGATIVE_CACHE_TTL`] and at most [`NEGATIVE_CACHE_CAPACITY`] entries, so a caller repeating an
//! invalid token costs one review per TTL instead of one per request, and a flood of made-up tokens
//! can only push out other rejections, never a real caller's acceptance. At most
//! [`MAX_CONCURRENT_REVIEWS`] reviews run at once (a caller that cannot get a slot within
//! [`REVIEW_TIMEOUT`] is refused as unavailable). Failures to reach the API server are not cached.
//! `memgate_gateway_token_reviews_total` counts verdicts by `answered_by` (`cache`, `api_server`).
//! In a cluster the gateway needs only `create` on `tokenreviews`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::AuthError;
use crate::metrics::AuthChecks;

/// How long a review verdict is reused.
pub const REVIEW_CACHE_TTL: Duration = Duration::from_secs(30);
/// Most verdicts kept at once.
pub const REVIEW_CACHE_CAPACITY: usize = 4096;
/// Longest wait for the API server's answer (and for a free review slot).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Most TokenReview requests in flight at once.
pub const MAX_CONCURRENT_REVIEWS: usize = 8;
/// How long a rejection is reused.
pub const NEGATIVE_CACHE_TTL: Duration = Duration::from_secs(10);
/// Most rejections kept at once.
pub const NEGATIVE_CACHE_CAPACITY: usize = 4096;

/// The API server's verdict on one token for one audience.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// Valid for the audience; `username` as Kubernetes reports it.
    Authenticated {
        /// e.g. `system:serviceaccount:<ns>:<name>`.
        username: String,
    },
    /// Not valid (expired, revoked, unknown, or another audience).
    Rejected,
}

type Key = [u8; 32];

/// Reviews tokens through a Kubernetes client, with a small cache.
pub struct TokenReviewer {
    api: Api<TokenReview>,
    cache: Mutex<VerdictCache>,
    rejected: Mutex<VerdictCache>,
    slots: tokio::sync::Semaphore,
    counts: Option<AuthChecks>,
}

impl std::fmt::Debug for TokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenReviewer").finish_non_exhaustive()
    }
}

impl TokenReviewer {
    /// A reviewer using `client` with the default cache settings.
    pub fn new(client: kube::Client) -> TokenReviewer {
        TokenReviewer::with_cache(client, REVIEW_CACHE_TTL, REVIEW_CACHE_CAPACITY)
    }

    /// A reviewer keeping at most `capacity` verdicts for `ttl` each.
    pub fn with_cache(client: kube::Client, ttl: Duration, capacity: usize) -> TokenReviewer {
        TokenReviewer {
            api: Api::all(client),
            cache: Mutex::new(VerdictCache::new(ttl, capacity)),
            rejected: Mutex::new(VerdictCache::new(NEGATIVE_CACHE_TTL, NEGATIVE_CACHE_CAPACITY)),
            slots: tokio::sync::Semaphore::new(MAX_CONCURRENT_REVIEWS),
            counts: None,
        }
    }

    /// Count verdicts in `counts` (`memgate_gateway_token_reviews_total`).
    pub fn count_in(&mut self, counts: AuthChecks) {
        self.counts = Some(counts);
    }

    fn count(&self, answered_by: &'static str, verdict: &Result<Review, AuthError>) {
        let verdict = match verdict {
            Ok(Review::Authenticated { .. }) => "accepted",
            Ok(Review::Rejected) => "rejected",
            Err(_) => "unavailable",
        };
        if let Some(counts) = &self.counts {
            counts.review(answered_by, verdict);
        }
    }

    /// The verdict on `token` for `audience`, from a cache or the API server.
    pub async fn review(&self, token: &str, audience: &str) -> Result<Review, AuthError> {
        let key = cache_key(token, audience);
        let now = Instant::now();
        let cached = self.lock(&self.cache).get(&key, now).or_else(|| self.lock(&self.rejected).get(&key, now));
        if let Some(verdict) = cached {
            let verdict = Ok(verdict);
            self.count("cache", &verdict);
            return verdict;
        }
        let Ok(Ok(_slot)) = tokio::time::timeout(REVIEW_TIMEOUT, self.slots.acquire()).await else {
            tracing::warn!("token review slots exhausted; refusing the caller as unavailable");
            let verdict = Err(AuthError::Unavailable);
            self.count("api_server", &verdict);
            return verdict;
        };
        let verdict = self.ask(token, audience).await;
        self.count("api_server", &verdict);
        let verdict = verdict?;
        let cache = match verdict {
            Review::Authenticated { .. } => &self.cache,
            Review::Rejected => &self.rejected,
        };
        self.lock(cache).insert(key, verdict.clone(), Instant::now());
        Ok(verdict)
    }

    async fn ask(&self, token: &str, audience: &str) -> Result<Review, AuthError> {
        let request = TokenReview {
            spec: TokenReviewSpec { token: token.to_string(), audiences: Some(vec![audience.to_string()]) },
            ..TokenReview::default()
        };
        let answer = match tokio::time::timeout(REVIEW_TIMEOUT, self.api.create(&PostParams::default(), &request)).await
        {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => {
                // Only the category: an error's text is never needed to act and could echo a body.
                let status = match &err {
                    kube::Error::Api(status) => status.code,
                    _ => 0,
                };
                tracing::warn!(
                    api_status = status,
                    "token review failed; ServiceAccount callers are refused until it works"
                );
                return Err(AuthError::Unavailable);
            }
            Err(_) => {
                tracing::warn!("token review timed out");
                return Err(AuthError::Unavailable);
            }
        };
        let Some(status) = answer.status else {
            return Ok(Review::Rejected);
        };
        let audience_ok = status.audiences.as_ref().is_some_and(|a| a.iter().any(|a| a == audience));
        match (status.authenticated, status.user.and_then(|u| u.username)) {
            (Some(true), Some(username)) if audience_ok => Ok(Review::Authenticated { username }),
            _ => Ok(Review::Rejected),
        }
    }

    fn lock<'a>(&self, cache: &'a Mutex<VerdictCache>) -> std::sync::MutexGuard<'a, VerdictCache> {
        cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Verdicts by token digest, each valid for `ttl`, at most `capacity` of them.
#[derive(Debug)]
struct VerdictCache {
    ttl: Duration,
    capacity: usize,
    entries: HashMap<Key, (Review, Instant)>,
}

impl VerdictCache {
    fn new(ttl: Duration, capacity: usize) -> VerdictCache {
        VerdictCache { ttl, capacity: capacity.max(1), entries: HashMap::new() }
    }

    fn get(&self, key: &Key, now: Instant) -> Option<Review> {
        self.entries.get(key).filter(|(_, expires)| *expires > now).map(|(verdict, _)| verdict.clone())
    }

    /// Keep `verdict` until `now + ttl`; when full, expired entries go first, then the oldest.
    fn insert(&mut self, key: Key, verdict: Review, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, expires)| *expires > now);
        }
        if self.entries.len() >= self.capacity
            && !self.entries.contains_key(&key)
            && let Some(oldest) = self.entries.iter().min_by_key(|(_, (_, expires))| *expires).map(|(k, _)| *k)
        {
            self.entries.remove(&oldest);
        }
        self.entries.insert(key, (verdict, now + self.ttl));
    }
}

fn cache_key(token: &str, audience: &str) -> Key {
    let mut hasher = Sha256::new();
    hasher.update(audience.as_bytes());
    hasher.update([0]);
    hasher.update(token.as_bytes());
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepted(name: &str) -> Review {
        Review::Authenticated { username: name.to_string() }
    }

    #[test]
    fn verdicts_expire_after_the_ttl() {
        let start = Instant::now();
        let mut cache = VerdictCache::new(Duration::from_secs(30), 8);
        let key = cache_key("token", "memgate");
        cache.insert(key, accepted("a"), start);
        assert_eq!(cache.get(&key, start + Duration::from_secs(29)), Some(accepted("a")));
        assert_eq!(cache.get(&key, start + Duration::from_secs(30)), None);
    }

    #[test]
    fn the_cache_is_bounded_and_drops_expired_then_oldest() {
        let start = Instant::now();
        let mut cache = VerdictCache::new(Duration::from_secs(30), 2);
        let keys: Vec<Key> = (0..4).map(|i| cache_key(&format!("token-{i}"), "memgate")).collect();
        cache.insert(keys[0], accepted("0"), start);
        cache.insert(keys[1], Review::Rejected, start + Duration::from_secs(1));
        cache.insert(keys[2], accepted("2"), start + Duration::from_secs(2));
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.get(&keys[0], start), None, "oldest dropped");
        // At 31 s the entry of `keys[1]` has expired: it goes, the unexpired `keys[2]` stays.
        let later = start + Duration::from_secs(31);
        cache.insert(keys[3], accepted("3"), later);
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.get(&keys[2], later), Some(accepted("2")));
        assert_eq!(cache.get(&keys[3], later), Some(accepted("3")));
    }

    #[test]
    fn keys_depend_on_token_and_audience_and_hide_the_token() {
        assert_ne!(cache_key("token", "a"), cache_key("token", "b"));
        assert_ne!(cache_key("token-1", "a"), cache_key("token-2", "a"));
        assert_ne!(cache_key("ab", "c"), cache_key("b", "ca"));
        assert!(!format!("{:?}", cache_key("visible-token", "a")).contains("visible-token"));
    }
}
