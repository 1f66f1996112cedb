//! Buckets in Redis, shared by every replica of a gateway.
//!
//! One string key per bucket, `<prefix>limit:<sha256 of provider, limit and caller>`, holding the
//! bucket's TAT in microseconds, expiring when the bucket is full again. One script takes the
//! tokens atomically and reads the time from the Redis server (`TIME`), so replicas whose clocks
//! disagree still share one clock; it touches only the key it names, as a key-pattern ACL needs.
//! The arithmetic is [`super::bucket::decide`]'s.

use std::time::Duration;

use sha2::{Digest, Sha256};

use super::bucket::{Answer, Rate};
use crate::redis_store::{RedisStore, StoreError};

/// Bound of one limit check against Redis (connecting included): short, it is on every call's path.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(250);

/// KEYS[1]: the bucket; ARGV: interval (µs), burst, cost. Returns {1, 0} when allowed, {0, retry
/// after in µs} when refused. Lua numbers are doubles: exact for microsecond times until 2255.
const TAKE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local horizon = interval * burst
if cost > burst then return {0, horizon} end
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local new_tat = tat + cost * interval
local allowed_from = new_tat - horizon
if allowed_from > now then return {0, allowed_from - now} end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 1)
return {1, 0}
";

/// Buckets on a Redis server.
#[derive(Debug)]
pub struct SharedBuckets {
    store: RedisStore,
    prefix: String,
}

impl SharedBuckets {
    /// Buckets on `store`, their keys under `<key_prefix>limit:` (`key_prefix`: `memgate:`, or a
    /// gateway's own `memgate:<namespace>/<name>:`).
    pub fn new(store: RedisStore, key_prefix: &str) -> SharedBuckets {
        SharedBuckets { store, prefix: format!("{key_prefix}limit:") }
    }

    /// The Redis key of bucket `key`.
    pub fn key_name(&self, key: &str) -> String {
        let digest = Sha256::digest(key.as_bytes());
        let mut name = String::with_capacity(self.prefix.len() + 64);
        name.push_str(&self.prefix);
        crate::hex::push_lower_hex(&mut name, &digest);
        name
    }

    /// Take `cost` tokens of `rate` from bucket `key`.
    pub async fn take(&self, key: &str, rate: Rate, cost: u64) -> Result<Answer, StoreError> {
        let mut command = redis::cmd("EVAL");
        command.arg(TAKE).arg(1).arg(self.key_name(key)).arg(rate.interval_us).arg(rate.burst).arg(cost);
        let (allowed, retry_after_us): (i64, i64) = self.store.run(&command).await?;
        Ok(if allowed == 1 {
            Answer::Allowed
        } else {
            Answer::Refused { retry_after_us: u64::try_from(retry_after_us).unwrap_or(0) }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_digests_under_the_gateway_prefix() {
        let store = RedisStore::open("redis://127.0.0.1:1", None, COMMAND_TIMEOUT).expect("valid url");
        let buckets = SharedBuckets::new(store, "memgate:team-a/gw:");
        let name = buckets.key_name("team-a/p|per_caller|serviceaccount:team-a:agent");
        assert!(name.starts_with("memgate:team-a/gw:limit:"), "{name}");
        assert_eq!(name.len(), "memgate:team-a/gw:limit:".len() + 64);
        assert!(!name.contains("agent"), "the caller is not readable from the key");
        assert_ne!(name, buckets.key_name("team-a/p|per_caller|serviceaccount:team-a:other"));
    }
}
