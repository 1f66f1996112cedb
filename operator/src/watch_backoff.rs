//! How long a failed watch waits before it is tried again.
//!
//! kube-runtime's default (client-go's reflector values) doubles from 0.8 s to 30 s, so after an API
//! server outage of half a minute every watch may wait up to 30 s more before it relists, and the
//! restarted server's watch cache then refuses the old resourceVersion once (410), costing one more
//! step. The operator has a handful of watches per process, so a lower cap costs a recovering API
//! server little and brings reconciling back within seconds: 0.8 s doubling to [`MAX_DELAY`], back
//! to the start after any successful event (kube-runtime's `StreamBackoff` resets on success).

use std::time::Duration;

use kube::runtime::utils::Backoff;

/// First delay after a failure.
pub const FIRST_DELAY: Duration = Duration::from_millis(800);
/// Longest delay between two attempts.
pub const MAX_DELAY: Duration = Duration::from_secs(8);

/// Exponential watch backoff capped at [`MAX_DELAY`]; never gives up.
#[derive(Debug, Clone, Default)]
pub struct WatchBackoff {
    failures: u32,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = FIRST_DELAY.saturating_mul(2u32.saturating_pow(self.failures)).min(MAX_DELAY);
        self.failures = self.failures.saturating_add(1);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_starts_over_after_a_reset() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<u128> = backoff.by_ref().take(7).map(|d| d.as_millis()).collect();
        assert_eq!(delays, [800, 1600, 3200, 6400, 8000, 8000, 8000]);
        for _ in 0..100 {
            assert_eq!(backoff.next(), Some(MAX_DELAY), "never gives up, never overflows");
        }
        backoff.reset();
        assert_eq!(backoff.next(), Some(FIRST_DELAY));
    }
}
