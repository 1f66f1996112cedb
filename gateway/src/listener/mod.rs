//! Accepting connections with every resource bounded, and shutting down without dropping requests.
//!
//! Owns the sockets: the accept loop, the connection cap, the per-connection protocol limits and
//! timers ([`connection`]), the in-flight cap and whole-body reading ([`request`]), and the drain on
//! shutdown. It never routes, authenticates or inspects a body's content (the router does).
//!
//! | limit | when exceeded |
//! |---|---|
//! | open connections ([`ListenerLimits::max_connections`], lowered to keep [`limits::RESERVED_FILES`] descriptors free) | the connection idle longest (no request in flight) is closed to make room ([`slots`]); when every connection has a request in flight, the new one gets a short `503` (HTTP/1, `Connection: close`, `Retry-After: 1`) and is closed |
//! | requests in flight ([`ListenerLimits::max_in_flight`]) | `503` `provider_error` retryable, `Retry-After: 1` |
//! | request head: [`ListenerLimits::header_read_timeout`] from connecting (any protocol) or from the previous HTTP/1 response | connection closed |
//! | request head size: [`ListenerLimits::max_header_bytes`], 100 HTTP/1 fields | `431` (HTTP/1) / stream reset (HTTP/2) |
//! | body: [`ListenerLimits::body_read_timeout`] from the head, at most 1 MiB | `408` / `413`, connection closed |
//! | no request in flight for [`ListenerLimits::idle_timeout`] | connection closed gracefully (HTTP/2 `GOAWAY`) |
//! | a response not sent within [`ListenerLimits::write_timeout`] of its head | connection reset (the unsent answer is discarded, also from kernel buffers) |
//! | data sent but not acknowledged by the client for [`ListenerLimits::write_timeout`] (`TCP_USER_TIMEOUT`) | the kernel drops the connection, also one already closed (no orphan keeps its send queue) |
//! | HTTP/2: [`ListenerLimits::h2_max_streams`] streams, 256 KiB stream / 1 MiB connection windows, 256 KiB send buffer per stream | flow control / `REFUSED_STREAM` |
//!
//! Where connections run: on the runtime that runs [`Listener::run`], or, with
//! [`Listener::with_connection_threads`], each on one of a fixed set of single-threaded runtimes
//! ([`threads`]) chosen in turn at accept, where it stays.
//!
//! Shutdown: when the shutdown signal turns true the listener stops accepting, every connection is
//! closed gracefully (HTTP/1 after its current response, HTTP/2 with `GOAWAY`), and [`Listener::run`]
//! returns once all have finished or the drain timeout has passed.

mod activity;
mod connection;
pub mod limits;
mod on_wake;
mod request;
mod slots;
mod stream;
pub mod threads;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::held_bytes::HeldBytes;
use activity::Activity;
pub use limits::{ListenerLimits, effective_max_connections, open_file_limit};
use request::Shared;
pub use request::{Direct, DirectAnswer};
use slots::Slots;
pub use threads::ConnectionThreads;

/// The peer address of the connection a request came on, in every request's extensions (how
/// anonymous callers are told apart by [`crate::limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The body answering a connection over the cap (the gateway's error JSON).
const OVER_CAPACITY_BODY: &str = "{\"code\":\"provider_error\",\"severity\":\"retryable\",\
\"message\":\"The gateway is at its connection limit; retry later.\",\"retry_after_seconds\":1}";

/// A complete HTTP/1.1 503 carrying [`OVER_CAPACITY_BODY`]; the connection is closed after it.
fn over_capacity_response() -> Vec<u8> {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{OVER_CAPACITY_BODY}",
        OVER_CAPACITY_BODY.len()
    )
    .into_bytes()
}

/// One bound listener with its routes and limits.
pub struct Listener {
    name: &'static str,
    socket: TcpListener,
    router: Router,
    limits: ListenerLimits,
    held: HeldBytes,
    threads: Option<ConnectionThreads>,
    direct: Option<Direct>,
}

impl Listener {
    /// A listener called `name` (for logs) serving `router` on `socket` within `limits`.
    pub fn new(name: &'static str, socket: TcpListener, router: Router, limits: ListenerLimits) -> Listener {
        let held = HeldBytes::new(limits.max_held_response_bytes);
        Listener { name, socket, router, limits, held, threads: None, direct: None }
    }

    /// Serve each connection on one of `threads` instead of the runtime running [`Listener::run`];
    /// the threads stop when the listener has drained.
    pub fn with_connection_threads(mut self, threads: ConnectionThreads) -> Listener {
        self.threads = Some(threads);
        self
    }

    /// Take the requests `direct` takes before the router (see [`Direct`]).
    pub fn with_direct(mut self, direct: Direct) -> Listener {
        self.direct = Some(direct);
        self
    }

    /// Count large answers against `held` (shared with the engine) instead of a budget of its own.
    pub fn with_held_bytes(mut self, held: HeldBytes) -> Listener {
        self.held = held;
        self
    }

    /// Accept and serve until `shutdown` turns true, then drain: wait for open connections to
    /// finish, at most `drain` (connections still open then are dropped).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>, drain: Duration) {
        let Listener { name, socket, router, limits, held, threads, direct } = self;
        let builder = Arc::new(connection::builder(&limits));
        let in_flight = Arc::new(Semaphore::new(limits.max_in_flight.max(1)));
        let shared = Arc::new(Shared { router, direct, in_flight, held, limits });
        let slots = Slots::new(limits.max_connections);
        let over_capacity = over_capacity_response();
        // Every connection task holds a clone; when all are gone, `recv` returns `None`.
        let (alive, mut all_closed) = mpsc::channel::<()>(1);
        loop {
            let accepted = tokio::select! {
                accepted = socket.accept() => accepted,
                changed = shutdown.changed() => {
                    if changed.is_err() || *shutdown.borrow() {
                        break;
                    }
                    continue;
                }
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(listener = name, error = %err, "accept failed; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            };
            let activity = Activity::new(Instant::now());
            let evicted = CancellationToken::new();
            let Some(slot) = slots.take(Arc::clone(&activity), evicted.clone()) else {
                refuse_over_capacity(&stream, &over_capacity);
                continue;
            };
            let _ = stream.set_nodelay(true);
            // A client that stops reading must not make the kernel hold what we sent either: once
            // sent data has gone unacknowledged (a zero window included) for the write timeout,
            // the kernel drops the connection, also after we closed the socket (an orphan in
            // FIN-WAIT-1 would otherwise keep a full send queue for as long as the client answers
            // window probes).
            let _ = socket2::SockRef::from(&stream).set_tcp_user_timeout(Some(shared.limits.write_timeout));
            let (builder, shared, shutdown, alive) =
                (Arc::clone(&builder), Arc::clone(&shared), shutdown.clone(), alive.clone());
            let client = ClientAddr(peer.ip());
            let Some(threads) = &threads else {
                // Gated: the parts of one connection's work wake each other without rescheduling it.
                tokio::spawn(crate::wake_gate::gated(async move {
                    connection::watch(stream, client, builder, shared, activity, evicted, shutdown).await;
                    drop((slot, alive));
                }));
                continue;
            };
            // The socket leaves this runtime's reactor and joins the connection thread's.
            let Ok(stream) = stream.into_std() else { continue };
            threads.spawn(crate::wake_gate::gated(async move {
                if let Ok(stream) = TcpStream::from_std(stream) {
                    connection::watch(stream, client, builder, shared, activity, evicted, shutdown).await;
                }
                drop((slot, alive));
            }));
        }
        drop(socket);
        drop(alive);
        tracing::info!(listener = name, "no longer accepting; finishing open connections");
        if tokio::time::timeout(drain, all_closed.recv()).await.is_err() {
            tracing::warn!(listener = name, "drain timeout reached; dropping the connections still open");
        }
    }
}

/// Answer a connection over the cap without waiting on it: read what it already sent (so closing
/// does not reset the connection before the answer arrives), write the 503 if the socket takes it
/// at once, and close.
fn refuse_over_capacity(stream: &TcpStream, answer: &[u8]) {
    let mut scratch = [0u8; 4096];
    let _ = stream.try_read(&mut scratch);
    let _ = stream.try_write(answer);
    tracing::debug!("connection refused: at the connection limit");
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// One HTTP/1.1 GET on a new connection to `address`: the answer's body.
    async fn get_once(address: std::net::SocketAddr) -> String {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream.write_all(b"GET /thread HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n").await.expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer.split_once("\r\n\r\n").expect("head and body").1.to_string()
    }

    #[tokio::test]
    async fn with_connection_threads_each_connection_is_served_on_the_next_thread() {
        let router = Router::new().route(
            "/thread",
            axum::routing::get(|| async { std::thread::current().name().unwrap_or_default().to_string() }),
        );
        let socket = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = socket.local_addr().expect("address");
        let threads = ConnectionThreads::start("unit", 2).expect("threads start");
        let listener =
            Listener::new("test", socket, router, ListenerLimits::default()).with_connection_threads(threads);
        let (stop, stopping) = watch::channel(false);
        let running = tokio::spawn(listener.run(stopping, Duration::from_secs(5)));
        let mut served = Vec::new();
        for _ in 0..4 {
            served.push(get_once(address).await);
        }
        assert_eq!(served, ["unit-conn-0", "unit-conn-1", "unit-conn-0", "unit-conn-1"]);
        stop.send(true).expect("listener running");
        tokio::time::timeout(Duration::from_secs(10), running).await.expect("drains").expect("no panic");
    }

    #[test]
    fn the_over_capacity_answer_is_a_complete_http_response() {
        let bytes = over_capacity_response();
        let text = std::str::from_utf8(&bytes).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.parse().ok())
            .expect("content-length");
        assert_eq!(length, body.len());
        let json: serde_json::Value = serde_json::from_str(body).expect("json body");
        assert_eq!(json["severity"], "retryable");
    }
}
