//! What one connection is doing, for its timers: how many requests are in flight, since when it
//! has been idle, and since when each response has been waiting to be sent.
//!
//! Updated by the request side ([`InFlight`] guards), read by the connection's watchdog
//! ([`Activity::wake_at`] to arm its timer, [`Activity::expiry`] to decide when it fires). Never
//! touches the socket. A change wakes the watchdog only when it brings a deadline earlier than the
//! timer the watchdog armed last: a request on a busy connection usually brings none (its write
//! deadline comes after the one already armed), so most requests do not wake it at all.

use std::collections::BTreeMap;
use std::future::{Future, poll_fn};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use futures::task::AtomicWaker;
use http::Version;
use tokio::time::Instant;

use super::limits::ListenerLimits;

/// Why a connection's timer ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// No request in flight for the idle timeout, or for the header-read timeout before its first
    /// request and, on HTTP/1, after each response (its next head is due): close it gracefully.
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
    /// Its requests are HTTP/1: between two, the next head is due within the header-read timeout
    /// of the previous response (hyper's own per-request timer is not used: see `connection`).
    http1: bool,
    /// The watchdog's timer as it last armed it ([`Activity::wake_at`]), with the limits it read;
    /// `None` before that, or once it has been woken to arm it again.
    armed: Option<(Instant, ListenerLimits)>,
}

impl State {
    /// The next deadline and why (see [`Activity::expiry`]).
    fn expiry(&self, limits: &ListenerLimits) -> Option<(Instant, Expiry)> {
        if self.in_flight == 0 {
            let allowed = if self.started == 0 {
                limits.header_read_timeout
            } else if self.http1 {
                limits.header_read_timeout.min(limits.idle_timeout)
            } else {
                limits.idle_timeout
            };
            return Some((self.idle_since + allowed, Expiry::Idle));
        }
        self.responding.values().min().map(|oldest| (*oldest + limits.write_timeout, Expiry::WriteStalled))
    }

    /// After a change: whether it brought a deadline before the watchdog's timer (which then has
    /// to be armed again); the timer is forgotten if so.
    fn passes_the_timer(&mut self) -> bool {
        let Some((armed, limits)) = self.armed else { return false };
        let earlier = self.expiry(&limits).is_some_and(|(deadline, _)| deadline < armed);
        if earlier {
            self.armed = None;
        }
        earlier
    }
}

/// The shared activity record of one connection.
#[derive(Debug)]
pub struct Activity {
    state: Mutex<State>,
    /// Set when a change brings a deadline before the watchdog's timer, which `watchdog` wakes.
    rearm: AtomicBool,
    /// The watchdog's task (one waiter, polled on every wake of the connection's task: a few
    /// atomics, where a `Notify` would take a lock).
    watchdog: AtomicWaker,
}

impl Activity {
    /// A fresh connection accepted at `now`.
    pub fn new(now: Instant) -> Arc<Activity> {
        let state =
            State { in_flight: 0, started: 0, idle_since: now, responding: BTreeMap::new(), http1: false, armed: None };
        Arc::new(Activity { state: Mutex::new(state), rearm: AtomicBool::new(false), watchdog: AtomicWaker::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every change leaves the state consistent before it could panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Apply `change`, then wake the watchdog if it brought a deadline before its timer.
    fn change(&self, change: impl FnOnce(&mut State)) {
        let mut state = self.lock();
        change(&mut state);
        let rearm = state.passes_the_timer();
        drop(state);
        if rearm {
            self.rearm.store(true, Ordering::Release);
            self.watchdog.wake();
        }
    }

    /// Resolves once a change has brought a deadline before the timer armed by
    /// [`Activity::wake_at`] (at once if one has since the last time it resolved).
    pub fn rearm(&self) -> impl Future<Output = ()> + '_ {
        poll_fn(|cx| {
            if self.rearm.swap(false, Ordering::AcqRel) {
                return Poll::Ready(());
            }
            self.watchdog.register(cx.waker());
            // A change between the check and the registration woke no one: look again.
            if self.rearm.swap(false, Ordering::AcqRel) { Poll::Ready(()) } else { Poll::Pending }
        })
    }

    /// A request of `version` started; it is in flight until the guard is dropped.
    pub fn start(self: &Arc<Self>, version: Version) -> InFlight {
        let mut id = 0;
        self.change(|state| {
            state.http1 = version < Version::HTTP_2;
            state.in_flight += 1;
            id = state.started;
            state.started += 1;
        });
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
        self.lock().expiry(limits)
    }

    /// Arm the watchdog's timer at `now`: the next deadline, or `now` plus the write timeout when
    /// there is none. Until it fires, [`Activity::rearm`] resolves if a change brings an earlier one.
    pub fn wake_at(&self, limits: &ListenerLimits, now: Instant) -> Instant {
        let mut state = self.lock();
        let at = state.expiry(limits).map_or(now + limits.write_timeout, |(at, _)| at);
        state.armed = Some((at, *limits));
        at
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
        self.activity.change(|state| {
            state.responding.insert(self.id, Instant::now());
        });
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.activity.change(|state| {
            state.in_flight = state.in_flight.saturating_sub(1);
            state.responding.remove(&self.id);
            if state.in_flight == 0 {
                state.idle_since = Instant::now();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt as _;

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
        let request = activity.start(Version::HTTP_2);
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
    fn after_an_http1_response_the_next_head_is_due_within_the_header_read_timeout() {
        for (version, allowed) in [
            (Version::HTTP_11, Duration::from_secs(1)),
            (Version::HTTP_10, Duration::from_secs(1)),
            (Version::HTTP_2, Duration::from_secs(5)),
        ] {
            let activity = Activity::new(Instant::now());
            drop(activity.start(version));
            let idle_since = activity.idle_since().expect("idle");
            assert_eq!(activity.expiry(&limits()), Some((idle_since + allowed, Expiry::Idle)), "{version:?}");
        }
        // The idle timeout still applies when it is the shorter one.
        let short_idle = ListenerLimits { idle_timeout: Duration::from_millis(500), ..limits() };
        let activity = Activity::new(Instant::now());
        drop(activity.start(Version::HTTP_11));
        let idle_since = activity.idle_since().expect("idle");
        assert_eq!(activity.expiry(&short_idle), Some((idle_since + Duration::from_millis(500), Expiry::Idle)));
    }

    #[test]
    fn the_oldest_waiting_response_sets_the_write_timer() {
        let activity = Activity::new(Instant::now());
        let first = activity.start(Version::HTTP_2);
        let second = activity.start(Version::HTTP_2);
        first.responding();
        let (at, _) = activity.expiry(&limits()).expect("timer");
        second.responding();
        assert_eq!(activity.expiry(&limits()).map(|(t, _)| t), Some(at));
        drop(first);
        assert!(activity.expiry(&limits()).is_some_and(|(t, why)| t >= at && why == Expiry::WriteStalled));
    }

    /// The watchdog as `connection::watch` runs it: its timer, armed again when it is woken.
    struct Watchdog<'a> {
        activity: &'a Activity,
        limits: ListenerLimits,
        armed: Instant,
        woken: usize,
    }

    impl<'a> Watchdog<'a> {
        fn arm(activity: &'a Activity, limits: ListenerLimits) -> Watchdog<'a> {
            let armed = activity.wake_at(&limits, Instant::now());
            Watchdog { activity, limits, armed, woken: 0 }
        }

        /// After a change: armed again if woken; then no deadline may come before the timer.
        fn check(&mut self, trace: &[Change]) {
            if self.activity.rearm().now_or_never().is_some() {
                self.woken += 1;
                self.armed = self.activity.wake_at(&self.limits, Instant::now());
            }
            if let Some((deadline, why)) = self.activity.expiry(&self.limits) {
                assert!(
                    deadline >= self.armed,
                    "{why:?} deadline before the timer after {trace:?} ({:?})",
                    self.limits
                );
            }
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Change {
        Start,
        Respond,
        End,
    }

    /// Apply `change` to the requests `open` on `activity` (respond and end act on the oldest
    /// request they can; a change with nothing to act on does nothing).
    fn apply(activity: &Arc<Activity>, change: Change, open: &mut Vec<(InFlight, bool)>) {
        match change {
            Change::Start => open.push((activity.start(Version::HTTP_2), false)),
            Change::Respond => {
                if let Some((request, ready)) = open.iter_mut().find(|(_, ready)| !ready) {
                    request.responding();
                    *ready = true;
                }
            }
            Change::End => drop((!open.is_empty()).then(|| open.remove(0))),
        }
    }

    /// No deadline ever comes before the watchdog's timer, which is armed again only when a change
    /// wakes it or the timer fires: checked over every sequence of five changes (a request
    /// starting, the oldest one getting its response ready, the oldest one ending), each 1 s or
    /// 30 s after the one before (long gaps let the timer fire and be armed at a far idle
    /// deadline), with the idle timeout shorter and longer than the write timeout and the defaults.
    #[tokio::test(start_paused = true)]
    async fn the_watchdog_timer_never_passes_a_deadline_a_change_brings() {
        const CHANGES: [Change; 3] = [Change::Start, Change::Respond, Change::End];
        let shorter_idle =
            ListenerLimits { idle_timeout: Duration::from_secs(2), write_timeout: Duration::from_secs(7), ..limits() };
        let mut checked = 0;
        for limits in [limits(), shorter_idle, ListenerLimits::default()] {
            for (sequence, gaps) in
                (0..CHANGES.len().pow(5)).flat_map(|sequence| (0..32).map(move |gaps| (sequence, gaps)))
            {
                let activity = Activity::new(Instant::now());
                let mut watchdog = Watchdog::arm(&activity, limits);
                let (mut open, mut trace) = (Vec::new(), Vec::new());
                for step in 0..5 {
                    let gap = if gaps >> step & 1 == 1 { 30 } else { 1 };
                    tokio::time::advance(Duration::from_secs(gap)).await;
                    if Instant::now() >= watchdog.armed {
                        // The timer fired: the watchdog looks and arms it again.
                        watchdog.armed = activity.wake_at(&limits, Instant::now());
                    }
                    let change = CHANGES[sequence / CHANGES.len().pow(step) % CHANGES.len()];
                    apply(&activity, change, &mut open);
                    trace.push(change);
                    watchdog.check(&trace);
                    checked += 1;
                }
            }
        }
        assert!(checked >= 3 * 5 * 243 * 32, "changes checked: {checked}");
    }

    /// On a busy connection most requests do not wake the watchdog: a thousand requests 5 ms
    /// apart (each started, answered and ended) wake it about once per write timeout.
    #[tokio::test(start_paused = true)]
    async fn requests_on_a_busy_connection_rarely_wake_the_watchdog() {
        let limits = ListenerLimits::default();
        let activity = Activity::new(Instant::now());
        let mut watchdog = Watchdog::arm(&activity, limits);
        let mut open = Vec::new();
        for _ in 0..1000 {
            for change in [Change::Start, Change::Respond, Change::End] {
                apply(&activity, change, &mut open);
                watchdog.check(&[change]);
            }
            tokio::time::advance(Duration::from_millis(5)).await;
            if Instant::now() >= watchdog.armed {
                watchdog.armed = activity.wake_at(&limits, Instant::now());
            }
        }
        let period = limits.write_timeout.as_millis();
        assert!(
            watchdog.woken <= usize::try_from(5000 / period + 1).unwrap_or(usize::MAX),
            "woken {} times",
            watchdog.woken
        );
    }
}
