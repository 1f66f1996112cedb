//! A fault-injecting mem0 OSS upstream on raw tokio sockets, and readings of a process's memory,
//! descriptors, sockets and tasks from `/proc` and `/metrics`.
//!
//! The upstream reads each request the way `tests/support`'s server does (head, then
//! `Content-Length` bytes of body) and then misbehaves in one fixed way ([`Fault`]). It counts
//! connections accepted and still held, and body bytes it managed to write.

#![allow(dead_code, missing_docs)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the faulty upstream does with every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Sleep this long, then answer a valid 200 (too late).
    SleepThenAnswer(Duration),
    /// A 200 head declaring 1000 body bytes, 100 of them, then silence until the client leaves.
    PartialThenHang,
    /// A 200 head declaring 1000 body bytes, 100 of them, then a reset (`SO_LINGER` 0 close).
    PartialThenReset,
    /// A chunked 200 body of this many bytes, written as fast as the client takes it.
    Stream(u64),
    /// 429 to every request, with `Retry-After: <seconds>` when given; the connection stays open.
    TooManyRequests(Option<u64>),
    /// Accept the connection and never read or write; hold it until the test ends.
    Silent,
    /// A 200 head declaring a 200-byte body, then one byte per second.
    Trickle,
}

/// A valid mem0 OSS search answer (what [`Fault::SleepThenAnswer`] sends too late).
const VALID_BODY: &[u8] = br#"{"results":[{"id":"late","memory":"too late","score":0.5}]}"#;

#[derive(Default)]
struct Counters {
    accepted: AtomicUsize,
    held: AtomicUsize,
    body_bytes_written: AtomicU64,
    max_body_bytes_one_connection: AtomicU64,
}

/// One connection the server holds; counted down when its task ends, however it ends.
struct Held(Arc<Counters>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running faulty upstream; it stops with the test's runtime.
#[derive(Clone)]
pub struct FaultServer {
    addr: SocketAddr,
    counters: Arc<Counters>,
}

impl FaultServer {
    /// Bind 127.0.0.1:0 and serve `fault` on every connection.
    pub async fn start(fault: Fault) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the fault server");
        let addr = listener.local_addr().expect("local addr");
        let counters = Arc::new(Counters::default());
        let accept_counters = Arc::clone(&counters);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                accept_counters.accepted.fetch_add(1, Ordering::SeqCst);
                accept_counters.held.fetch_add(1, Ordering::SeqCst);
                let held = Held(Arc::clone(&accept_counters));
                tokio::spawn(async move {
                    let written = serve(stream, fault).await;
                    held.0.body_bytes_written.fetch_add(written, Ordering::SeqCst);
                    held.0.max_body_bytes_one_connection.fetch_max(written, Ordering::SeqCst);
                });
            }
        });
        FaultServer { addr, counters }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.counters.accepted.load(Ordering::SeqCst)
    }

    /// Connections the server still holds (for [`Fault::Silent`]: every one ever accepted).
    pub fn held(&self) -> usize {
        self.counters.held.load(Ordering::SeqCst)
    }

    /// Response body bytes accepted by the kernel, over all connections, and the most on one.
    pub fn body_bytes_written(&self) -> (u64, u64) {
        (
            self.counters.body_bytes_written.load(Ordering::SeqCst),
            self.counters.max_body_bytes_one_connection.load(Ordering::SeqCst),
        )
    }
}

/// Serve one connection; the response body bytes written.
async fn serve(mut stream: TcpStream, fault: Fault) -> u64 {
    if fault == Fault::Silent {
        // Hold the socket unread until the runtime ends; the client's request stays in the
        // receive buffer.
        std::future::pending::<()>().await;
    }
    let mut buffer = Vec::new();
    let mut written = 0;
    while read_request(&mut stream, &mut buffer).await {
        match answer(&mut stream, fault).await {
            (bytes, true) => written += bytes,
            (bytes, false) => return written + bytes,
        }
    }
    written
}

/// Read one request (head and `Content-Length` body); false on EOF or a malformed request.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if !read_more(stream, buffer).await {
            return false;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse::<usize>().ok())
        .unwrap_or(0);
    buffer.drain(..head_end + 4);
    while buffer.len() < length {
        if !read_more(stream, buffer).await {
            return false;
        }
    }
    buffer.drain(..length);
    true
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(read) => {
            buffer.extend_from_slice(&chunk[..read]);
            true
        }
    }
}

/// Answer one request with `fault`: body bytes written, and whether the connection may go on.
async fn answer(stream: &mut TcpStream, fault: Fault) -> (u64, bool) {
    match fault {
        Fault::SleepThenAnswer(pause) => {
            tokio::time::sleep(pause).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                VALID_BODY.len()
            );
            let ok = write(stream, &[head.as_bytes(), VALID_BODY].concat()).await;
            (if ok { VALID_BODY.len() as u64 } else { 0 }, ok)
        }
        Fault::PartialThenHang => {
            let sent = partial(stream).await;
            wait_for_close(stream).await;
            (sent, false)
        }
        Fault::PartialThenReset => {
            let sent = partial(stream).await;
            // Let the head and the first bytes reach the client before the reset.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = stream.set_zero_linger();
            (sent, false)
        }
        Fault::Stream(total) => (stream_body(stream, total).await, false),
        Fault::TooManyRequests(retry_after) => {
            let body = br#"{"detail":"rate limited"}"#;
            let extra = retry_after.map(|s| format!("retry-after: {s}\r\n")).unwrap_or_default();
            let head = format!(
                "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n",
                body.len()
            );
            (0, write(stream, &[head.as_bytes(), body].concat()).await)
        }
        Fault::Trickle => {
            let body = format!("{{\"results\":[],\"pad\":\"{}\"}}", "x".repeat(176));
            let head =
                format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len());
            if !write(stream, head.as_bytes()).await {
                return (0, false);
            }
            let mut sent = 0;
            for byte in body.as_bytes() {
                if !write(stream, std::slice::from_ref(byte)).await {
                    break;
                }
                sent += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            (sent, false)
        }
        Fault::Silent => (0, false),
    }
}

/// A 200 head declaring 1000 bytes and the first 100 of them; the bytes written.
async fn partial(stream: &mut TcpStream) -> u64 {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n";
    let start = format!("{{\"results\":[{{\"id\":\"p\",\"memory\":\"{}", "y".repeat(74));
    if write(stream, &[head.as_bytes(), start.as_bytes()].concat()).await { start.len() as u64 } else { 0 }
}

/// A chunked body of `total` bytes (a JSON string that never ends in time); the bytes written.
async fn stream_body(stream: &mut TcpStream, total: u64) -> u64 {
    const CHUNK: usize = 64 * 1024;
    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    if !write(stream, head.as_bytes()).await {
        return 0;
    }
    const OPENING: &[u8] = b"{\"results\":\"";
    let mut chunk = vec![b'z'; CHUNK];
    chunk[..OPENING.len()].copy_from_slice(OPENING);
    let framed_first = [format!("{CHUNK:x}\r\n").as_bytes(), &chunk, b"\r\n"].concat();
    chunk[..OPENING.len()].fill(b'z');
    let framed = [format!("{CHUNK:x}\r\n").as_bytes(), &chunk, b"\r\n"].concat();
    let mut sent = 0;
    while sent < total {
        let frame = if sent == 0 { &framed_first } else { &framed };
        if !write(stream, frame).await {
            break;
        }
        sent += CHUNK as u64;
    }
    if sent >= total {
        let _ = write(stream, b"0\r\n\r\n").await;
    }
    sent
}

/// Read and discard until the client closes.
async fn wait_for_close(stream: &mut TcpStream) {
    let mut chunk = [0u8; 1024];
    while let Ok(read) = stream.read(&mut chunk).await {
        if read == 0 {
            break;
        }
    }
}

async fn write(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    stream.write_all(bytes).await.is_ok() && stream.flush().await.is_ok()
}

/// A process's resource readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Open file descriptors (`/proc/<pid>/fd`).
    pub fds: usize,
    /// TCP sockets held by the process whose remote port is the watched port (any state).
    pub sockets_to_port: usize,
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM` (peak resident set), KiB.
    pub hwm_kib: u64,
}

/// Read `pid`'s descriptors, its sockets to remote `port` and its memory.
pub fn read_process(pid: u32, port: u16) -> Reading {
    let memory = memgate_e2e::procfs::memory(pid).expect("the gateway's memory from /proc");
    let (inodes, fds) = socket_inodes(pid);
    Reading {
        fds,
        sockets_to_port: sockets_to_remote_port(&inodes, port),
        rss_kib: memory.rss / 1024,
        hwm_kib: memory.peak / 1024,
    }
}

/// The socket inodes among `pid`'s descriptors, and how many descriptors it has.
fn socket_inodes(pid: u32) -> (HashSet<u64>, usize) {
    let mut inodes = HashSet::new();
    let mut count = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).expect("read /proc/<pid>/fd").flatten() {
        count += 1;
        // A descriptor closed between listing and reading is simply gone.
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let target = target.to_string_lossy().into_owned();
        if let Some(inode) = target.strip_prefix("socket:[").and_then(|rest| rest.strip_suffix(']')) {
            inodes.extend(inode.parse::<u64>().ok());
        }
    }
    (inodes, count)
}

/// Rows of `/proc/net/tcp{,6}` whose remote port is `port` and whose inode is in `inodes`.
fn sockets_to_remote_port(inodes: &HashSet<u64>, port: u16) -> usize {
    let wanted = format!("{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|row| {
            let fields: Vec<&str> = row.split_whitespace().collect();
            let remote_port = fields.get(2).and_then(|remote| remote.rsplit(':').next());
            let inode = fields.get(9).and_then(|inode| inode.parse::<u64>().ok());
            remote_port == Some(wanted.as_str()) && inode.is_some_and(|inode| inodes.contains(&inode))
        })
        .count()
}

/// The value of an unlabelled metric line `<name> <value>` in an OpenMetrics text.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}
