//! The one budget of large answer bytes a gateway holds (`--max-held-response-bytes`): upstream
//! answers the engine is reading and answers waiting for clients that have not read them yet.
//!
//! Owns the counting: KiB permits of one semaphore, taken for a body over
//! [`UNCOUNTED_RESPONSE_BYTES`] and returned when the permit is dropped (the body read and turned
//! into items, or sent, or dropped). Never waits: a body that does not fit is refused at once by
//! its taker (the listener answers 503; the engine fails the call with `EngineError::HeldFull`,
//! answered the same way, before reading the body), so stalled readers cannot make the process
//! hold more than the budget of large answers plus what the calls in flight are building.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use crate::listener::limits::UNCOUNTED_RESPONSE_BYTES;

/// The budget; clones share it.
#[derive(Debug, Clone)]
pub struct HeldBytes {
    kib: Arc<Semaphore>,
    total_kib: usize,
}

/// The budget is spent.
#[derive(Debug)]
pub struct HeldFull;

impl HeldBytes {
    /// A budget of `max_bytes` (at least 1 KiB).
    pub fn new(max_bytes: usize) -> HeldBytes {
        let total_kib = (max_bytes / 1024).max(1);
        HeldBytes { kib: Arc::new(Semaphore::new(total_kib)), total_kib }
    }

    /// Hold a body of `length` bytes (`None`: unknown, not counted) until the returned permit is
    /// dropped; bodies of at most [`UNCOUNTED_RESPONSE_BYTES`] are never counted.
    pub fn take(&self, length: Option<u64>) -> Result<Option<OwnedSemaphorePermit>, HeldFull> {
        let Some(length) = length.filter(|n| *n > UNCOUNTED_RESPONSE_BYTES as u64) else { return Ok(None) };
        let kib = usize::try_from(length.div_ceil(1024)).unwrap_or(usize::MAX).min(self.total_kib);
        let kib = u32::try_from(kib).unwrap_or(u32::MAX);
        Arc::clone(&self.kib).try_acquire_many_owned(kib).map(Some).map_err(|_| HeldFull)
    }

    /// KiB of the budget free now.
    pub fn available_kib(&self) -> usize {
        self.kib.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_answers_share_the_held_budget_and_small_ones_never_count() {
        let held = HeldBytes::new(4 * 1024 * 1024);
        assert!(held.take(Some(64 * 1024)).expect("small").is_none(), "at most 64 KiB is not counted");
        assert!(held.take(None).expect("unknown").is_none(), "streams are not counted");
        let first = held.take(Some(3 * 1024 * 1024)).expect("fits");
        assert_eq!(held.available_kib(), 1024);
        assert!(held.take(Some(2 * 1024 * 1024)).is_err(), "over the budget");
        assert!(held.take(Some(10)).expect("small").is_none(), "small answers still pass");
        drop(first);
        assert_eq!(held.available_kib(), 4096, "returned when the body is sent or dropped");
        let huge = held.take(Some(100 * 1024 * 1024)).expect("a body larger than the budget takes all of it");
        assert_eq!(held.available_kib(), 0);
        drop(huge);
    }

    #[test]
    fn clones_share_one_budget() {
        let held = HeldBytes::new(1024 * 1024);
        let engine_side = held.clone();
        let taken = engine_side.take(Some(700 * 1024)).expect("fits");
        assert!(held.take(Some(700 * 1024)).is_err(), "the listener sees what the engine holds");
        drop(taken);
        assert!(held.take(Some(700 * 1024)).is_ok());
    }
}
