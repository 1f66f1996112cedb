//! A real HTTP/1.1 upstream on 127.0.0.1 for engine tests, written on raw tokio sockets.
//!
//! Raw sockets (rather than axum or hyper) give byte-level control the failure tests need: a
//! declared `Content-Length` that the body does not honour, chunked bodies of exact sizes, and
//! observing when the client closes a connection. Every request is recorded as received: method,
//! path, raw query, headers in arrival order (names lower-cased) and body bytes.

#![allow(dead_code, missing_docs)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memgate_crds::Scope;
use memgate_crds::validation::credential_value;
use memgate_gateway::engine::Target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Placeholder credential used by the tests; must never appear in an error.
pub const CREDENTIAL: &str = "TEST-CREDENTIAL-d41d8cd9";

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Status, extra headers and a body sent with its exact `content-length`.
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// `content-length: declared`, then `body` (whatever its size), then the connection closes.
    Declared { declared: u64, body: Vec<u8> },
    /// 200 with `transfer-encoding: chunked`, one chunk per element.
    Chunked(Vec<Vec<u8>>),
    /// Answer after a pause.
    After(Duration, Box<Reply>),
    /// Never answer; wait for the client to close the connection.
    Hang,
}

impl Reply {
    /// 200 with a JSON body.
    pub fn json(body: &serde_json::Value) -> Reply {
        Reply::status_json(200, body)
    }

    /// `status` with a JSON body.
    pub fn status_json(status: u16, body: &serde_json::Value) -> Reply {
        Reply::Full { status, headers: Vec::new(), body: serde_json::to_vec(body).expect("serializes") }
    }

    /// 200 with raw bytes.
    pub fn bytes(body: impl Into<Vec<u8>>) -> Reply {
        Reply::Full { status: 200, headers: Vec::new(), body: body.into() }
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

struct State {
    handler: Box<Handler>,
    requests: Mutex<Vec<Recorded>>,
    connections: AtomicUsize,
    closed_while_waiting: AtomicUsize,
    received: Notify,
    closed: Notify,
}

/// A running upstream; it stops with the test's runtime.
#[derive(Clone)]
pub struct Server {
    addr: SocketAddr,
    state: Arc<State>,
}

impl Server {
    /// Start a server answering every request with `handler`.
    pub async fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            handler: Box::new(handler),
            requests: Mutex::default(),
            connections: AtomicUsize::new(0),
            closed_while_waiting: AtomicUsize::new(0),
            received: Notify::new(),
            closed: Notify::new(),
        });
        let accept_state = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                accept_state.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, Arc::clone(&accept_state)));
            }
        });
        Server { addr, state }
    }

    /// Start a server answering every request with the same reply.
    pub async fn always(reply: Reply) -> Server {
        Server::start(move |_| reply.clone()).await
    }

    /// `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().expect("lock").clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Wait until at least `count` requests have arrived.
    pub async fn wait_for_requests(&self, count: usize) {
        loop {
            let notified = self.state.received.notified();
            if self.requests().len() >= count {
                return;
            }
            notified.await;
        }
    }

    /// Wait until a client closed a connection the server was holding open with [`Reply::Hang`].
    pub async fn wait_for_hang_closed(&self) {
        loop {
            let notified = self.state.closed.notified();
            if self.state.closed_while_waiting.load(Ordering::SeqCst) > 0 {
                return;
            }
            notified.await;
        }
    }
}

/// A target pointing at `origin` with the test credential.
pub fn target(origin: &str, base_path: &str, scope: Scope, timeout: Duration) -> Target {
    Target {
        origin: origin.to_string(),
        base_path: base_path.to_string(),
        scope,
        credential: credential_value("test", CREDENTIAL.as_bytes()).expect("valid credential"),
        timeout,
        max_in_flight: None,
        urls: memgate_gateway::engine::UrlCache::default(),
    }
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buffer).await else {
            return;
        };
        let reply = (state.handler)(&request);
        state.requests.lock().expect("lock").push(request);
        state.received.notify_waiters();
        if !answer(&mut stream, reply, &state).await {
            return;
        }
    }
}

/// Read one request; `None` on EOF or a malformed request.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Recorded> {
    let head_end = loop {
        if let Some(at) = find(buffer, b"\r\n\r\n") {
            break at;
        }
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).ok()?;
    buffer.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let target = request_line.next()?;
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path.to_string(), Some(query.to_string())),
        None => (target.to_string(), None),
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map(|(_, value)| value.parse().ok())
        .unwrap_or(Some(0))?;
    while buffer.len() < length {
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = buffer.drain(..length).collect();
    Some(Recorded { method, path, query, headers, body })
}

/// Send `reply`; false when the connection must end.
async fn answer(stream: &mut TcpStream, reply: Reply, state: &State) -> bool {
    match reply {
        Reply::Full { status, headers, body } => {
            let mut head = format!("HTTP/1.1 {status} Status\r\ncontent-length: {}\r\n", body.len());
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            write_all(stream, &[head.as_bytes(), &body].concat()).await
        }
        Reply::Declared { declared, body } => {
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n");
            let _ = write_all(stream, head.as_bytes()).await && write_all(stream, &body).await;
            false
        }
        Reply::Chunked(chunks) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
            if !write_all(stream, head.as_bytes()).await {
                return false;
            }
            for chunk in chunks.iter().filter(|chunk| !chunk.is_empty()) {
                let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
                if !write_all(stream, &framed).await {
                    return false;
                }
            }
            write_all(stream, b"0\r\n\r\n").await
        }
        Reply::After(pause, reply) => {
            tokio::time::sleep(pause).await;
            Box::pin(answer(stream, *reply, state)).await
        }
        Reply::Hang => {
            let mut chunk = [0u8; 1024];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            state.closed_while_waiting.fetch_add(1, Ordering::SeqCst);
            state.closed.notify_waiters();
            false
        }
    }
}

async fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    stream.write_all(bytes).await.is_ok() && stream.flush().await.is_ok()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|window| window == needle)
}
