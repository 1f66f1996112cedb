//! The token bucket every limit uses, as the generic cell rate algorithm (GCRA): one number per
//! bucket, the theoretical arrival time (TAT) of the next call at the average rate. Pure: the same
//! arithmetic runs in-process ([`super::local`]) and, as a script, in Redis ([`super::shared`]).

use std::time::Duration;

/// The rate of one bucket, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Microseconds per token at the average rate (at least 1).
    pub interval_us: u64,
    /// Tokens available at once after a quiet period (at least 1).
    pub burst: u64,
}

impl Rate {
    /// `count` tokens every `period`, at most `burst` at once.
    pub fn per(count: u32, period: Duration, burst: u32) -> Rate {
        let period_us = u64::try_from(period.as_micros()).unwrap_or(u64::MAX);
        Rate { interval_us: (period_us / u64::from(count.max(1))).max(1), burst: u64::from(burst.max(1)) }
    }

    /// How long a full bucket takes to refill: how long a bucket's state must be kept.
    pub fn horizon_us(&self) -> u64 {
        self.interval_us.saturating_mul(self.burst)
    }
}

/// What [`decide`] says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed: store `tat` as the bucket's new state.
    Allow {
        /// The new theoretical arrival time (µs).
        tat: u64,
    },
    /// Refused: the bucket has room for `cost` again in this many microseconds (never, when `cost`
    /// exceeds the burst: then the time a full bucket takes to refill).
    Refuse {
        /// Microseconds until the call would be allowed.
        retry_after_us: u64,
    },
}

/// What a bucket answers one call, wherever the bucket lives (here or in Redis, which keeps its
/// own state and returns none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The call may go on.
    Allowed,
    /// The call is refused; room again in this many microseconds.
    Refused {
        /// Microseconds until the call would be allowed.
        retry_after_us: u64,
    },
}

impl From<Verdict> for Answer {
    fn from(verdict: Verdict) -> Answer {
        match verdict {
            Verdict::Allow { .. } => Answer::Allowed,
            Verdict::Refuse { retry_after_us } => Answer::Refused { retry_after_us },
        }
    }
}

/// Take `cost` tokens at `now_us` from a bucket whose state is `tat_us` (`None`: never used).
pub fn decide(tat_us: Option<u64>, now_us: u64, rate: Rate, cost: u64) -> Verdict {
    if cost > rate.burst {
        return Verdict::Refuse { retry_after_us: rate.horizon_us() };
    }
    let tat = tat_us.unwrap_or(now_us).max(now_us);
    let new_tat = tat.saturating_add(cost.saturating_mul(rate.interval_us));
    let allowed_from = new_tat.saturating_sub(rate.horizon_us());
    if allowed_from > now_us {
        Verdict::Refuse { retry_after_us: allowed_from - now_us }
    } else {
        Verdict::Allow { tat: new_tat }
    }
}

/// Whole seconds for a `Retry-After` header: rounded up, at least 1.
pub fn retry_after_seconds(retry_after_us: u64) -> u64 {
    retry_after_us.div_ceil(1_000_000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    /// Run calls of `cost` at the given instants (µs), returning which were allowed.
    fn run(rate: Rate, calls: &[(u64, u64)]) -> Vec<bool> {
        let mut tat = None;
        calls
            .iter()
            .map(|&(now, cost)| match decide(tat, now, rate, cost) {
                Verdict::Allow { tat: next } => {
                    tat = Some(next);
                    true
                }
                Verdict::Refuse { .. } => false,
            })
            .collect()
    }

    #[test]
    fn a_full_bucket_allows_the_burst_then_refuses() {
        let rate = Rate::per(5, MINUTE, 5);
        assert_eq!(run(rate, &[(0, 1); 6]), [true, true, true, true, true, false]);
    }

    #[test]
    fn tokens_come_back_at_the_average_rate() {
        let rate = Rate::per(60, MINUTE, 2); // one per second
        let calls = [(0, 1), (0, 1), (0, 1), (999_999, 1), (1_000_000, 1), (1_500_000, 1), (3_000_000, 1)];
        assert_eq!(run(rate, &calls), [true, true, false, false, true, false, true]);
    }

    #[test]
    fn a_refusal_says_when_to_come_back_and_costs_nothing() {
        let rate = Rate::per(60, MINUTE, 1);
        let Verdict::Allow { tat } = decide(None, 0, rate, 1) else { panic!("first call allowed") };
        assert_eq!(decide(Some(tat), 250_000, rate, 1), Verdict::Refuse { retry_after_us: 750_000 });
        assert_eq!(decide(Some(tat), 1_000_000, rate, 1), Verdict::Allow { tat: 2_000_000 });
        assert_eq!(retry_after_seconds(750_000), 1);
        assert_eq!(retry_after_seconds(1_000_001), 2);
        assert_eq!(retry_after_seconds(0), 1);
    }

    #[test]
    fn a_cost_is_taken_whole_or_not_at_all() {
        let rate = Rate::per(500, Duration::from_secs(3600), 10);
        assert_eq!(run(rate, &[(0, 4), (0, 4), (0, 4), (0, 2)]), [true, true, false, true]);
        assert_eq!(decide(None, 0, rate, 11), Verdict::Refuse { retry_after_us: rate.horizon_us() });
    }

    #[test]
    fn extreme_rates_stay_in_range() {
        let fast = Rate::per(100_000, Duration::from_secs(1), 100_000);
        assert_eq!(fast.interval_us, 10);
        assert_eq!(decide(Some(u64::MAX - 5), u64::MAX - 10, fast, 1), Verdict::Allow { tat: u64::MAX });
        let slow = Rate::per(1, Duration::from_secs(3600), 1);
        assert_eq!(slow.horizon_us(), 3_600_000_000);
    }
}
