//! The connection slots of a listener: at most `max_connections` open at once. When all are
//! taken, the connection that has been idle longest (no request in flight: never sent one, or
//! waiting between requests) gives its slot to the new one and is told to close. So connections
//! that merely sit open can never lock out a client with a request to make; only connections with
//! requests in flight (themselves bounded by the in-flight cap and the timers) can fill the listener,
//! and then a new connection is refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::activity::Activity;

/// One open connection as the slots see it.
struct Open {
    activity: Arc<Activity>,
    stop: CancellationToken,
    permit: Option<OwnedSemaphorePermit>,
}

/// The slots of one listener.
pub struct Slots {
    free: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Open>>,
    next: AtomicU64,
}

/// A connection's slot; given back when dropped.
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().remove(&self.id);
    }
}

impl Slots {
    /// `max` slots (at least 1).
    pub fn new(max: usize) -> Arc<Slots> {
        Arc::new(Slots { free: Arc::new(Semaphore::new(max.max(1))), open: Mutex::default(), next: AtomicU64::new(0) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Open>> {
        // Every change leaves the map consistent before it could panic.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a new connection whose activity is `activity` and which closes when `stop` is
    /// cancelled: a free slot, else the slot of the connection idle longest (which is stopped);
    /// `None` when every open connection has a request in flight.
    pub fn take(self: &Arc<Self>, activity: Arc<Activity>, stop: CancellationToken) -> Option<Slot> {
        let mut open = self.lock();
        let permit = match Arc::clone(&self.free).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let victim = open
                    .iter_mut()
                    .filter(|(_, o)| o.permit.is_some())
                    .filter_map(|(_, o)| o.activity.idle_since().map(|since| (since, o)))
                    .min_by_key(|(since, _)| *since)
                    .map(|(_, o)| o)?;
                victim.stop.cancel();
                victim.permit.take()?
            }
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        open.insert(id, Open { activity, stop, permit: Some(permit) });
        Some(Slot { slots: Arc::clone(self), id })
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    #[test]
    fn the_longest_idle_connection_gives_its_slot_up() {
        let slots = Slots::new(2);
        let (first, second) = (Activity::new(Instant::now()), Activity::new(Instant::now()));
        let (first_stop, second_stop) = (CancellationToken::new(), CancellationToken::new());
        let _a = slots.take(Arc::clone(&first), first_stop.clone()).expect("free slot");
        let _b = slots.take(Arc::clone(&second), second_stop.clone()).expect("free slot");
        let busy = second.start(http::Version::HTTP_2);
        let _c = slots.take(Activity::new(Instant::now()), CancellationToken::new()).expect("an idle slot is taken");
        assert!(first_stop.is_cancelled() && !second_stop.is_cancelled());
        // Now: the newest connection is idle, the second busy; the first has no slot any more.
        let _d = slots.take(Activity::new(Instant::now()), CancellationToken::new()).expect("the newest idle one");
        drop(busy);
        assert!(slots.lock().values().filter(|o| o.permit.is_some()).count() == 2);
    }

    #[test]
    fn no_slot_when_every_connection_is_busy() {
        let slots = Slots::new(1);
        let activity = Activity::new(Instant::now());
        let _slot = slots.take(Arc::clone(&activity), CancellationToken::new()).expect("free slot");
        let _busy = activity.start(http::Version::HTTP_2);
        assert!(slots.take(Activity::new(Instant::now()), CancellationToken::new()).is_none());
    }

    #[test]
    fn a_closed_connection_frees_its_slot() {
        let slots = Slots::new(1);
        let slot = slots.take(Activity::new(Instant::now()), CancellationToken::new()).expect("free slot");
        drop(slot);
        let activity = Activity::new(Instant::now());
        let _busy = activity.start(http::Version::HTTP_2);
        let stop = CancellationToken::new();
        assert!(slots.take(activity, stop.clone()).is_some());
        assert!(!stop.is_cancelled());
    }
}
