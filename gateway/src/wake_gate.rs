//! Polling a task's work without waking the task from inside its own poll.
//!
//! Inside one connection task, parts wake each other while they are polled: hyper's server
//! dispatcher and the request body it feeds. Tokio's multi-thread scheduler answers a task that wakes itself while it runs by
//! rescheduling it as a yield, which also wakes an idle worker: a futex call, a context switch
//! and a worker that finds nothing to do, several times per request on a path whose own work
//! takes microseconds (seen with `strace`/`perf` under the benchmark). In tokio 1.54.1: a task
//! notified while it runs is rescheduled through `yield_now` (`runtime/task/harness.rs`), the
//! multi-thread handle's `yield_now` schedules it as a yield (`scheduler/multi_thread/handle.rs`),
//! and a yielded task always notifies a parked worker (`schedule_local` in `worker.rs`).
//!
//! A [`WakeGate`] polls through a waker of its own. A wake while the gate polls is only noted,
//! and the gate polls again at once; a wake at any other time (a socket became readable, a timer
//! fired) wakes the task as usual. After [`MAX_ROUNDS`] rounds that each woke again (Tokio's
//! cooperative budget spent, say) the gate yields to the scheduler like a self-wake would.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// Rounds of polling in one poll of the task before yielding to the scheduler.
pub const MAX_ROUNDS: usize = 16;

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const POLLING_WOKEN: u8 = 2;

/// A waker that turns wakes during the gate's own polling into another round of polling.
#[derive(Debug)]
pub struct WakeGate {
    shared: Arc<Shared>,
    waker: Waker,
}

#[derive(Debug, Default)]
struct Shared {
    state: AtomicU8,
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // While polling: note it (the gate polls again). Otherwise: wake the task.
        if let Err(IDLE) = self.state.compare_exchange(POLLING, POLLING_WOKEN, Ordering::SeqCst, Ordering::SeqCst) {
            self.task.wake();
        }
    }
}

impl Default for WakeGate {
    fn default() -> WakeGate {
        let shared = Arc::new(Shared::default());
        WakeGate { waker: Waker::from(Arc::clone(&shared)), shared }
    }
}

impl WakeGate {
    /// Poll `step` with the gate's waker until it is ready or a round passes with no wake.
    pub fn poll<T>(&self, cx: &mut Context<'_>, mut step: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        self.shared.task.register(cx.waker());
        let mut gated = Context::from_waker(&self.waker);
        for _ in 0..MAX_ROUNDS {
            self.shared.state.store(POLLING, Ordering::SeqCst);
            if let Poll::Ready(output) = step(&mut gated) {
                self.shared.state.store(IDLE, Ordering::SeqCst);
                return Poll::Ready(output);
            }
            if self.shared.state.compare_exchange(POLLING, IDLE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return Poll::Pending;
            }
        }
        self.shared.state.store(IDLE, Ordering::SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Run `future` through a [`WakeGate`] of its own (a whole connection task, say).
pub async fn gated<F: Future>(future: F) -> F::Output {
    let gate = WakeGate::default();
    let mut future = pin!(future);
    poll_fn(|cx| gate.poll(cx, |gated| future.as_mut().poll(gated))).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts how often the task was woken.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A task waker counting its wakes, and a fresh gate.
    fn setup() -> (Arc<Counter>, Waker, WakeGate) {
        let counter = Arc::new(Counter::default());
        (Arc::clone(&counter), Waker::from(counter), WakeGate::default())
    }

    /// Poll `gate` once with a step that stays pending; the waker the step was given (what a
    /// socket would keep).
    fn pending_poll(gate: &WakeGate, cx: &mut Context<'_>) -> Waker {
        let mut kept = None;
        let polled: Poll<()> = gate.poll(cx, |gated| {
            kept = Some(gated.waker().clone());
            Poll::Pending
        });
        assert_eq!(polled, Poll::Pending);
        kept.expect("the step ran")
    }

    #[test]
    fn a_wake_during_polling_polls_again_instead_of_waking_the_task() {
        let (counter, task, gate) = setup();
        let mut cx = Context::from_waker(&task);
        let mut rounds = 0;
        // The first round wakes itself (an answer handed over); the second finds it ready.
        let polled = gate.poll(&mut cx, |gated| {
            rounds += 1;
            if rounds == 1 {
                gated.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(rounds)
            }
        });
        assert_eq!(polled, Poll::Ready(2));
        assert_eq!(counter.0.load(Ordering::SeqCst), 0, "the task was not rescheduled");
    }

    #[test]
    fn a_wake_after_polling_wakes_the_task() {
        let (counter, task, gate) = setup();
        let mut cx = Context::from_waker(&task);
        let kept = pending_poll(&gate, &mut cx);
        assert_eq!(counter.0.load(Ordering::SeqCst), 0);
        // The socket becomes readable later: the task must run.
        kept.wake();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_step_that_keeps_waking_itself_yields_after_the_round_limit() {
        let (counter, task, gate) = setup();
        let mut cx = Context::from_waker(&task);
        let mut rounds = 0;
        let polled: Poll<()> = gate.poll(&mut cx, |gated| {
            rounds += 1;
            gated.waker().wake_by_ref();
            Poll::Pending
        });
        assert_eq!(polled, Poll::Pending);
        assert_eq!(rounds, MAX_ROUNDS);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "yielded: the task runs again");
    }
}
