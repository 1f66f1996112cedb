//! Upstream exchanges with `http://` origins (searches and writes): pooled HTTP/1.1 connections
//! read and written by the calling task.
//!
//! A call leases one idle connection (or opens one), writes its request in one write, reads the
//! answer's head and body from the socket itself (framing in [`super::wire`]) and hands the
//! connection back once the body has ended: no connection task, no channel between the call and
//! the connection, no header map built for the request or the answer. Before, hyper's HTTP/1
//! client connection did this work here (polled by the calling task); measured at 32 connections
//! it was about 4 us of user time per call, the largest part of the exchange that was not a
//! system call.
//!
//! Same rules as the rest of the engine: no redirects (an answer is an answer), no retries, no
//! proxy, names resolved through the destination guard, addresses written in the URL judged by
//! the caller ([`super::destination::refused_url`]). A lease dropped before its answer ended
//! closes its connection, and so does any answer whose framing leaves doubt (see
//! [`super::wire`]). Idle connections are closed after the pool's idle timeout; a sweeper task
//! runs while any are pooled.
//!
//! `https://` origins stay on reqwest (rustls with the platform's roots, HTTP/2 by ALPN).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::thread::ThreadId;
use std::time::Duration;

use memgate_crds::validation::destination::Placement;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::answer::{AnswerReader, BodySink, Inbox};
use super::destination::allowed_addresses;
use super::error::EngineError;
use super::wire::{Framing, Head};
use crate::local_reactor;

/// Idle connections kept per origin; more are closed when handed back.
const MAX_IDLE_PER_ORIGIN: usize = 64;

/// The most bytes of an unwanted body (a refusal's) read to keep its connection.
const MAX_DISCARDED_BYTES: usize = 16 * 1024;

/// The pool of idle HTTP/1.1 connections, keyed by origin (`http://host[:port]`). Its `Debug`
/// shows no origin.
pub(super) struct Http1Pool {
    shared: Arc<Shared>,
}

struct Shared {
    placement: Placement,
    idle_timeout: Duration,
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    idle: HashMap<String, Vec<Idle>>,
    sweeping: bool,
}

/// One connection to an origin.
struct Link {
    /// The origin, the pool's key (allocated once per connection, not per call).
    origin: String,
    stream: TcpStream,
    inbox: Inbox,
    /// The connection thread whose reactor the socket belongs to ([`local_reactor::owner`]): only
    /// calls on that thread lease it.
    owner: Option<ThreadId>,
}

struct Idle {
    link: Box<Link>,
    since: Instant,
}

/// One connection in use by one call: returned to the pool by [`Lease::release`] when it is
/// between exchanges, closed otherwise (and when dropped).
pub(super) struct Lease {
    /// Boxed: a lease moves from the pool into the call's future and back, every call.
    link: Box<Link>,
    /// Nothing is under way on the connection and nothing unread is buffered: it can carry
    /// another request.
    clean: bool,
    pool: Arc<Shared>,
}

impl std::fmt::Debug for Http1Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Http1Pool").field("idle", &state.idle.values().map(Vec::len).sum::<usize>()).finish()
    }
}

impl Http1Pool {
    /// An empty pool for a process at `placement`.
    pub(super) fn new(placement: Placement, idle_timeout: Duration) -> Http1Pool {
        Http1Pool { shared: Arc::new(Shared { placement, idle_timeout, state: Mutex::default() }) }
    }

    /// A connection to `url`'s origin ready to send: an idle one that is still open, or a new one.
    /// [`EngineError::Connect`] when none could be had (nothing was sent).
    pub(super) async fn lease(&self, url: &url::Url) -> Result<Lease, EngineError> {
        let origin = &url[..url::Position::BeforePath];
        while let Some(idle) = self.take_idle(origin) {
            if still_open(&idle.link.stream) {
                return Ok(Lease { link: idle.link, clean: true, pool: Arc::clone(&self.shared) });
            }
        }
        // Boxed: the connect's state is the largest part of this future, and it is needed only
        // when no idle connection is pooled; unboxed, every call's future would carry (and move)
        // its bytes.
        Box::pin(self.open(url, origin)).await
    }

    /// A new connection to `url`'s origin.
    async fn open(&self, url: &url::Url, origin: &str) -> Result<Lease, EngineError> {
        let port = url.port_or_known_default().ok_or(EngineError::Connect)?;
        let stream = connect(url, port, self.shared.placement).await?;
        let owner = local_reactor::owner();
        let link = Box::new(Link { origin: origin.to_owned(), stream, inbox: Inbox::new(), owner });
        Ok(Lease { link, clean: true, pool: Arc::clone(&self.shared) })
    }

    /// No idle connection is pooled.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.shared.state.lock().unwrap_or_else(PoisonError::into_inner).idle.values().all(Vec::is_empty)
    }

    /// The newest idle connection to `origin` that belongs to this thread's reactor and has not
    /// been idle for the idle timeout (older ones met on the way are dropped).
    fn take_idle(&self, origin: &str) -> Option<Idle> {
        let owner = local_reactor::owner();
        let mut state = self.shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = state.idle.get_mut(origin)?;
        while let Some(at) = idle.iter().rposition(|entry| entry.link.owner == owner) {
            let entry = idle.remove(at);
            if entry.since.elapsed() < self.shared.idle_timeout {
                return Some(entry);
            }
        }
        None
    }
}

/// An idle connection is still worth sending on: the upstream has neither closed it nor sent
/// anything unasked since its last answer. The read is tried only when the reactor has seen the
/// socket become readable since (tokio's `try_read`), as hyper's idle check read only then.
fn still_open(stream: &TcpStream) -> bool {
    matches!(stream.try_read(&mut [0; 1]), Err(error) if error.kind() == std::io::ErrorKind::WouldBlock)
}

impl Lease {
    /// Send `request` (its bytes from [`super::wire::encode_request`]) and read the answer's
    /// head, skipping interim (`1xx`) ones; the body is read with [`Lease::read_body`].
    pub(super) async fn send(&mut self, request: &[u8]) -> Result<Head, EngineError> {
        self.clean = false;
        self.link.stream.write_all(request).await.map_err(|_| EngineError::Transport)?;
        self.reader().head().await
    }

    /// Read the body `head` frames, handing each run of its bytes to `sink` (whose error ends the
    /// read). Once it has ended, the connection is released to the pool if the answer allows.
    pub(super) async fn read_body(&mut self, head: &Head, sink: &mut impl BodySink) -> Result<(), EngineError> {
        self.clean = self.reader().body(head, sink).await?;
        Ok(())
    }

    /// Read the rest of a body not wanted (a refusal's) and hand the connection back, or close it
    /// when the body is longer than [`MAX_DISCARDED_BYTES`], ends only with the connection, or
    /// fails. Owns `head` so that it can finish after the call has returned (see
    /// [`super::client`]'s refusals).
    pub(super) async fn finish_short(mut self, head: Head) {
        match head.framing {
            Framing::Length(length) if length <= MAX_DISCARDED_BYTES as u64 => {}
            Framing::Chunked => {}
            Framing::Length(_) | Framing::UntilClose => return,
        }
        let mut read = 0;
        let mut discard = |chunk: &[u8]| {
            read += chunk.len();
            if read > MAX_DISCARDED_BYTES { Err(EngineError::TooLarge) } else { Ok(()) }
        };
        if self.read_body(&head, &mut discard).await.is_ok() {
            self.release();
        }
    }

    /// Hand the connection back for the next call if it is between exchanges (its answer was
    /// read to the end and allows another request); otherwise close it.
    pub(super) fn release(mut self) {
        if !self.clean {
            return;
        }
        self.link.inbox.shrink();
        let mut state = self.pool.state.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = match state.idle.get_mut(&self.link.origin) {
            Some(idle) => idle,
            None => state.idle.entry(self.link.origin.clone()).or_default(),
        };
        if idle.len() >= MAX_IDLE_PER_ORIGIN {
            return;
        }
        idle.push(Idle { link: self.link, since: Instant::now() });
        if !state.sweeping {
            state.sweeping = true;
            tokio::spawn(sweep(Arc::downgrade(&self.pool)));
        }
    }

    fn reader(&mut self) -> AnswerReader<'_, TcpStream> {
        let Link { stream, inbox, .. } = &mut *self.link;
        AnswerReader { socket: stream, inbox }
    }
}

/// Close the connections idle for the pool's idle timeout, once per that interval, until the
/// pool is empty or gone.
async fn sweep(pool: Weak<Shared>) {
    loop {
        let Some(interval) = pool.upgrade().map(|pool| pool.idle_timeout) else { return };
        tokio::time::sleep(interval).await;
        let Some(pool) = pool.upgrade() else { return };
        let mut state = pool.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.idle.retain(|_, idle| {
            idle.retain(|entry| entry.since.elapsed() < pool.idle_timeout);
            !idle.is_empty()
        });
        if state.idle.is_empty() {
            state.sweeping = false;
            return;
        }
    }
}

/// A TCP connection to `url`'s host at `port`: a name through the destination guard, the
/// addresses in the order of [`connect_any`]; `TCP_NODELAY` like reqwest's.
async fn connect(url: &url::Url, port: u16, placement: Placement) -> Result<TcpStream, EngineError> {
    let addresses: Vec<SocketAddr> = match url.host().ok_or(EngineError::Connect)? {
        url::Host::Ipv4(ip) => vec![SocketAddr::from((ip, port))],
        url::Host::Ipv6(ip) => vec![SocketAddr::from((ip, port))],
        url::Host::Domain(name) => allowed_addresses(name, port, placement).await.map_err(|_| EngineError::Connect)?,
    };
    let stream = connect_any(&addresses).await?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// How long the addresses of the first address's family have alone before the other family's are
/// tried beside them: hyper-util's connector (reqwest's) uses 300 ms (`happy_eyeballs_timeout` in
/// `client/legacy/connect/http.rs`, hyper-util 0.1.21).
const FALLBACK_DELAY: Duration = Duration::from_millis(300);

/// Connect as hyper-util's connector does: the addresses of the first address's family one after
/// another, and, when the name also has addresses of the other family, those one after another
/// starting [`FALLBACK_DELAY`] later; the first connection made wins. A dual-stack name whose first
/// family is unreachable therefore costs 300 ms, not the call's whole deadline.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, EngineError> {
    let (preferred, fallback) = split_by_family(addresses);
    let preferred = connect_in_order(preferred);
    if fallback.is_empty() {
        return preferred.await;
    }
    let fallback = async {
        tokio::time::sleep(FALLBACK_DELAY).await;
        connect_in_order(fallback).await
    };
    let (mut preferred, mut fallback) = (pin!(preferred), pin!(fallback));
    tokio::select! {
        first = &mut preferred => match first {
            Ok(stream) => Ok(stream),
            Err(_) => fallback.await,
        },
        second = &mut fallback => match second {
            Ok(stream) => Ok(stream),
            Err(_) => preferred.await,
        },
    }
}

/// The addresses of the first address's family, and the others, each in the resolver's order.
fn split_by_family(addresses: &[SocketAddr]) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
    let first_is_v6 = addresses.first().is_some_and(SocketAddr::is_ipv6);
    addresses.iter().partition(|address| address.is_ipv6() == first_is_v6)
}

async fn connect_in_order(addresses: Vec<SocketAddr>) -> Result<TcpStream, EngineError> {
    for address in addresses {
        if let Ok(stream) = TcpStream::connect(address).await {
            return Ok(stream);
        }
    }
    Err(EngineError::Connect)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_by_the_first_address_family_in_resolver_order() {
        let address = |text: &str| text.parse::<SocketAddr>().expect("address");
        let mixed = [address("[::1]:80"), address("10.0.0.1:80"), address("[::2]:80"), address("10.0.0.2:80")];
        assert_eq!(
            split_by_family(&mixed),
            (vec![address("[::1]:80"), address("[::2]:80")], vec![address("10.0.0.1:80"), address("10.0.0.2:80")])
        );
        assert_eq!(split_by_family(&mixed[1..2]), (vec![address("10.0.0.1:80")], vec![]));
    }

    /// The preferred family's only address never answers (a listener whose accept queue is full:
    /// Linux drops the SYN); the other family's address is reached after the fallback delay
    /// instead of after the call's deadline.
    #[tokio::test]
    async fn an_unanswering_first_family_falls_back_to_the_other() {
        let full = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None).expect("socket");
        full.bind(&"[::1]:0".parse::<SocketAddr>().expect("address").into()).expect("bind ::1");
        full.listen(0).expect("listen");
        let full_address = full.local_addr().expect("address").as_socket().expect("inet");
        // Fill the accept queue; later SYNs are dropped and those connects hang.
        let mut queued = Vec::new();
        while queued.len() < 8 {
            match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(full_address)).await {
                Ok(Ok(stream)) => queued.push(stream),
                _ => break,
            }
        }
        let hangs = tokio::time::timeout(Duration::from_millis(500), TcpStream::connect(full_address)).await;
        assert!(hangs.is_err(), "the first family's address does not answer");
        let good = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let good_address = good.local_addr().expect("address");
        let started = Instant::now();
        let stream = tokio::time::timeout(Duration::from_secs(10), connect_any(&[full_address, good_address]))
            .await
            .expect("connected before the bound")
            .expect("connected");
        assert_eq!(stream.peer_addr().expect("peer"), good_address);
        assert!(started.elapsed() >= FALLBACK_DELAY, "the preferred family had its head start");
    }
}
