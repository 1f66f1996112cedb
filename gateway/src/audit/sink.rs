//! Where audit events go: one JSON line each, written by a thread of its own so the request path
//! never waits for a disk or a pipe. The queue between them is bounded: when it is full the event
//! is dropped and counted (`memgate_gateway_audit_events_dropped_total`), the request goes on.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use super::AuditEvent;
use crate::metrics::AuditCounters;

/// Events held between the request path and the writer by default.
pub const DEFAULT_QUEUE_EVENTS: usize = 4096;

/// Where the events are written (`--audit-log`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Standard output (`-`); the gateway's operational logs go to standard error.
    Stdout,
    /// A file, appended to (created with mode 0600 when missing).
    File(PathBuf),
}

impl Destination {
    /// `-` is standard output, anything else a file path.
    pub fn parse(raw: &str) -> Result<Destination, String> {
        match raw {
            "-" => Ok(Destination::Stdout),
            "" => Err("must be a file path or - for standard output".into()),
            path => Ok(Destination::File(PathBuf::from(path))),
        }
    }
}

/// The request path's handle on the audit stream; cheap to clone.
#[derive(Debug, Clone)]
pub struct AuditLog {
    queue: SyncSender<AuditEvent>,
    counters: AuditCounters,
}

impl AuditLog {
    /// Open `destination` and start the writer thread with room for `queue_events` events.
    pub fn start(destination: &Destination, queue_events: usize, counters: AuditCounters) -> std::io::Result<AuditLog> {
        let out: Box<dyn Write + Send> = match destination {
            Destination::Stdout => Box::new(std::io::stdout()),
            Destination::File(path) => {
                let mut options = OpenOptions::new();
                options.create(true).append(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                Box::new(options.open(path)?)
            }
        };
        let (queue, events) = sync_channel(queue_events.max(1));
        let writer_counters = counters.clone();
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || write_events(events, BufWriter::new(out), &writer_counters))?;
        Ok(AuditLog { queue, counters })
    }

    /// Hand `event` to the writer without waiting; dropped and counted when the queue is full.
    pub fn record(&self, event: AuditEvent) {
        match self.queue.try_send(event) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.dropped.inc();
            }
        }
    }
}

/// The writer thread: one line per event, flushed whenever the queue runs empty (so a reader of
/// the file sees every event of a quiet moment). A write error drops that event, counted, and the
/// thread goes on with the next.
fn write_events(events: Receiver<AuditEvent>, mut out: BufWriter<Box<dyn Write + Send>>, counters: &AuditCounters) {
    let mut line = Vec::with_capacity(1024);
    while let Ok(first) = events.recv() {
        let mut next = Some(first);
        while let Some(event) = next {
            line.clear();
            let written = serde_json::to_writer(&mut line, &event).is_ok() && {
                line.push(b'\n');
                out.write_all(&line).is_ok()
            };
            if written {
                counters.written.inc()
            } else {
                counters.dropped.inc()
            };
            next = events.try_recv().ok();
        }
        if out.flush().is_err() {
            tracing::warn!("audit log: flush failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dash_is_stdout_and_anything_else_a_path() {
        assert_eq!(Destination::parse("-"), Ok(Destination::Stdout));
        assert_eq!(Destination::parse("/var/log/audit.jsonl"), Ok(Destination::File("/var/log/audit.jsonl".into())));
        assert!(Destination::parse("").is_err());
    }
}
