//! Which reactor the sockets opened on the current thread belong to.
//!
//! A socket is registered with the reactor of the runtime it was opened on. On a connection thread
//! ([`crate::listener::threads`]) that reactor is the thread's own: a pooled upstream connection
//! opened there and leased by a call on another thread would have its readiness seen by the first
//! thread, which then wakes the second through its driver for every answer (measured at 32
//! connections: 0.94 such wake-ups, each an `eventfd` write, per request). Pools use [`owner`] to
//! hand a connection only to calls on the thread it belongs to.

use std::cell::Cell;
use std::thread::ThreadId;

thread_local! {
    /// This thread's id once it is marked (read on every pool lease: no `thread::current()` then).
    static OWN_REACTOR: Cell<Option<ThreadId>> = const { Cell::new(None) };
}

/// Mark the current thread as running a runtime of its own, for the rest of its life.
pub fn mark_current_thread() {
    OWN_REACTOR.with(|own| own.set(Some(std::thread::current().id())));
}

/// The thread whose reactor a socket opened here belongs to: this thread when it runs a runtime of
/// its own, `None` on the shared runtime (whose workers share one reactor).
pub fn owner() -> Option<ThreadId> {
    OWN_REACTOR.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_marked_thread_owns_its_sockets() {
        assert_eq!(owner(), None);
        let marked = std::thread::spawn(|| {
            mark_current_thread();
            (owner(), std::thread::current().id())
        })
        .join()
        .expect("thread");
        assert_eq!(marked.0, Some(marked.1));
        assert_eq!(owner(), None, "marking is per thread");
    }
}
