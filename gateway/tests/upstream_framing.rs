//! The engine reads an upstream's HTTP/1.1 answer as hyper's HTTP/1 client does (the client it
//! replaced for `http://` upstreams, still reqwest's for `https://`): for each answer below, both
//! get the same status and body, or both fail. hyper is the real peer here, driven over an
//! in-memory stream whose other end writes the answer and closes.

use http_body_util::BodyExt;
use hyper::client::conn::http1::handshake;
use hyper_util::rt::TokioIo;
use memgate_gateway::engine::read_upstream_answer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What hyper's client reads of `answer` to a `GET`: status and body, `None` when it fails.
async fn hyper_reads(answer: &[u8]) -> Option<(u16, Vec<u8>)> {
    let (client, mut server) = tokio::io::duplex(256 * 1024);
    let answer = answer.to_vec();
    let upstream = tokio::spawn(async move {
        let mut request = [0u8; 1024];
        let _ = server.read(&mut request).await;
        let _ = server.write_all(&answer).await;
        let _ = server.shutdown().await;
        // Keep the stream open (its read side) until the client is done.
        let _ = server.read(&mut request).await;
    });
    let (mut sender, connection) = handshake(TokioIo::new(client)).await.ok()?;
    let driver = tokio::spawn(connection);
    let request = http::Request::get("/search").header("host", "mem0").body(String::new()).ok()?;
    let read = async {
        let response = sender.send_request(request).await.ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes().to_vec();
        Some((status, body))
    };
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), read).await.ok()?;
    driver.abort();
    upstream.abort();
    read
}

fn engine_reads(answer: &[u8]) -> Option<(u16, Vec<u8>)> {
    read_upstream_answer(&[answer]).ok().map(|(status, body, _)| (status, body))
}

const OK: &str = "HTTP/1.1 200 OK\r\n";

#[tokio::test]
async fn every_answer_reads_as_hyper_reads_it() {
    let answers = [
        format!("{OK}content-length: 5\r\n\r\nhello"),
        format!("{OK}Content-Length: 5\r\ncontent-type: application/json\r\n\r\nhello and more"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
        format!("{OK}Transfer-Encoding: Chunked\r\n\r\n3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nx-t: 1\r\n\r\n"),
        format!("{OK}transfer-encoding: chunked\r\ncontent-length: 100\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        format!("{OK}transfer-encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        format!("{OK}\r\nuntil the end"),
        "HTTP/1.0 200 OK\r\n\r\nuntil the end".to_owned(),
        "HTTP/1.1 204 No Content\r\n\r\n".to_owned(),
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_owned(),
        "HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_owned(),
        "HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\ncontent-length: 2\r\n\r\nno".to_owned(),
        format!("{OK}content-length: 5, 5\r\n\r\nhello"),
        // The last Transfer-Encoding element decides, read as hyper reads it.
        format!("{OK}transfer-encoding: chunked,\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        format!("{OK}transfer-encoding: \u{ff}, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        format!("{OK}transfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        // Cut short or malformed: both fail.
        format!("{OK}content-length: 5\r\n\r\nhel"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhiXX0\r\n\r\n"),
        format!("{OK}content-length: 1\r\ncontent-length: 2\r\n\r\nhi"),
        format!("{OK}content-length: -1\r\n\r\nhi"),
        format!("{OK}content-length: 1, 2\r\n\r\nhi"),
        "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
            .to_owned(),
        "HTTP/1.1 000 Zero\r\ncontent-length: 0\r\n\r\n".to_owned(),
        format!("{OK}transfer-encoding: chunked\r\n\r\n5;a\nhello\r\n0\r\n\r\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nHTTP/1.1 200 OK\r\n\r\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\rX: 1\r\n\r\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n{}\r\n", "x-a: 1\r\n".repeat(101)),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx-a: {}\r\n\r\n", "a".repeat(16 * 1024)),
        format!(
            "{OK}transfer-encoding: chunked\r\n\r\n{}0\r\n\r\n",
            format!("1;{}\r\nx\r\n", "e".repeat(4000)).repeat(5)
        ),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx: 1\n\n"),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx: 1\n\r\n"),
        // No body for 204 and 304 whatever the headers; Content-Length unread under Transfer-Encoding.
        "HTTP/1.0 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n".to_owned(),
        "HTTP/1.1 204 No Content\r\ncontent-length: x\r\n\r\n".to_owned(),
        format!("{OK}transfer-encoding: chunked\r\ncontent-length: x\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        format!("{OK}content-length: 00000000000000000000002\r\n\r\nhi"),
        format!("{OK}content-length: 99999999999999999999\r\n\r\nhi"),
        // Extensions: just under hyper's 16 KiB per body, and at it.
        format!(
            "{OK}transfer-encoding: chunked\r\n\r\n{}0\r\n\r\n",
            format!("1;{}\r\nx\r\n", "e".repeat(4095)).repeat(4)
        ),
        format!(
            "{OK}transfer-encoding: chunked\r\n\r\n{}0\r\n\r\n",
            format!("1;{}\r\nx\r\n", "e".repeat(4096)).repeat(4)
        ),
        // Trailers: just under hyper's 16 KiB, and at it.
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx-a: {}\r\n\r\n", "a".repeat(16 * 1024 - 10)),
        format!("{OK}transfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx-a: {}\r\n\r\n", "a".repeat(16 * 1024 - 9)),
        format!("{OK}bad header\r\n\r\n"),
        format!("{OK}{}content-length: 0\r\n\r\n", "x-a: 1\r\n".repeat(100)),
        format!("{OK}folded: a\r\n b\r\ncontent-length: 0\r\n\r\n"),
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\n\r\n".to_owned(),
        "HTTP/2 200 OK\r\n\r\n".to_owned(),
        "not http at all\r\n\r\n".to_owned(),
        String::new(),
    ];
    let mut differences = Vec::new();
    for answer in &answers {
        let (hyper, engine) = (hyper_reads(answer.as_bytes()).await, engine_reads(answer.as_bytes()));
        if hyper != engine {
            differences.push(format!("{answer:?}: hyper {hyper:?}, engine {engine:?}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// The one difference kept on purpose: the engine reads at most 64 KiB of answer head (hyper's
/// buffer allows about 400 KiB), so an upstream cannot make a call hold more than that before
/// its body.
#[tokio::test]
async fn a_head_over_64_kib_is_refused_where_hyper_reads_it() {
    let long = format!("{OK}x-long: {}\r\ncontent-length: 2\r\n\r\nok", "a".repeat(64 * 1024));
    assert_eq!(hyper_reads(long.as_bytes()).await, Some((200, b"ok".to_vec())));
    assert_eq!(engine_reads(long.as_bytes()), None);
    let within = format!("{OK}x-long: {}\r\ncontent-length: 2\r\n\r\nok", "a".repeat(60 * 1024));
    assert_eq!(engine_reads(within.as_bytes()), hyper_reads(within.as_bytes()).await);
}
