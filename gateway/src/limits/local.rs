//! Buckets kept in this process: every limit of a gateway without a Redis store, and the fallback
//! of one whose store is unavailable.

use std::collections::HashMap;
use std::sync::Mutex;

use super::bucket::{Rate, Verdict, decide};

/// Most buckets one process keeps (one per provider, limit and caller).
pub const MAX_BUCKETS: usize = 65_536;

/// In-process buckets, at most `capacity` of them.
#[derive(Debug)]
pub struct LocalBuckets {
    buckets: Mutex<HashMap<String, Entry>>,
    capacity: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    tat: u64,
    /// When the bucket is full again and can be forgotten (µs).
    idle_from: u64,
}

impl Default for LocalBuckets {
    fn default() -> Self {
        LocalBuckets::with_capacity(MAX_BUCKETS)
    }
}

impl LocalBuckets {
    /// Keep at most `capacity` buckets.
    pub fn with_capacity(capacity: usize) -> LocalBuckets {
        LocalBuckets { buckets: Mutex::default(), capacity: capacity.max(1) }
    }

    /// Take `cost` tokens of `rate` from the bucket `key` at `now_us`. When the table is full of
    /// buckets still refilling, a new key is allowed without being tracked (`untracked` is then
    /// true): memory stays bounded, and a flood of distinct callers cannot lock out existing ones.
    pub fn take(&self, key: &str, rate: Rate, cost: u64, now_us: u64) -> (Verdict, bool) {
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tat = buckets.get(key).map(|e| e.tat);
        let verdict = decide(tat, now_us, rate, cost);
        let Verdict::Allow { tat } = verdict else { return (verdict, false) };
        let entry = Entry { tat, idle_from: tat };
        if let Some(existing) = buckets.get_mut(key) {
            *existing = entry;
            return (verdict, false);
        }
        if buckets.len() >= self.capacity {
            buckets.retain(|_, e| e.idle_from > now_us);
            if buckets.len() >= self.capacity {
                return (verdict, true);
            }
        }
        buckets.insert(key.to_string(), entry);
        (verdict, false)
    }

    /// Buckets kept now.
    pub fn len(&self) -> usize {
        self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// True when no bucket is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_have_separate_buckets() {
        let buckets = LocalBuckets::default();
        let rate = Rate::per(5, Duration::from_secs(60), 5);
        let allowed = |key: &str| matches!(buckets.take(key, rate, 1, 0).0, Verdict::Allow { .. });
        assert!((0..5).all(|_| allowed("a")));
        assert!(!allowed("a"), "a's sixth call");
        assert!(allowed("b"), "b is not a");
    }

    #[test]
    fn the_table_stays_bounded_and_forgets_full_buckets_first() {
        let buckets = LocalBuckets::with_capacity(2);
        let rate = Rate::per(60, Duration::from_secs(60), 1); // refills in 1 s
        assert_eq!(buckets.take("a", rate, 1, 0), (Verdict::Allow { tat: 1_000_000 }, false));
        assert_eq!(buckets.take("b", rate, 1, 0), (Verdict::Allow { tat: 1_000_000 }, false));
        // Full of refilling buckets: a third caller is allowed, untracked.
        assert_eq!(buckets.take("c", rate, 1, 500_000), (Verdict::Allow { tat: 1_500_000 }, true));
        assert_eq!(buckets.len(), 2);
        // Once a and b are full again they are forgotten to make room.
        assert_eq!(buckets.take("c", rate, 1, 2_000_000), (Verdict::Allow { tat: 3_000_000 }, false));
        assert_eq!(buckets.len(), 1);
    }
}
