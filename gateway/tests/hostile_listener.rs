//! Hostile clients against the real `memgate-gateway serve` binary over real sockets: connections
//! that never send, half-sent heads and HTTP/2 prefaces, trickled bodies, idle HTTP/2 connections,
//! more connections or requests than allowed, readers that never read, a low open-file limit, and a
//! shutdown while a request is in flight. Each attack is bounded by a limit flag set small here;
//! every time check is a generous ceiling (many times the limit), never a tight bound.

mod serve_support;
mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::{Gateway, ProviderYaml, upstream_secret};
use support::{Reply, Server};

/// Limit timers of these tests (ms); ceilings below are several times larger.
const SHORT_MS: &str = "1000";
/// Whatever a bounded attack may take at most, against limits of one second.
const CEILING: Duration = Duration::from_secs(20);

async fn gateway_for(upstream: &str, args: &[&str]) -> (Gateway, tempfile::TempDir, tempfile::TempDir) {
    gateway_with_open_files(upstream, args, None).await
}

async fn gateway_with_open_files(
    upstream: &str,
    args: &[&str],
    open_files: Option<u64>,
) -> (Gateway, tempfile::TempDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let mut provider = ProviderYaml::new("repo-memory", upstream);
    provider.timeout_ms = 3000;
    std::fs::write(dir.path().join("gateway.yaml"), format!("{}---\n{}", upstream_secret(), provider.yaml()))
        .expect("write");
    let gateway = Gateway::start_with_open_files(dir.path(), logs.path(), args, &[], open_files).await;
    (gateway, dir, logs)
}

fn connect(gateway: &Gateway) -> TcpStream {
    let stream = TcpStream::connect(gateway.address()).expect("connect");
    stream.set_read_timeout(Some(CEILING)).expect("timeout");
    stream
}

/// Read until the gateway closes the connection; what it sent, and how long that took. Fails
/// the test when the connection is still open after [`CEILING`].
fn read_until_closed(stream: &mut TcpStream, started: Instant) -> (Vec<u8>, Duration) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return (received, started.elapsed()),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            // A read on a socket with SO_RCVTIMEO is never restarted after a signal handler ran,
            // SA_RESTART or not (signal(7)); SIGCHLD from another test's gateway exiting lands here.
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if matches!(err.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                return (received, started.elapsed());
            }
            Err(err) => panic!("the gateway kept the connection open ({err}) for {:?}", started.elapsed()),
        }
    }
}

/// Write `bytes` one at a time, `pause` apart, until done or the gateway closes the connection.
fn trickle(stream: &mut TcpStream, bytes: &[u8], pause: Duration) {
    for byte in bytes {
        if stream.write_all(&[*byte]).is_err() {
            return;
        }
        std::thread::sleep(pause);
    }
}

const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty HTTP/2 SETTINGS frame.
const HTTP2_SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

/// Connections that never send, send part of the HTTP/2 preface, or send a head one byte at a time
/// are closed by the header-read timeout (before: all still open after 45 s).
#[tokio::test]
async fn silent_half_sent_and_slow_heads_are_closed_by_the_header_read_timeout() {
    let (gateway, _dir, _logs) = gateway_for("http://127.0.0.1:9", &["--header-read-timeout-ms", SHORT_MS]).await;
    let mut silent = connect(&gateway);
    let mut preface = connect(&gateway);
    preface.write_all(&HTTP2_PREFACE[..16]).expect("write");
    let mut slow = connect(&gateway);
    let started = Instant::now();
    let head = b"POST /nexent/v1/repo-memory/search HTTP/1.1\r\nhost: localhost\r\ncontent-length: 2\r\n\r\n{}";
    let trickled = std::thread::spawn(move || {
        trickle(&mut slow, head, Duration::from_millis(200));
        read_until_closed(&mut slow, started)
    });
    for stream in [&mut silent, &mut preface] {
        let (received, took) = read_until_closed(stream, started);
        assert!(received.is_empty(), "nothing is answered to a connection that sent no request head");
        assert!(took < CEILING, "{took:?}");
    }
    let (received, took) = trickled.join().expect("slow client");
    assert!(!String::from_utf8_lossy(&received).contains("200 OK"), "the trickled head was never served");
    assert!(took < CEILING, "{took:?}");
    // A fresh client: the pooled one's connection was closed meanwhile by the same timeout.
    let health = serve_support::http_client().get(format!("{}/healthz", gateway.base)).send().await.expect("GET");
    assert_eq!(health.status(), 200);
}

/// Read one HTTP/1.1 response with a `content-length` body from `stream`; its text.
fn read_one_response(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&received).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .expect("a content-length");
            if received.len() >= end + 4 + length {
                return text;
            }
        }
        match stream.read(&mut buffer) {
            Ok(0) => panic!("closed before a whole response: {text}"),
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => panic!("no whole response ({err}): {text}"),
        }
    }
}

/// Between two requests of an HTTP/1.1 keep-alive connection, the next head is due within the
/// header-read timeout of the previous response, however long the idle timeout: a connection that
/// goes silent after its answer, or trickles its next head, is closed (the watchdog's deadline,
/// not hyper's per-request timer).
#[tokio::test]
async fn after_an_http1_answer_the_next_head_is_bounded_by_the_header_read_timeout() {
    // The idle timeout is far above the ceiling: only the header-read timeout can close these in time.
    let args = ["--header-read-timeout-ms", SHORT_MS, "--idle-timeout-ms", "120000"];
    let (gateway, _dir, _logs) = gateway_for("http://127.0.0.1:9", &args).await;
    let request = b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n";
    let mut silent = connect(&gateway);
    let mut slow = connect(&gateway);
    for stream in [&mut silent, &mut slow] {
        stream.write_all(request).expect("request");
        let answer = read_one_response(stream);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    let started = Instant::now();
    let trickled = std::thread::spawn(move || {
        trickle(&mut slow, request, Duration::from_millis(200));
        read_until_closed(&mut slow, started)
    });
    let (received, took) = read_until_closed(&mut silent, started);
    assert!(received.is_empty(), "nothing more is sent to a connection that sent no second head");
    assert!(took < CEILING, "{took:?}");
    let (received, took) = trickled.join().expect("slow client");
    assert!(received.is_empty(), "the trickled second head was never served: {}", String::from_utf8_lossy(&received));
    assert!(took < CEILING, "{took:?}");
}

/// A request head larger than `--max-header-bytes` is refused (431) and the connection closed,
/// instead of growing the connection's buffer.
#[tokio::test]
async fn an_oversized_request_head_is_refused() {
    let (gateway, _dir, _logs) = gateway_for("http://127.0.0.1:9", &["--max-header-bytes", "16384"]).await;
    let mut stream = connect(&gateway);
    let started = Instant::now();
    let head = format!("GET /healthz HTTP/1.1\r\nhost: localhost\r\nx-pad: {}\r\n\r\n", "a".repeat(64 * 1024));
    let _ = stream.write_all(head.as_bytes());
    let (received, took) = read_until_closed(&mut stream, started);
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    assert!(took < CEILING, "{took:?}");
}

/// A request head of 100 header fields is served; one of 101 is refused (431) and the connection
/// closed (hyper's default limit, which the listener relies on without setting it).
#[tokio::test]
async fn a_request_head_of_more_than_100_fields_is_refused() {
    let (gateway, _dir, _logs) = gateway_for("http://127.0.0.1:9", &[]).await;
    for (fields, status) in [(100, "HTTP/1.1 200"), (101, "HTTP/1.1 431")] {
        let mut stream = connect(&gateway);
        let started = Instant::now();
        // `host` and `connection` are two of the fields.
        let padding: String = (0..fields - 2).map(|n| format!("x-pad-{n}: 1\r\n")).collect();
        let head = format!("GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n{padding}\r\n");
        stream.write_all(head.as_bytes()).expect("head");
        let (received, took) = read_until_closed(&mut stream, started);
        let text = String::from_utf8_lossy(&received);
        assert!(text.starts_with(status), "{fields} fields: {text}");
        assert!(took < CEILING, "{took:?}");
    }
}

/// A body trickled at a byte every 200 ms (Content-Length 100000) ends with 408 (before: still
/// open after 45 s at 1 byte/s).
#[tokio::test]
async fn a_trickled_body_ends_with_408() {
    let (gateway, _dir, _logs) = gateway_for("http://127.0.0.1:9", &["--body-read-timeout-ms", SHORT_MS]).await;
    for path in ["/nexent/v1/repo-memory/search", "/mcp/repo-memory"] {
        let mut stream = connect(&gateway);
        let started = Instant::now();
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             accept: application/json, text/event-stream\r\ncontent-length: 100000\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).expect("head");
        let mut writer = stream.try_clone().expect("clone");
        std::thread::spawn(move || trickle(&mut writer, &[b' '; 200], Duration::from_millis(200)));
        let (received, took) = read_until_closed(&mut stream, started);
        let text = String::from_utf8_lossy(&received);
        assert!(text.starts_with("HTTP/1.1 408"), "{path}: {text}");
        assert!(took < CEILING, "{path}: {took:?}");
    }
}

/// An HTTP/2 connection that served a request and then stays idle is closed after the idle
/// timeout with `GOAWAY` (hyper's HTTP/2 server has no idle timeout of its own); one that never
/// opens a stream is closed by the header-read timeout.
#[tokio::test]
async fn idle_http2_connections_are_closed() {
    let args = ["--idle-timeout-ms", SHORT_MS, "--header-read-timeout-ms", SHORT_MS];
    let (gateway, _dir, _logs) = gateway_for("http://127.0.0.1:9", &args).await;
    let stream = tokio::net::TcpStream::connect(gateway.address()).await.expect("connect");
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.expect("h2");
    let connection = tokio::spawn(connection);
    let request = http::Request::get(format!("{}/healthz", gateway.base))
        .body(http_body_util::Empty::<axum::body::Bytes>::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("answered over HTTP/2");
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);
    drop(response);
    let started = Instant::now();
    let closed = tokio::time::timeout(CEILING, connection).await;
    assert!(closed.is_ok(), "the idle HTTP/2 connection is still open after {:?}", started.elapsed());

    let mut silent = connect(&gateway);
    let started = Instant::now();
    silent.write_all(HTTP2_PREFACE).expect("preface");
    silent.write_all(&HTTP2_SETTINGS).expect("settings");
    let (received, took) = read_until_closed(&mut silent, started);
    // Frame type 7 is GOAWAY (its 9-byte header: length 8 or more, type 7); the server's SETTINGS come first.
    let goaway = received.windows(4).any(|w| w[0] == 0 && w[1] == 0 && w[2] >= 8 && w[3] == 7);
    assert!(goaway, "the connection ends with GOAWAY: {received:?}");
    assert!(took < CEILING, "{took:?}");
}

/// At `--max-connections`, a new connection takes the slot of the connection idle longest, so
/// connections that just sit open never lock out a client; when every connection has a request in
/// flight, a new one gets a short 503 and is closed, while the admin port keeps answering health,
/// readiness and metrics.
#[tokio::test]
async fn at_the_connection_cap_idle_connections_make_room_and_busy_ones_get_503() {
    let upstream = Server::always(Reply::Hang).await;
    let args = ["--max-connections", "8", "--header-read-timeout-ms", "60000", "--admin-listen", "127.0.0.1:0"];
    let (gateway, _dir, _logs) = gateway_for(&upstream.origin(), &args).await;
    let admin = gateway.admin_base().expect("admin port logged");

    let mut idle: Vec<TcpStream> = (0..8).map(|_| connect(&gateway)).collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fresh = serve_support::http_client().get(format!("{}/readyz", gateway.base)).send().await.expect("GET");
    assert_eq!(fresh.status(), 200, "a new client is served at the cap by evicting an idle connection");
    let (_, took) = read_until_closed(&mut idle[0], Instant::now());
    assert!(took < CEILING, "the longest idle connection was closed");
    drop(idle);

    let body = r#"{"query":"q"}"#;
    let search = format!(
        "POST /nexent/v1/repo-memory/search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut busy = Vec::new();
    for _ in 0..8 {
        let mut stream = connect(&gateway);
        stream.write_all(search.as_bytes()).expect("search");
        busy.push(stream);
    }
    upstream.wait_for_requests(8).await;
    let mut extra = connect(&gateway);
    extra.write_all(b"GET /readyz HTTP/1.1\r\nhost: localhost\r\n\r\n").expect("write");
    let (received, took) = read_until_closed(&mut extra, Instant::now());
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 503") && text.contains("retry-after: 1"), "{text}");
    assert!(text.contains("\"severity\":\"retryable\""), "{text}");
    assert!(took < CEILING);
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(gateway.get_url(&format!("{admin}{path}")).await.status, 200, "{path} on the admin port");
    }
    drop(busy);
}

/// Requests beyond `--max-in-flight` are answered 503 at once instead of queuing behind a hanging
/// upstream.
#[tokio::test]
async fn requests_over_the_in_flight_cap_get_503_at_once() {
    let upstream = Server::always(Reply::Hang).await;
    let (gateway, _dir, _logs) = gateway_for(&upstream.origin(), &["--max-in-flight", "2"]).await;
    let query = json!({"query": "q"});
    let searches = (0..6).map(|_| gateway.search("repo-memory", &query, None));
    let statuses: Vec<u16> = futures::future::join_all(searches).await.into_iter().map(|a| a.status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 503).count(), 4, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 504).count(), 2, "{statuses:?}");
    assert_eq!(upstream.requests().len(), 2, "only the admitted requests reached the upstream");
}

/// An upstream answering `top_k` (at most 20, default 20) results of 48 KiB each: 20 make a Nexent
/// answer of about 1 MiB.
async fn large_answer_upstream() -> Server {
    let content = "x".repeat(48 * 1024);
    Server::start(move |request| {
        // As Mem0's search does: at most `top_k` results (the dialect sends the caller's limit).
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let top_k = body["top_k"].as_u64().unwrap_or(20).min(20);
        let results: Vec<_> =
            (0..top_k).map(|i| json!({"id": format!("m{i}"), "memory": content, "score": 0.5})).collect();
        Reply::json(&json!({"results": results}))
    })
    .await
}

/// One raw HTTP/1.1 Nexent search asking for 20 results, to pipeline.
fn large_search_request() -> String {
    let body = r#"{"query":"q","limit":20}"#;
    format!(
        "POST /nexent/v1/repo-memory/search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A client that pipelines searches with large answers and never reads is dropped after the write
/// timeout, before it got all of them (before: the answers were held indefinitely). Its receive
/// buffer is small, so the answers cannot all vanish into kernel buffers.
#[tokio::test]
async fn a_reader_that_never_reads_is_dropped_after_the_write_timeout() {
    let upstream = large_answer_upstream().await;
    let (gateway, _dir, _logs) = gateway_for(&upstream.origin(), &["--write-timeout-ms", SHORT_MS]).await;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(8 * 1024).expect("small receive buffer");
    let address: std::net::SocketAddr = gateway.address().parse().expect("address");
    socket.connect(&address.into()).expect("connect");
    let mut stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(CEILING)).expect("timeout");
    let request = large_search_request();
    stream.write_all(request.repeat(8).as_bytes()).expect("pipelined requests");
    // Not reading for well over the write timeout.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (received, took) = read_until_closed(&mut stream, Instant::now());
    let answers = String::from_utf8_lossy(&received).matches("HTTP/1.1 200").count();
    assert!(answers < 8, "the connection was dropped before all answers were sent ({answers} started)");
    assert!(took < CEILING, "{took:?}");
    assert_eq!(gateway.search("repo-memory", &json!({"query": "q"}), None).await.status, 200);
}

/// The gateway's side of `client`'s connection in `/proc/net/tcp`: its TCP state and how many
/// bytes wait unacknowledged in its send queue; `None` once the kernel has let the socket go.
fn gateway_side(gateway_port: u16, client_port: u16) -> Option<(u8, u64)> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let port = |address: &str| address.rsplit_once(':').and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, state, queues) = (fields.get(1)?, fields.get(2)?, fields.get(3)?, fields.get(4)?);
        if port(local)? != gateway_port || port(remote)? != client_port {
            return None;
        }
        let tx_queue = u64::from_str_radix(queues.split(':').next()?, 16).ok()?;
        Some((u8::from_str_radix(state, 16).ok()?, tx_queue))
    })
}

/// A client that pipelines searches and then neither reads nor closes: once the gateway gives up on
/// it, the kernel must not keep the unsent answers either. Before, the gateway's close left an
/// orphan socket in FIN-WAIT-1 with its whole send queue for as long as the client kept answering
/// zero-window probes (369 MiB for 100 such clients); the accepted sockets now carry
/// `TCP_USER_TIMEOUT` = the write timeout, so the kernel drops it soon after.
#[tokio::test]
async fn a_reader_that_never_reads_leaves_no_send_queue_in_the_kernel() {
    let upstream = large_answer_upstream().await;
    let args = ["--write-timeout-ms", SHORT_MS, "--header-read-timeout-ms", SHORT_MS];
    let (gateway, _dir, _logs) = gateway_for(&upstream.origin(), &args).await;
    let address: std::net::SocketAddr = gateway.address().parse().expect("address");
    // Default buffers: both answers (about 1 MiB each) fit into the kernel's send and receive
    // buffers, so the gateway finishes writing them, no write stalls, and the connection is closed
    // normally by the keep-alive timeout with the answers still unsent.
    let mut stream = TcpStream::connect(address).expect("connect");
    let client_port = stream.local_addr().expect("local address").port();
    let request = large_search_request();
    stream.write_all(request.repeat(2).as_bytes()).expect("pipelined requests");
    let started = Instant::now();
    let mut seen_queued = false;
    loop {
        match gateway_side(address.port(), client_port) {
            None => break,
            Some((_, queued)) if queued > 0 => seen_queued = true,
            Some(_) => {}
        }
        assert!(
            started.elapsed() < CEILING,
            "after {:?} the gateway's side still holds {:?} (state, unsent bytes)",
            started.elapsed(),
            gateway_side(address.port(), client_port)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen_queued, "the answers did wait in the kernel's send queue (the test would prove nothing)");
    drop(stream);
    assert_eq!(gateway.search("repo-memory", &json!({"query": "q"}), None).await.status, 200);
}

/// Under `ulimit -n 512`, 600 idle connections neither stop a normal search nor a config reload
/// (before: the search timed out and the reload failed "unreadable").
#[tokio::test]
async fn idle_connections_cannot_use_up_the_file_descriptors() {
    let upstream = Server::always(Reply::json(&json!({"results": [{"id": "m1", "memory": "one"}]}))).await;
    let args = ["--header-read-timeout-ms", "60000"];
    let (gateway, dir, _logs) = gateway_with_open_files(&upstream.origin(), &args, Some(512)).await;
    let mut idle = Vec::new();
    for _ in 0..600 {
        match TcpStream::connect(gateway.address()) {
            Ok(stream) => idle.push(stream),
            Err(err) => panic!("connect: {err}"),
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fresh = serve_support::http_client();
    let url = format!("{}/nexent/v1/repo-memory/search", gateway.base);
    let answer = tokio::time::timeout(CEILING, fresh.post(url).json(&json!({"query": "q"})).send()).await;
    let answer = answer.expect("the search is answered in time").expect("answered");
    assert_eq!(answer.status(), 200, "a normal search is served: an idle connection makes room");
    let mut second = ProviderYaml::new("second", &upstream.origin());
    second.timeout_ms = 3000;
    std::fs::write(dir.path().join("second.yaml"), second.yaml()).expect("write");
    let ready = gateway.wait_ready("reload under 600 idle connections", |r| r["providers"] == 2).await;
    assert_eq!(ready["lastReloadError"], serde_json::Value::Null, "{ready}");
    drop(idle);
}

/// SIGTERM while a search is in flight: the search is still answered, then the process exits 0.
#[tokio::test]
async fn sigterm_drains_in_flight_requests() {
    let reply = Reply::After(Duration::from_millis(1500), Box::new(Reply::json(&json!({"results": []}))));
    let upstream = Server::always(reply).await;
    let (mut gateway, _dir, _logs) = gateway_for(&upstream.origin(), &[]).await;
    let pid = gateway.pid().expect("running").to_string();
    let search = {
        let http = serve_support::http_client();
        let url = format!("{}/nexent/v1/repo-memory/search", gateway.base);
        tokio::spawn(async move { http.post(url).json(&json!({"query": "q"})).send().await.map(|r| r.status()) })
    };
    upstream.wait_for_requests(1).await;
    let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(sent.success());
    let status = search.await.expect("task").expect("the in-flight search is answered");
    assert_eq!(status.as_u16(), 200);
    assert!(gateway.wait().await.success(), "{}", gateway.logs());
    assert!(TcpStream::connect(gateway.address()).is_err(), "nothing listens after the drain");
}

/// `count` clients that each pipeline four ~1 MiB searches with a tiny receive buffer and never
/// read; the streams are returned so they stay open.
fn stalled_readers(gateway: &Gateway, count: usize) -> Vec<TcpStream> {
    let address: std::net::SocketAddr = gateway.address().parse().expect("address");
    let request = large_search_request().repeat(4);
    (0..count)
        .map(|_| {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
            socket.set_recv_buffer_size(4 * 1024).expect("small receive buffer");
            socket.connect(&address.into()).expect("connect");
            let mut stream: TcpStream = socket.into();
            stream.write_all(request.as_bytes()).expect("pipelined requests");
            stream
        })
        .collect()
}

/// Readers that never read pin answer bodies in the gateway until the write timeout; the held-bytes
/// budget bounds those bodies (a large answer beyond it gets 503 and its body is freed at once),
/// small answers are never refused for it, and the budget comes back when the readers leave. The
/// resident growth is printed beside that of a gateway whose budget is too large to matter (the
/// rest is the transient work of the calls in flight and allocator caches: the benchmark's figure,
/// not asserted here).
///
/// The engine counts the upstream answers it is reading against the same budget and refuses one
/// that does not fit before reading it, so a stalled reader's pipelined search may be refused
/// cheaply instead of pinning an answer: how many readers it takes to spend the budget depends on
/// that race, so readers are added in waves until a large answer is refused.
#[tokio::test]
async fn stalled_readers_cannot_pin_more_answer_bytes_than_the_budget() {
    let upstream = large_answer_upstream().await;
    let write_timeout = ["--write-timeout-ms", "30000"];
    let bounded_args = [&write_timeout[..], &["--max-held-response-bytes", "8388608"]].concat();
    let (bounded, _dir, _logs) = gateway_for(&upstream.origin(), &bounded_args).await;
    let unbounded_args = [&write_timeout[..], &["--max-held-response-bytes", "4294967296"]].concat();
    let (unbounded, _dir2, _logs2) = gateway_for(&upstream.origin(), &unbounded_args).await;
    let large = json!({"query": "q", "limit": 20});

    let rss = |gateway: &Gateway| memgate_e2e::procfs::memory(gateway.pid().expect("pid")).expect("memory").rss;
    let mut growth = Vec::new();
    for gateway in [&unbounded, &bounded] {
        let before = rss(gateway);
        let mut readers = stalled_readers(gateway, 40);
        tokio::time::sleep(Duration::from_secs(4)).await;
        growth.push(rss(gateway).saturating_sub(before) as f64 / 1048576.0);
        let mut answer = gateway.search("repo-memory", &large, None).await;
        if std::ptr::eq(gateway, &bounded) {
            // The budget gets spent: a large answer is refused, retryable; a small one is served.
            for _ in 0..8 {
                if answer.status != 200 {
                    break;
                }
                readers.extend(stalled_readers(gateway, 20));
                tokio::time::sleep(Duration::from_secs(1)).await;
                answer = gateway.search("repo-memory", &large, None).await;
            }
            assert_eq!(answer.status, 503, "200 stalled readers never spent an 8 MiB budget");
            assert_eq!(answer.header("retry-after").as_deref(), Some("1"));
            assert_eq!(answer.json()["code"], "provider_error");
            let small = gateway.search("repo-memory", &json!({"query": "q", "limit": 1}), None).await;
            assert_eq!(small.status, 200, "a 48 KiB answer is not counted");
        } else {
            assert_eq!(answer.status, 200, "a budget too large to matter refuses nothing");
        }
        drop(readers);
    }
    eprintln!("40 stalled readers: +{:.1} MiB resident without a budget, +{:.1} MiB with 8 MiB", growth[0], growth[1]);
    // The readers are gone: their bodies are dropped and the budget returns.
    let deadline = Instant::now() + CEILING;
    while bounded.search("repo-memory", &large, None).await.status != 200 {
        assert!(Instant::now() < deadline, "the budget never came back after the readers left");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
