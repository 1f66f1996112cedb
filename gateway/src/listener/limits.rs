//! The numbers that bound a listener, their defaults, and the one adjustment made from the process's
//! open-file limit. Pure; no I/O but reading `/proc/self/limits` in [`open_file_limit`].

use std::time::Duration;

/// Default most open connections of the data port.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default most requests being served at once on the data port.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// Default time to receive a complete request head.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a connection may stay open with no request in flight.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time to receive a whole request body.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time to send a whole response once its head is ready.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time in-flight requests get to finish after a shutdown signal.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// Default most bytes of request head per connection (HTTP/1 read buffer, HTTP/2 header list).
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
/// Default most concurrent HTTP/2 streams per connection.
pub const DEFAULT_H2_MAX_STREAMS: u32 = 32;
/// Default most bytes of response bodies held for readers that have not taken them yet.
pub const DEFAULT_MAX_HELD_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// Responses up to this size are never counted against the held-bytes budget (every ordinary
/// answer: a budget exhausted by slow readers of large answers never refuses a small one).
pub const UNCOUNTED_RESPONSE_BYTES: usize = 64 * 1024;
/// Largest request body of any route (Nexent's 1 MiB); routes enforce their own lower limits.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Connections of the admin port (health, readiness, metrics): enough for probes and scrapers.
pub const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Requests served at once on the admin port.
pub const ADMIN_MAX_IN_FLIGHT: usize = 32;
/// File descriptors kept free for everything but the listeners' connections: upstream
/// connections, config and Secret files, Redis, the admin port's connections, logs.
pub const RESERVED_FILES: u64 = 256;
/// HTTP/2 flow-control window per stream (bytes the client may send before the gateway reads).
pub const H2_STREAM_WINDOW: u32 = 256 * 1024;
/// HTTP/2 flow-control window per connection.
pub const H2_CONNECTION_WINDOW: u32 = 1024 * 1024;
/// Most bytes HTTP/2 buffers per stream for a reader that does not read.
pub const H2_MAX_SEND_BUFFER: usize = 256 * 1024;

/// Everything a listener bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerLimits {
    /// Most open connections; more are answered with a short 503 and closed.
    pub max_connections: usize,
    /// Most requests served at once; more are answered 503 at once.
    pub max_in_flight: usize,
    /// A connection must send a complete request head within this after connecting (any protocol,
    /// including the HTTP/2 preface) and, on HTTP/1, after its previous response.
    pub header_read_timeout: Duration,
    /// A connection with no request in flight is closed after this (HTTP/2 keep-alive; HTTP/1
    /// connections are closed by the header-read timeout first).
    pub idle_timeout: Duration,
    /// A request body must arrive whole within this of the request head (408 otherwise).
    pub body_read_timeout: Duration,
    /// A response must be sent whole within this of its head being ready; otherwise the connection
    /// is dropped (a reader that never reads).
    pub write_timeout: Duration,
    /// Bytes of request head per connection (HTTP/1 read buffer, HTTP/2 header list).
    pub max_header_bytes: usize,
    /// Concurrent HTTP/2 streams per connection.
    pub h2_max_streams: u32,
    /// Most bytes of response bodies over [`UNCOUNTED_RESPONSE_BYTES`] held at once for readers
    /// that have not taken them yet (and, when the budget is shared with the engine, upstream
    /// answers being read); a larger answer beyond it is refused with 503 (its body freed at once)
    /// instead of held. Bounds the memory stalled readers can pin until the write timeout.
    pub max_held_response_bytes: usize,
}

impl Default for ListenerLimits {
    fn default() -> Self {
        ListenerLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
            h2_max_streams: DEFAULT_H2_MAX_STREAMS,
            max_held_response_bytes: DEFAULT_MAX_HELD_RESPONSE_BYTES,
        }
    }
}

impl ListenerLimits {
    /// The admin port's limits: the data port's timers, small fixed capacity.
    pub fn admin(&self) -> ListenerLimits {
        ListenerLimits { max_connections: ADMIN_MAX_CONNECTIONS, max_in_flight: ADMIN_MAX_IN_FLIGHT, ..*self }
    }
}

/// The data port's connection cap given the open-file limit `soft_limit` (`None`: unlimited): the
/// requested cap, lowered so [`RESERVED_FILES`] descriptors stay free for upstream calls, config
/// reloads and the admin port (at least 1). Without this, idle connections could use up every
/// descriptor and make searches and reloads fail.
pub fn effective_max_connections(requested: usize, soft_limit: Option<u64>) -> usize {
    let Some(limit) = soft_limit else { return requested.max(1) };
    let available = usize::try_from(limit.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX);
    requested.min(available).max(1)
}

/// The soft "Max open files" limit from `/proc/self/limits` text; `None` when unlimited or absent.
pub fn parse_open_file_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files").split_whitespace().next()?.parse().ok()
}

/// This process's soft open-file limit, when it can be read (Linux `/proc`).
pub fn open_file_limit() -> Option<u64> {
    std::fs::read_to_string("/proc/self/limits").ok().as_deref().and_then(parse_open_file_limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_leaves_descriptors_for_everything_else() {
        assert_eq!(effective_max_connections(1024, None), 1024);
        assert_eq!(effective_max_connections(1024, Some(1_048_576)), 1024);
        assert_eq!(effective_max_connections(1024, Some(512)), 256);
        assert_eq!(effective_max_connections(1024, Some(100)), 1);
        assert_eq!(effective_max_connections(0, None), 1);
    }

    #[test]
    fn open_file_limit_is_read_from_proc_limits() {
        let text = "Limit                     Soft Limit           Hard Limit           Units     \n\
                    Max cpu time              unlimited            unlimited            seconds   \n\
                    Max open files            512                  524288               files     \n";
        assert_eq!(parse_open_file_limit(text), Some(512));
        let unlimited = text.replace("512                  524288", "unlimited            unlimited");
        assert_eq!(parse_open_file_limit(&unlimited), None);
        assert_eq!(parse_open_file_limit(""), None);
    }
}
