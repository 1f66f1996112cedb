//! What one connection is doing, for its timers: how many requests are in flight, since when it
//! has been idle, and since when each response has been waiting to be sent.
//!
//! Updated by the request side ([`InFlight`] guards), read by the connection's watchdog
//! ([`Activity::wake_at`] to arm its timer, [`Activity::expiry`] to decide when it fires). Never
//! touches the socket, and never wakes the watchdog: every change can only move a deadline later
//! than the time [`Activity::wake_at`] gave, so the watchdog looks again when its timer fires
//! instead of on every change (three wake-ups of the connection's task per request saved).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::limits::ListenerLimits;

/// Why a connection's timer ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No request in flight for the idle timeout (or, before its first request, the header-read
    /// timeout): close it gracefully.
    Idle,
    /// A response has waited longer than the write timeout to be sent: drop the connection.
    WriteStalled,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    started: u64,
    idle_since: Instant,
    /// Request id -> when its response head was ready.
    responding: BTreeMap<u64, Instant>,
}

/// The shared activity record of one connection.
#[derive(Debug)]
pub struct Activity {
    state: Mutex<State>,
}

impl Activity {
    /// A fresh connection accepted at `now`.
    pub fn new(now: Instant) -> Arc<Activity> {
        let state = State { in_flight: 0, started: 0, idle_since: now, responding: BTreeMap::new() };
        Arc::new(Activity { state: Mutex::new(state) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change leaves the state consistent before it could panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request started; it is in flight until the guard is dropped.
    pub fn start(self: &Arc<Self>) -> InFlight {
        let mut state = self.lock();
        state.in_flight += 1;
        let id = state.started;
        state.started += 1;
        drop(state);
        InFlight { activity: Arc::clone(self), id }
    }

    /// Since when the connection has had no request in flight; `None` while it has one.
    pub fn idle_since(&self) -> Option<Instant> {
        let state = self.lock();
        (state.in_flight == 0).then_some(state.idle_since)
    }

    /// When the connection's next timer runs out and why; `None` for "look again after the write
    /// timeout" (requests are being handled, no response is waiting).
    pub fn expiry(&self, limits: &ListenerLimits) -> Option<(Instant, Expiry)> {
        let state = self.lock();
        if state.in_flight == 0 {
            let allowed = if state.started == 0 { limits.header_read_timeout } else { limits.idle_timeout };
            return Some((state.idle_since + allowed, Expiry::Idle));
        }
        state.responding.values().min().map(|oldest| (*oldest + limits.write_timeout, Expiry::WriteStalled))
    }

    /// When the watchdog, arming its timer at `now`, should look at [`Activity::expiry`] next: never
    /// later than any deadline the connection can have until then, whatever changes meanwhile.
    ///
    /// Idle, the only change that can come is a request starting, which removes the idle deadline:
    /// the deadline itself is the time. With requests in flight, a response getting ready or the
    /// last request ending sets a deadline no earlier than `now` plus the write or the idle
    /// timeout, so looking again after the shorter of the two (or at the oldest waiting response's
    /// deadline, if earlier) never misses one.
    pub fn wake_at(&self, limits: &ListenerLimits, now: Instant) -> Instant {
        let look_again = now + limits.write_timeout.min(limits.idle_timeout);
        match self.expiry(limits) {
            Some((at, Expiry::Idle)) => at,
            Some((at, Expiry::WriteStalled)) => at.min(look_again),
            None => look_again,
        }
    }
}

/// One request in flight on a connection; dropped when its response has been handed to the
/// connection (or the request was abandoned).
#[derive(Debug)]
pub struct InFlight {
    activity: Arc<Activity>,
    id: u64,
}

impl InFlight {
    /// The response head is ready: the write timeout runs from now.
    pub fn responding(&self) {
        self.activity.lock().responding.insert(self.id, Instant::now());
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.activity.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        state.responding.remove(&self.id);
        if state.in_flight == 0 {
            state.idle_since = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits() -> ListenerLimits {
        ListenerLimits {
            header_read_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(3),
            ..ListenerLimits::default()
        }
    }

    #[test]
    fn a_new_connection_has_the_header_read_timeout_then_the_idle_timeout() {
        let accepted = Instant::now();
        let activity = Activity::new(accepted);
        assert_eq!(activity.expiry(&limits()), Some((accepted + Duration::from_secs(1), Expiry::Idle)));
        let request = activity.start();
        assert_eq!(activity.expiry(&limits()), None, "a request being handled has no timer here");
        request.responding();
        let (at, why) = activity.expiry(&limits()).expect("write timer");
        assert_eq!(why, Expiry::WriteStalled);
        assert!(at > accepted + Duration::from_secs(2));
        drop(request);
        let (at, why) = activity.expiry(&limits()).expect("idle timer");
        assert_eq!(why, Expiry::Idle);
        assert!(at >= accepted + Duration::from_secs(5), "after a request the idle timeout applies");
    }

    #[test]
    fn the_oldest_waiting_response_sets_the_write_timer() {
        let activity = Activity::new(Instant::now());
        let first = activity.start();
        let second = activity.start();
        first.responding();
        let (at, _) = activity.expiry(&limits()).expect("timer");
        second.responding();
        assert_eq!(activity.expiry(&limits()).map(|(t, _)| t), Some(at));
        drop(first);
        assert!(activity.expiry(&limits()).is_some_and(|(t, why)| t >= at && why == Expiry::WriteStalled));
    }

    /// Every deadline the connection can have before the watchdog's timer fires is no earlier than
    /// that timer: checked over every sequence of three changes (a request starting, the oldest
    /// waiting one getting its response ready, the oldest one ending), each one second apart, from
    /// every reachable state, with the idle timeout shorter and longer than the write timeout.
    #[tokio::test(start_paused = true)]
    async fn the_watchdog_timer_never_passes_a_deadline_a_change_brings() {
        #[derive(Clone, Copy, Debug)]
        enum Change {
            Start,
            Respond,
            End,
        }
        const CHANGES: [Change; 3] = [Change::Start, Change::Respond, Change::End];
        let shorter_idle =
            ListenerLimits { idle_timeout: Duration::from_secs(2), write_timeout: Duration::from_secs(7), ..limits() };
        let mut checked = 0;
        for limits in [limits(), shorter_idle] {
            for before in 0..CHANGES.len().pow(2) {
                for after in 0..CHANGES.len().pow(3) {
                    let activity = Activity::new(Instant::now());
                    let mut open: Vec<(InFlight, bool)> = Vec::new();
                    let apply = |change: Change, open: &mut Vec<(InFlight, bool)>| match change {
                        Change::Start => open.push((activity.start(), false)),
                        Change::Respond => {
                            if let Some((request, ready)) = open.iter_mut().find(|(_, ready)| !ready) {
                                request.responding();
                                *ready = true;
                            }
                        }
                        Change::End => drop((!open.is_empty()).then(|| open.remove(0))),
                    };
                    for step in 0..2 {
                        apply(CHANGES[before / CHANGES.len().pow(step) % CHANGES.len()], &mut open);
                        tokio::time::advance(Duration::from_secs(1)).await;
                    }
                    let wake = activity.wake_at(&limits, Instant::now());
                    let mut trace = Vec::new();
                    for step in 0..3 {
                        if Instant::now() + Duration::from_secs(1) >= wake {
                            break;
                        }
                        tokio::time::advance(Duration::from_secs(1)).await;
                        let change = CHANGES[after / CHANGES.len().pow(step) % CHANGES.len()];
                        apply(change, &mut open);
                        trace.push(change);
                        if let Some((deadline, why)) = activity.expiry(&limits) {
                            assert!(deadline >= wake, "{why:?} deadline before the timer after {trace:?} ({limits:?})");
                        }
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100, "sequences were checked: {checked}");
    }
}
