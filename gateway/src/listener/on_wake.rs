//! Polling a rarely ready future only after it asked to be polled.
//!
//! A connection's watchdog waits on the connection and, beside it, on events that almost never
//! happen (the listener shutting down, the connection evicted, its timer). Every wake of the
//! connection task polls all of them: polling the shutdown channel's `changed()` or a cancellation
//! token's `cancelled()` takes a lock each time (tokio 1.54.1 `sync/notify.rs` updates the waiter
//! under the list's mutex; tokio-util 0.7 `tree_node::is_cancelled` locks the token's node), a few
//! times per request for nothing. An [`OnWake`] polls its future once, then again only after the
//! future woke the waker it was polled with; otherwise it answers `Pending` at the cost of two
//! atomic operations.
//!
//! Sound for any future that wakes its waker before it can become ready, as every tokio future
//! does (the contract of `Future::poll`); a future that relied on being polled for nothing would
//! hang here.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// The waker an [`OnWake`] polls its future with: notes the wake, then wakes the task. Kept
/// across the futures of a loop (one per branch), so a new future costs no allocation.
#[derive(Debug, Clone)]
pub struct WakeFlag {
    shared: Arc<Shared>,
    waker: Waker,
}

#[derive(Debug, Default)]
struct Shared {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl Default for WakeFlag {
    fn default() -> WakeFlag {
        let shared = Arc::new(Shared::default());
        WakeFlag { waker: Waker::from(Arc::clone(&shared)), shared }
    }
}

impl WakeFlag {
    /// `future`, polled the first time and then only after it woke its waker.
    pub fn on_wake<F: Future>(&self, future: F) -> OnWake<'_, F> {
        OnWake { flag: self, future, polled: false }
    }
}

pin_project_lite::pin_project! {
    /// See the module documentation; made by [`WakeFlag::on_wake`].
    #[derive(Debug)]
    pub struct OnWake<'a, F> {
        flag: &'a WakeFlag,
        #[pin]
        future: F,
        polled: bool,
    }
}

impl<F: Future> Future for OnWake<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let shared = &this.flag.shared;
        // Registered before the flag is read: a wake in between finds this task's waker.
        shared.task.register(cx.waker());
        // Cleared before polling: a wake during or after this poll sets it for the next one.
        let woken = shared.woken.swap(false, Ordering::AcqRel);
        if *this.polled && !woken {
            return Poll::Pending;
        }
        *this.polled = true;
        this.future.poll(&mut Context::from_waker(&this.flag.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;
    use std::sync::atomic::AtomicUsize;

    /// A future that counts its polls, keeps the last waker and is ready once `ready` is set.
    #[derive(Default)]
    struct Probe {
        polls: AtomicUsize,
        ready: AtomicBool,
        waker: std::sync::Mutex<Option<Waker>>,
    }

    struct Polled<'a>(&'a Probe);

    impl Future for Polled<'_> {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0.polls.fetch_add(1, Ordering::SeqCst);
            *self.0.waker.lock().expect("lock") = Some(cx.waker().clone());
            if self.0.ready.load(Ordering::SeqCst) { Poll::Ready(()) } else { Poll::Pending }
        }
    }

    /// Counts the task's wakes.
    #[derive(Default)]
    struct Task(AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_future_is_polled_first_then_only_after_its_wake_which_also_wakes_the_task() {
        let (probe, flag, task) = (Probe::default(), WakeFlag::default(), Arc::new(Task::default()));
        let task_waker = Waker::from(Arc::clone(&task));
        let mut cx = Context::from_waker(&task_waker);
        let mut waiting = pin!(flag.on_wake(Polled(&probe)));

        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(probe.polls.load(Ordering::SeqCst), 1, "the first poll reaches the future");
        for _ in 0..5 {
            assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
        }
        assert_eq!(probe.polls.load(Ordering::SeqCst), 1, "no wake, no poll");
        assert_eq!(task.0.load(Ordering::SeqCst), 0);

        // The future's event: it wakes the waker it was given, which wakes the task.
        probe.ready.store(true, Ordering::SeqCst);
        probe.waker.lock().expect("lock").take().expect("kept a waker").wake();
        assert_eq!(task.0.load(Ordering::SeqCst), 1, "the task is woken");
        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(probe.polls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_wake_during_the_futures_poll_is_kept_for_the_next_poll() {
        struct WakesItself<'a>(&'a AtomicUsize);
        impl Future for WakesItself<'_> {
            type Output = ();
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                // Pending twice, waking itself each time (a future that yields), then ready.
                if self.0.fetch_add(1, Ordering::SeqCst) < 2 {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }
        }
        let (polls, flag, task) = (AtomicUsize::new(0), WakeFlag::default(), Arc::new(Task::default()));
        let task_waker = Waker::from(Arc::clone(&task));
        let mut cx = Context::from_waker(&task_waker);
        let mut waiting = pin!(flag.on_wake(WakesItself(&polls)));
        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        assert_eq!(task.0.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn real_tokio_events_get_through() {
        let flag = WakeFlag::default();
        let token = tokio_util::sync::CancellationToken::new();
        let (sender, mut receiver) = tokio::sync::watch::channel(false);
        let cancel = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            cancel.cancel();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let _ = sender.send(true);
        });
        flag.on_wake(token.cancelled()).await;
        assert!(flag.on_wake(receiver.changed()).await.is_ok());
        assert!(*receiver.borrow());
        let started = tokio::time::Instant::now();
        flag.on_wake(tokio::time::sleep(std::time::Duration::from_millis(30))).await;
        assert!(started.elapsed() >= std::time::Duration::from_millis(30));
    }
}
