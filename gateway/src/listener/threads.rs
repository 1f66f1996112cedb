//! Connection threads: a fixed set of OS threads, each running a single-threaded Tokio runtime, on
//! which accepted connections are served whole (nginx's worker model).
//!
//! On the shared multi-threaded runtime a connection's task, woken by its socket on one worker,
//! often has the idle worker woken to steal it: a futex call and a context switch per request
//! (perf stat at 32 connections: 1.0 context switch per request, nginx 0.37). Here a connection is
//! handed once, at accept, to one thread chosen in turn; everything it does afterwards (hyper,
//! the router, the upstream call, timers) runs on that thread's runtime, with no wake-up crossing
//! threads. State shared between connections (config, pools, limits, metrics) is the same `Arc`s
//! as before.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::runtime::{Builder, Handle};
use tokio::sync::oneshot;

/// The connection threads of one listener. Dropping it stops them: the tasks still on them are
/// dropped (the listener has finished draining by then).
pub struct ConnectionThreads {
    handles: Vec<Handle>,
    next: AtomicUsize,
    /// Dropped with the set: each thread's runtime returns from `block_on` and shuts down.
    _stops: Vec<oneshot::Sender<()>>,
}

impl std::fmt::Debug for ConnectionThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionThreads").field("threads", &self.handles.len()).finish()
    }
}

impl ConnectionThreads {
    /// Start `count` threads (at least one), named `{name}-conn-{n}`.
    pub fn start(name: &str, count: usize) -> std::io::Result<ConnectionThreads> {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for n in 0..count.max(1) {
            let runtime = Builder::new_current_thread().enable_all().build()?;
            handles.push(runtime.handle().clone());
            let (stop, stopped) = oneshot::channel::<()>();
            stops.push(stop);
            std::thread::Builder::new().name(format!("{name}-conn-{n}")).spawn(move || {
                crate::local_reactor::mark_current_thread();
                // Returns when the set is dropped; dropping the runtime then drops its tasks.
                let _ = runtime.block_on(stopped);
            })?;
        }
        Ok(ConnectionThreads { handles, next: AtomicUsize::new(0), _stops: stops })
    }

    /// How many threads serve connections.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Always false: a set has at least one thread.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Run `future` on the next thread in turn.
    pub fn spawn<F>(&self, future: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        drop(self.handles[n].spawn(future));
    }
}

/// How many connection threads `--connection-threads 0` means: one per CPU this process may use
/// (its cgroup's CPU quota counted), at least one.
pub fn default_count() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn work_is_spread_over_the_named_threads_in_turn() {
        let threads = ConnectionThreads::start("test", 3).expect("threads start");
        assert_eq!(threads.len(), 3);
        let seen = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
        let (done, mut finished) = tokio::sync::mpsc::channel::<()>(6);
        for _ in 0..6 {
            let (seen, done) = (Arc::clone(&seen), done.clone());
            threads.spawn(async move {
                // Timers and I/O work on these runtimes.
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                let name = std::thread::current().name().unwrap_or_default().to_string();
                *seen.lock().expect("lock").entry(name).or_default() += 1;
                let _ = done.send(()).await;
            });
        }
        for _ in 0..6 {
            finished.recv().await.expect("every task finishes");
        }
        let seen = seen.lock().expect("lock").clone();
        let expected: BTreeMap<String, usize> = (0..3).map(|n| (format!("test-conn-{n}"), 2)).collect();
        assert_eq!(seen, expected);
    }

    #[tokio::test]
    async fn dropping_the_set_drops_what_still_runs_on_it() {
        let threads = ConnectionThreads::start("drop", 1).expect("threads start");
        let (held, mut released) = tokio::sync::mpsc::channel::<()>(1);
        threads.spawn(async move {
            let _held = held;
            std::future::pending::<()>().await;
        });
        drop(threads);
        // The sender inside the pending task is dropped with its runtime: recv ends.
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), released.recv()).await;
        assert_eq!(ended, Ok(None));
    }

    #[test]
    fn the_default_is_at_least_one_thread() {
        assert!(default_count() >= 1);
    }
}
