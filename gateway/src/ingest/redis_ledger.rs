//! The shared ledger on Redis, for several gateway replicas.
//!
//! One string key per unit, `<prefix>ingest:<LedgerKey::digest()>`, holding the text form of the
//! entry (`P|<until_ms>|<token>`, `A`, `R|<reason>`, `D|<reason>`) with a TTL of the result TTL
//! (default 24 h) from its last change. A claim is `SET key <marker> NX PX <ttl>`; retaking a
//! degraded unit and releasing a claim are compare-and-set scripts on the exact marker, so a
//! replica can never overwrite another replica's claim. The policy is the one of
//! [`super::ledger`], shared with [`super::MemoryLedger`].
//!
//! Claim expiry compares the replicas' wall clocks: skew beyond [`super::CLAIM_GRACE`] can only make
//! a live claim look abandoned early, and an abandoned claim is degraded: reported as such, or
//! re-sent only where the upstream drops exact repeats.
//!
//! The prefix is `memgate:<namespace>/<name>:` for a gateway with an identity (`--gateway-id`, what
//! the operator renders), so that a Redis ACL user per gateway (`~memgate:<namespace>/<name>:*`)
//! confines it to its own records; `memgate:` otherwise. Every command touches exactly the one key it
//! names (scripts declare it in `KEYS`), which is what a key-pattern ACL needs.
//!
//! Every command has a short timeout; a failure is [`LedgerError::Unavailable`] (the ingest then
//! fails retryable without writing upstream). The connection, its TLS and its bounds are
//! [`crate::redis_store`]'s.

use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use redis::FromRedisValue;

use crate::gateway_id::GatewayId;
use crate::redis_store::RedisStore;

use super::ledger::{
    Claim, ClaimPolicy, ClaimToken, DEFAULT_RESULT_TTL, Decision, Entry, Ledger, LedgerError, LedgerKey,
    REASON_UNREADABLE, Recorded, decide, new_claim, now_ms,
};

/// Prefix of every key a ledger without a gateway identity writes.
pub const KEY_PREFIX: &str = "memgate:ingest:";
/// Default bound of one Redis command (connecting included).
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// `SET KEYS[1] ARGV[2] PX ARGV[3]` only when it holds exactly `ARGV[1]`.
const COMPARE_AND_SET: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end return 0";
/// `DEL KEYS[1]` only when it holds exactly `ARGV[1]`.
const COMPARE_AND_DELETE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0";

/// How often a claim retries when the entry changed between its commands.
const CLAIM_ATTEMPTS: usize = 3;

/// A [`Ledger`] on a Redis server shared by every replica.
pub struct RedisLedger {
    store: RedisStore,
    prefix: String,
    ttl: Duration,
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLedger").field("ttl", &self.ttl).finish_non_exhaustive()
    }
}

impl RedisLedger {
    /// A ledger on the Redis server at `url` (`redis[s]://[[user]:password@]host[:port][/db]`),
    /// keeping outcomes [`DEFAULT_RESULT_TTL`], its keys under [`KEY_PREFIX`]. `rediss://` is
    /// verified against the system's roots, or only against `ca_pem` when given. Connects lazily,
    /// on first use.
    pub fn new(url: &str) -> Result<RedisLedger, LedgerError> {
        RedisLedger::with_ca(url, None)
    }

    /// [`RedisLedger::new`] trusting only the CA certificates in `ca_pem` for `rediss://`.
    pub fn with_ca(url: &str, ca_pem: Option<Vec<u8>>) -> Result<RedisLedger, LedgerError> {
        let store = RedisStore::open(url, ca_pem, DEFAULT_COMMAND_TIMEOUT).map_err(|_| LedgerError::InvalidUrl)?;
        Ok(RedisLedger { store, prefix: KEY_PREFIX.to_string(), ttl: DEFAULT_RESULT_TTL })
    }

    /// Keep this gateway's keys under its own prefix, `memgate:<namespace>/<name>:ingest:`.
    pub fn for_gateway(mut self, gateway: &GatewayId) -> RedisLedger {
        self.prefix = format!("{}ingest:", gateway.redis_prefix());
        self
    }

    /// The key of a unit.
    fn key_name(&self, key: &LedgerKey) -> String {
        format!("{}{}", self.prefix, key.digest())
    }

    /// Keep outcomes `ttl` instead (at least 1 ms).
    pub fn with_ttl(mut self, ttl: Duration) -> RedisLedger {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    fn ttl_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }

    async fn run<T: FromRedisValue>(&self, command: &redis::Cmd) -> Result<T, LedgerError> {
        self.store.run(command).await.map_err(|_| LedgerError::Unavailable)
    }

    async fn claim_inner(&self, key: &LedgerKey, policy: ClaimPolicy) -> Result<Claim, LedgerError> {
        let name = self.key_name(key);
        for _ in 0..CLAIM_ATTEMPTS {
            let marker = new_claim(policy.hold_for).encode();
            let set: Option<String> =
                self.run(redis::cmd("SET").arg(&name).arg(&marker).arg("NX").arg("PX").arg(self.ttl_ms())).await?;
            if set.is_some() {
                return Ok(Claim::Claimed { token: ClaimToken::from_marker(marker), replaces: None });
            }
            let Some(current) = self.run::<Option<String>>(redis::cmd("GET").arg(&name)).await? else {
                continue; // Expired or released in between: try again.
            };
            let Some(entry) = Entry::decode(&current) else {
                return Ok(Claim::Done(Recorded::Degraded { reason: REASON_UNREADABLE.to_string() }));
            };
            match decide(Some(&entry), now_ms(), policy.retake_degraded) {
                Decision::Busy => return Ok(Claim::Busy),
                Decision::Done(recorded) => return Ok(Claim::Done(recorded)),
                // Unreachable: an existing entry is never free; try again.
                Decision::Take => continue,
                Decision::Retake(recorded) => {
                    let swapped: i64 = self
                        .run(
                            redis::cmd("EVAL")
                                .arg(COMPARE_AND_SET)
                                .arg(1)
                                .arg(&name)
                                .arg(&current)
                                .arg(&marker)
                                .arg(self.ttl_ms()),
                        )
                        .await?;
                    if swapped == 1 {
                        return Ok(Claim::Claimed { token: ClaimToken::from_marker(marker), replaces: Some(recorded) });
                    }
                }
            }
        }
        // The entry kept changing under us: another replica is working on the unit.
        Ok(Claim::Busy)
    }

    async fn record_inner(&self, key: &LedgerKey, outcome: &Recorded) -> Result<(), LedgerError> {
        let name = self.key_name(key);
        let value = Entry::Done(outcome.clone()).encode();
        self.run::<()>(redis::cmd("SET").arg(&name).arg(value).arg("PX").arg(self.ttl_ms())).await
    }

    async fn release_inner(
        &self,
        key: &LedgerKey,
        token: &ClaimToken,
        restore: Option<&Recorded>,
    ) -> Result<(), LedgerError> {
        let name = self.key_name(key);
        let mut command = redis::cmd("EVAL");
        match restore {
            Some(outcome) => command
                .arg(COMPARE_AND_SET)
                .arg(1)
                .arg(&name)
                .arg(token.marker())
                .arg(Entry::Done(outcome.clone()).encode())
                .arg(self.ttl_ms()),
            None => command.arg(COMPARE_AND_DELETE).arg(1).arg(&name).arg(token.marker()),
        };
        self.run::<i64>(&command).await.map(drop)
    }
}

impl Ledger for RedisLedger {
    fn claim<'a>(&'a self, key: &'a LedgerKey, policy: ClaimPolicy) -> BoxFuture<'a, Result<Claim, LedgerError>> {
        self.claim_inner(key, policy).boxed()
    }

    fn record<'a>(&'a self, key: &'a LedgerKey, outcome: &'a Recorded) -> BoxFuture<'a, Result<(), LedgerError>> {
        self.record_inner(key, outcome).boxed()
    }

    fn release<'a>(
        &'a self,
        key: &'a LedgerKey,
        token: &'a ClaimToken,
        restore: Option<&'a Recorded>,
    ) -> BoxFuture<'a, Result<(), LedgerError>> {
        self.release_inner(key, token, restore).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_and_rediss_urls_are_accepted() {
        assert!(RedisLedger::new("redis://127.0.0.1:6379/0").is_ok());
        assert!(RedisLedger::new("redis://:secret@redis.memgate.svc:6379").is_ok());
        assert!(RedisLedger::new("rediss://gw-a:secret@redis.memgate.svc:6380").is_ok());
        assert_eq!(
            RedisLedger::with_ca("redis://127.0.0.1:6379", Some(Vec::new())).err(),
            Some(LedgerError::InvalidUrl)
        );
        for bad in ["http://127.0.0.1", "redis://", "not a url", ""] {
            assert_eq!(RedisLedger::new(bad).err(), Some(LedgerError::InvalidUrl), "{bad}");
        }
        let ledger = RedisLedger::new("redis://:secret@redis.memgate.svc:6379").expect("valid");
        assert!(!format!("{ledger:?}").contains("secret"));
    }

    #[test]
    fn a_gateway_keeps_its_records_under_its_own_prefix() {
        let id = GatewayId::parse("team-a/memgate-gateway").expect("id");
        let ledger = RedisLedger::new("redis://127.0.0.1:6379").expect("valid").for_gateway(&id);
        assert_eq!(ledger.prefix, "memgate:team-a/memgate-gateway:ingest:");
        assert_eq!(RedisLedger::new("redis://127.0.0.1:6379").expect("valid").prefix, KEY_PREFIX);
    }
}
