//! A span exporter wrapper that reports export trouble once per outage instead of once per batch.
//!
//! Owns the log lines about export health: a warning when exports start failing, an info line when
//! they work again, nothing in between. The lines carry the error's kind only (timeout, shut down,
//! failure), never its text: the OTLP client's messages can quote the endpoint URL. It never retries
//! and never blocks a caller: failed batches are dropped, as the batch processor already does.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// Wraps `E`, logging export health transitions at most once per outage.
#[derive(Debug)]
pub struct QuietExporter<E> {
    inner: E,
    failing: AtomicBool,
    dropped_batches: AtomicU64,
}

impl<E> QuietExporter<E> {
    /// Wrap `inner`.
    pub fn new(inner: E) -> Self {
        QuietExporter { inner, failing: AtomicBool::new(false), dropped_batches: AtomicU64::new(0) }
    }

    /// Record the result of one export; returns the log line it called for, if any (for tests).
    pub fn observe(&self, result: &OTelSdkResult) -> Option<HealthChange> {
        match result {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    let dropped = self.dropped_batches.swap(0, Ordering::Relaxed);
                    tracing::info!(dropped_batches = dropped, "trace export works again");
                    return Some(HealthChange::Recovered { dropped_batches: dropped });
                }
                None
            }
            Err(err) => {
                self.dropped_batches.fetch_add(1, Ordering::Relaxed);
                if !self.failing.swap(true, Ordering::Relaxed) {
                    let kind = error_kind(err);
                    tracing::warn!(
                        error_kind = kind,
                        "trace export failing: spans are dropped until the OTLP endpoint answers again (calls are not affected)"
                    );
                    return Some(HealthChange::Failing { kind });
                }
                None
            }
        }
    }
}

/// A change of export health worth one log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthChange {
    /// Exports started failing.
    Failing {
        /// `timeout`, `shut_down` or `failure`.
        kind: &'static str,
    },
    /// Exports work again after this many dropped batches.
    Recovered {
        /// Batches dropped during the outage.
        dropped_batches: u64,
    },
}

fn error_kind(err: &OTelSdkError) -> &'static str {
    match err {
        OTelSdkError::Timeout(_) => "timeout",
        OTelSdkError::AlreadyShutdown => "shut_down",
        _ => "failure",
    }
}

impl<E: SpanExporter> SpanExporter for QuietExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        self.observe(&result);
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    impl SpanExporter for Nothing {
        async fn export(&self, _batch: Vec<SpanData>) -> OTelSdkResult {
            Ok(())
        }
    }

    #[test]
    fn an_outage_is_reported_once_and_its_end_once() {
        let quiet = QuietExporter::new(Nothing);
        let failure = Err(OTelSdkError::InternalFailure("http://user:pw@collector refused".into()));
        assert_eq!(quiet.observe(&Ok(())), None);
        assert_eq!(quiet.observe(&failure), Some(HealthChange::Failing { kind: "failure" }));
        for _ in 0..100 {
            assert_eq!(quiet.observe(&failure), None);
        }
        assert_eq!(quiet.observe(&Err(OTelSdkError::Timeout(Duration::from_secs(1)))), None);
        assert_eq!(quiet.observe(&Ok(())), Some(HealthChange::Recovered { dropped_batches: 102 }));
        assert_eq!(quiet.observe(&Ok(())), None);
        assert_eq!(
            quiet.observe(&Err(OTelSdkError::Timeout(Duration::from_secs(1)))),
            Some(HealthChange::Failing { kind: "timeout" })
        );
    }
}
