//! One accepted connection: HTTP/1 or HTTP/2 (detected from its first bytes), its protocol limits,
//! and the watchdog that closes it when its timers run out or the listener shuts down.
//!
//! hyper bounds the size of an HTTP/1 request head (read buffer, field count) and HTTP/2
//! (windows, header list, streams, pings). What hyper does not bound is done here: hyper-util's
//! automatic version detection reads the first bytes with no timer at all (hyper-util 0.1.21
//! `src/server/conn/auto/mod.rs`, `ReadVersion::poll` loops on `poll_read` until it has 24 bytes
//! or a mismatch with the HTTP/2 preface), so a connection that sends nothing, or a prefix of the
//! preface, would be held forever; and HTTP/2 has no idle timeout. The watchdog ([`watch`])
//! therefore closes a connection that has had no request in flight for the header-read timeout
//! (before its first request, and on HTTP/1 after each response: the time its next head may take,
//! which hyper's own `header_read_timeout` would bound with a timer made, armed and cancelled per
//! request) or the idle timeout (HTTP/2 after a request), and drops one whose response has
//! waited for the write timeout (a reader that never reads), resetting it so the kernel drops the
//! unsent answer too.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::activity::{Activity, Expiry};
use super::limits::{H2_CONNECTION_WINDOW, H2_MAX_SEND_BUFFER, H2_STREAM_WINDOW, ListenerLimits};
use super::on_wake::WakeFlag;
use super::request::{self, Shared};
use super::stream;

/// How long a connection closed gracefully for idleness may take to finish before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// Interval and timeout of HTTP/2 keep-alive pings (a peer that vanished is noticed).
const H2_PING: Duration = Duration::from_secs(20);
/// hyper's smallest allowed HTTP/1 buffer.
const MIN_H1_BUFFER: usize = 8192;

/// The protocol builder carrying `limits`.
pub fn builder(limits: &ListenerLimits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // The next head after a response is bounded by the watchdog (`Activity::expiry`, from the
        // moment the response's body is handed over). hyper reads a next head only once the
        // previous exchange is done (`can_read_head`: reading back at `Init`), so the deadline
        // starts where hyper's own would. That timer is made (a boxed sleep), armed and dropped
        // for every head of a keep-alive connection, with a read poll after each response to start
        // it (hyper 1.12 `proto/h1/conn.rs`, `poll_read_head` and `idle`).
        .header_read_timeout(None)
        .max_buf_size(limits.max_header_bytes.max(MIN_H1_BUFFER))
        // At most 100 header fields: hyper's default (`DEFAULT_MAX_HEADERS`), left unset on
        // purpose. Setting it, even to 100, makes hyper build its header arrays per request by
        // copying an element into each slot (`smallvec![..; cap]` in `proto/h1/role.rs`, hyper
        // 1.12) instead of leaving them uninitialised: about 2 % of the user-space instructions
        // of a search (callgrind). `hostile_listener.rs` holds the limit.
        .half_close(false)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.h2_max_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .max_send_buf_size(H2_MAX_SEND_BUFFER)
        .keep_alive_interval(H2_PING)
        .keep_alive_timeout(H2_PING)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(128);
    builder
}

/// Serve `stream` (whose activity `activity` records) until it ends, its timers run out, or
/// `shutdown` turns true or `evicted` is cancelled (then in-flight requests finish and the
/// connection closes gracefully).
pub async fn watch(
    stream: TcpStream,
    client: super::ClientAddr,
    builder: Arc<Builder<TokioExecutor>>,
    shared: Arc<Shared>,
    activity: Arc<Activity>,
    evicted: CancellationToken,
    mut shutdown: watch::Receiver<bool>,
) {
    let limits = shared.limits;
    let requests = Arc::clone(&activity);
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        request::serve(Arc::clone(&shared), Arc::clone(&requests), client, request)
    });
    let (stream, resetter) = stream::share(stream);
    let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
    tokio::pin!(connection);
    // One flag per rare branch: polled only once woken, not on every wake of the connection.
    let (shutdown_flag, evicted_flag, timer_flag) = (WakeFlag::default(), WakeFlag::default(), WakeFlag::default());
    loop {
        let at = activity.wake_at(&limits, Instant::now());
        tokio::select! {
            biased;
            _ = connection.as_mut() => return,
            changed = shutdown_flag.on_wake(shutdown.changed()) => {
                if changed.is_err() || *shutdown.borrow() {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.as_mut().await;
                    return;
                }
            }
            () = activity.rearm() => {}
            () = evicted_flag.on_wake(evicted.cancelled()) => {
                // Idle, and its slot went to a new connection: close now (gracefully, should a
                // request have started meanwhile).
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(CLOSE_GRACE, connection.as_mut()).await;
                return;
            }
            () = timer_flag.on_wake(tokio::time::sleep_until(at)) => {
                // Look again: a request may have started or ended while sleeping.
                let due = activity.expiry(&limits).filter(|(at, _)| *at <= Instant::now()).map(|(_, e)| e);
                match due {
                    Some(Expiry::Idle) => {
                        connection.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(CLOSE_GRACE, connection.as_mut()).await;
                        return;
                    }
                    Some(Expiry::WriteStalled) => {
                        tracing::debug!("connection reset: a response was not read within the write timeout");
                        resetter.reset_on_close();
                        return;
                    }
                    None => {}
                }
            }
        }
    }
}
