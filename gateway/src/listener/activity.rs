//! What one connection is doing, for its timers: how many requests are in flight, since when it
//! has been idle, and since when each response has been waiting to be sent.
//!
//! Updated by the request side ([`InFlight`] guards), read by the connection's watchdog
//! ([`Activity::expiry`], a pure decision over that state). Never touches the socket.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;
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
    /// Woken on every change, so the watchdog recomputes its timer.
    changed: Notify,
}

impl Activity {
    /// A fresh connection accepted at `now`.
    pub fn new(now: Instant) -> Arc<Activity> {
        let state = State { in_flight: 0, started: 0, idle_since: now, responding: BTreeMap::new() };
        Arc::new(Activity { state: Mutex::new(state), changed: Notify::new() })
    }

    /// Resolves after the next change of this connection's activity.
    pub async fn changed(&self) {
        self.changed.notified().await;
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
        self.changed.notify_one();
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
        self.activity.changed.notify_one();
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
        drop(state);
        self.activity.changed.notify_one();
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
}
