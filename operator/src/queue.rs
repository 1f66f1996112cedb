//! The work queue between watch events and reconciles.
//!
//! Owns ordering and timing only: a key added many times before it runs runs once (dedupe); a key
//! is never reconciled by two workers at once, and one added while it runs runs again right after
//! (the `dirty`/`processing` sets of client-go's workqueue, kubernetes/kubernetes
//! `staging/src/k8s.io/client-go/util/workqueue/queue.go`); a failed key waits an exponential
//! backoff of its own while every other key keeps flowing. It never decides what a key means.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::index::Key;

/// Exponential backoff per key: `base`, doubled on each consecutive failure, at most `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// Delay after the first failure.
    pub base: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Duration::from_millis(500), max: Duration::from_secs(300) }
    }
}

impl Backoff {
    /// Delay after `failures` consecutive failures (1 = the first).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.base.saturating_mul(1 << doublings).min(self.max)
    }
}

/// The queue's bookkeeping, free of clocks and tasks so it can be tested directly.
#[derive(Debug, Default)]
struct State {
    /// Keys waiting, each with the earliest time it may run.
    due: BTreeMap<Key, Instant>,
    /// Keys being reconciled now.
    running: BTreeSet<Key>,
    /// Keys added while running: scheduled when their run finishes.
    again: BTreeMap<Key, Instant>,
    /// Consecutive failures per key.
    failures: BTreeMap<Key, u32>,
}

impl State {
    fn schedule(&mut self, key: Key, at: Instant) {
        let slot = if self.running.contains(&key) { &mut self.again } else { &mut self.due };
        slot.entry(key).and_modify(|t| *t = (*t).min(at)).or_insert(at);
    }

    /// The key due earliest, if it is due at `now`; it is then running.
    fn take(&mut self, now: Instant) -> Option<Key> {
        let (key, _) = self.due.iter().filter(|(_, at)| **at <= now).min_by_key(|(_, at)| **at)?;
        let key = key.clone();
        self.due.remove(&key);
        self.running.insert(key.clone());
        Some(key)
    }

    fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    /// `key` finished; on failure it comes back after its backoff.
    fn finish(&mut self, key: &Key, succeeded: bool, now: Instant, backoff: Backoff) {
        self.running.remove(key);
        if succeeded {
            self.failures.remove(key);
        } else {
            let failures = self.failures.entry(key.clone()).or_default();
            *failures = failures.saturating_add(1);
            let at = now + backoff.delay(*failures);
            self.schedule(key.clone(), at);
        }
        if let Some(at) = self.again.remove(key) {
            // A change arrived while it ran: run again, but a failing key still waits its backoff.
            let at =
                if succeeded { at } else { at.max(now + backoff.delay(self.failures.get(key).copied().unwrap_or(1))) };
            self.schedule(key.clone(), at);
        }
    }
}

/// The queue shared by the watch tasks (which add) and the workers (which take and finish).
#[derive(Debug, Default)]
pub struct WorkQueue {
    state: Mutex<State>,
    wake: Notify,
    backoff: Backoff,
}

impl WorkQueue {
    /// An empty queue with this backoff.
    pub fn new(backoff: Backoff) -> WorkQueue {
        WorkQueue { backoff, ..WorkQueue::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a harmful way.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reconcile `key` as soon as possible.
    pub fn add(&self, key: Key) {
        self.add_after(key, Duration::ZERO);
    }

    /// Reconcile `key` after `delay` (an earlier request wins).
    pub fn add_after(&self, key: Key, delay: Duration) {
        self.state().schedule(key, Instant::now() + delay);
        self.wake.notify_waiters();
    }

    /// Wait for the next due key that no other worker holds; call [`WorkQueue::finish`] after.
    pub async fn next(&self) -> Key {
        loop {
            let notified = self.wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let next_due = {
                let mut state = self.state();
                if let Some(key) = state.take(Instant::now()) {
                    return key;
                }
                state.next_due()
            };
            match next_due {
                Some(at) => {
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// `key` finished running; a failure schedules it again after its backoff.
    pub fn finish(&self, key: &Key, succeeded: bool) {
        self.state().finish(key, succeeded, Instant::now(), self.backoff);
        self.wake.notify_waiters();
    }

    /// Keys waiting (due now or later), for the queue-depth metric.
    pub fn depth(&self) -> usize {
        let state = self.state();
        state.due.len() + state.again.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Key {
        Key::Namespace(name.into())
    }

    const BACKOFF: Backoff = Backoff { base: Duration::from_secs(1), max: Duration::from_secs(8) };

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let delays: Vec<u64> = (1..=6).map(|n| BACKOFF.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 8, 8]);
        assert_eq!(BACKOFF.delay(u32::MAX), Duration::from_secs(8));
    }

    #[test]
    fn a_key_added_many_times_runs_once() {
        let now = Instant::now();
        let mut state = State::default();
        for _ in 0..5 {
            state.schedule(ns("a"), now);
        }
        assert_eq!(state.take(now), Some(ns("a")));
        assert_eq!(state.take(now), None);
    }

    #[test]
    fn a_running_key_is_never_handed_out_twice_and_reruns_after_a_change() {
        let now = Instant::now();
        let mut state = State::default();
        state.schedule(ns("a"), now);
        assert_eq!(state.take(now), Some(ns("a")));
        state.schedule(ns("a"), now);
        assert_eq!(state.take(now), None, "still running");
        state.finish(&ns("a"), true, now, BACKOFF);
        assert_eq!(state.take(now), Some(ns("a")), "the change that arrived meanwhile");
    }

    #[test]
    fn a_failing_key_waits_its_backoff_while_others_flow() {
        let now = Instant::now();
        let mut state = State::default();
        state.schedule(ns("bad"), now);
        assert_eq!(state.take(now), Some(ns("bad")));
        state.finish(&ns("bad"), false, now, BACKOFF);
        state.schedule(ns("good"), now);
        assert_eq!(state.take(now), Some(ns("good")));
        assert_eq!(state.take(now), None, "bad waits");
        assert_eq!(state.take(now + Duration::from_secs(1)), Some(ns("bad")));
        state.finish(&ns("bad"), false, now, BACKOFF);
        assert_eq!(state.take(now + Duration::from_secs(1)), None, "second failure: 2 s");
        assert_eq!(state.take(now + Duration::from_secs(2)), Some(ns("bad")));
        state.finish(&ns("bad"), true, now, BACKOFF);
        assert!(state.failures.is_empty(), "success resets the backoff");
    }

    #[test]
    fn a_change_during_a_failing_run_does_not_skip_the_backoff() {
        let now = Instant::now();
        let mut state = State::default();
        state.schedule(ns("bad"), now);
        state.take(now);
        state.schedule(ns("bad"), now);
        state.finish(&ns("bad"), false, now, BACKOFF);
        assert_eq!(state.take(now), None);
        assert_eq!(state.take(now + Duration::from_secs(1)), Some(ns("bad")));
    }

    #[test]
    fn earliest_due_key_runs_first() {
        let now = Instant::now();
        let mut state = State::default();
        state.schedule(ns("later"), now + Duration::from_secs(5));
        state.schedule(ns("sooner"), now);
        assert_eq!(state.next_due(), Some(now));
        assert_eq!(state.take(now), Some(ns("sooner")));
        assert_eq!(state.take(now), None);
        assert_eq!(state.take(now + Duration::from_secs(5)), Some(ns("later")));
    }

    #[tokio::test]
    async fn workers_wait_for_delayed_keys_and_wake_on_new_ones() {
        let queue = std::sync::Arc::new(WorkQueue::new(BACKOFF));
        queue.add_after(ns("later"), Duration::from_millis(200));
        let waiter = tokio::spawn({
            let queue = std::sync::Arc::clone(&queue);
            async move { queue.next().await }
        });
        tokio::task::yield_now().await;
        queue.add(ns("now"));
        assert_eq!(waiter.await.expect("worker"), ns("now"));
        assert_eq!(queue.depth(), 1);
        assert_eq!(queue.next().await, ns("later"), "once its delay has passed");
    }
}
