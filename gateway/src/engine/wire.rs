//! The HTTP/1.1 wire format of upstream exchanges with `http://` origins (pure: bytes in, bytes or
//! facts out; the socket work is in `http1`).
//!
//! Requests are written as hyper's client wrote them for reqwest (origin-form target, the headers
//! in the order the request builder gives them, then `host`, then `content-length` when there is a
//! body). Answers are read as RFC 9112 frames a response to a `GET` or `POST` (§6.3): `1xx` heads
//! are interim and skipped, except `101`, which ends the answer with no body and its connection
//! (memgate never asks to upgrade; hyper's client also hands a `101` back as the answer), `204`
//! and `304` have no body, a `Transfer-Encoding` whose last coding is `chunked` is decoded, any other
//! `Transfer-Encoding` reads to the close, a `Content-Length` (all of its values equal) is the
//! exact length, and an answer with neither reads to the close. A connection is kept for the next
//! call only when the answer says so (HTTP/1.1 without `Connection: close`, or HTTP/1.0 with
//! `Connection: keep-alive`) and its framing is unambiguous.
//!
//! The head is parsed with `httparse` (hyper's own parser) with hyper's default of at most 100
//! headers; nothing here keeps a header other than `Retry-After`, and no value is ever printed.

use http::HeaderValue;

use super::error::EngineError;
use memgate_crds::SearchMethod;

use super::request::UpstreamRequest;

/// The most headers an answer may have (hyper's client default, `DEFAULT_MAX_HEADERS`).
const MAX_HEADERS: usize = 100;

/// The longest chunk-size line (size and extensions) accepted.
pub(super) const MAX_CHUNK_LINE: usize = 4096;

/// How a response's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// Exactly this many bytes (0 for `204`, `304` and `content-length: 0`).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// At the connection's close (which then cannot be reused).
    UntilClose,
}

/// The parts of a final response head the engine uses.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Head {
    /// The status code.
    pub(super) status: u16,
    /// Its `Retry-After` header, if any (the first).
    pub(super) retry_after: Option<HeaderValue>,
    /// How its body ends.
    pub(super) framing: Framing,
    /// The connection may carry another request once this body has been read.
    pub(super) reusable: bool,
}

/// What the start of a read buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Parsed {
    /// Not a whole head yet.
    Partial,
    /// An interim (`1xx`) head of this many bytes, to be skipped.
    Interim(usize),
    /// A final head of this many bytes.
    Final(Head, usize),
}

/// The bytes of `request` as sent on the connection. Fails with
/// [`EngineError::InvalidRequest`] (nothing sent) when a header value or the target could not be
/// sent as it is (a control character, say), as hyper's `HeaderValue` and `Uri` refused them.
pub(super) fn encode_request(request: &UpstreamRequest) -> Result<Vec<u8>, EngineError> {
    let body = request.body.as_ref().map(|body| body.as_bytes());
    let target = &request.url[url::Position::BeforePath..url::Position::AfterQuery];
    // `host[:port]` as written (the URL leaves out a scheme's default port).
    let host = &request.url[url::Position::BeforeHost..url::Position::AfterPort];
    if !target.starts_with('/') || !target.bytes().all(is_target_byte) || !host.bytes().all(is_target_byte) {
        return Err(EngineError::InvalidRequest);
    }
    let headers: usize = request.headers.iter().map(|(name, value)| name.len() + value.len() + 4).sum();
    let mut out = Vec::with_capacity(48 + target.len() + host.len() + headers + body.map_or(0, <[u8]>::len));
    out.extend_from_slice(match request.method {
        SearchMethod::Get => b"GET ",
        SearchMethod::Post => b"POST ",
    });
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &request.headers {
        if !name.bytes().all(|byte| byte.is_ascii_lowercase() || byte == b'-') || !value.bytes().all(is_value_byte) {
            return Err(EngineError::InvalidRequest);
        }
        push_header(&mut out, name, value.as_bytes());
    }
    push_header(&mut out, "host", host.as_bytes());
    if let Some(body) = body {
        let mut digits = [0; 20];
        push_header(&mut out, "content-length", format_length(&mut digits, body.len()));
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
    } else {
        out.extend_from_slice(b"\r\n");
    }
    Ok(out)
}

fn push_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// A byte `HeaderValue::from_str` accepts: visible ASCII, space or tab.
fn is_value_byte(byte: u8) -> bool {
    (0x20..0x7f).contains(&byte) || byte == b'\t'
}

/// A byte of an origin-form target or an authority as the `url` crate writes them (visible ASCII,
/// no space).
fn is_target_byte(byte: u8) -> bool {
    (0x21..0x7f).contains(&byte)
}

/// `length` in decimal, written at the end of `buffer`.
fn format_length(buffer: &mut [u8; 20], mut length: usize) -> &[u8] {
    let mut at = buffer.len();
    loop {
        at -= 1;
        // A digit: `length % 10` is below 10.
        buffer[at] = b'0' + (length % 10) as u8;
        length /= 10;
        if length == 0 {
            return &buffer[at..];
        }
    }
}

/// Parse the response head at the start of `bytes`. Fails with [`EngineError::Transport`] on a
/// malformed head, more than [`MAX_HEADERS`] headers or a `Content-Length` that is not one
/// decimal number.
pub(super) fn parse_head(bytes: &[u8]) -> Result<Parsed, EngineError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let length = match response.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(_) => return Err(EngineError::Transport),
    };
    let status = response.code.ok_or(EngineError::Transport)?;
    if status == 101 {
        let upgraded = Head { status, retry_after: None, framing: Framing::Length(0), reusable: false };
        return Ok(Parsed::Final(upgraded, length));
    }
    if (100..200).contains(&status) {
        return Ok(Parsed::Interim(length));
    }
    let http11 = response.version == Some(1);
    let (mut retry_after, mut content_length, mut chunked, mut encoded) = (None, None, false, false);
    let (mut close, mut keep_alive) = (false, false);
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let value = parse_content_length(header.value)?;
            if content_length.is_some_and(|seen| seen != value) {
                return Err(EngineError::Transport);
            }
            content_length = Some(value);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            // Only the last coding of the last header decides (RFC 9112 §6.3, item 4).
            chunked = last_token(header.value).is_some_and(|last| last.eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("connection") {
            for token in tokens(header.value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("retry-after") && retry_after.is_none() {
            retry_after = HeaderValue::from_bytes(header.value).ok();
        }
    }
    let framing = if status == 204 || status == 304 {
        Framing::Length(0)
    } else if encoded {
        if chunked { Framing::Chunked } else { Framing::UntilClose }
    } else {
        content_length.map_or(Framing::UntilClose, Framing::Length)
    };
    // Both headers at once is how requests are smuggled: the body is read as
    // `Transfer-Encoding` says, and the connection is not trusted with another request.
    let ambiguous = encoded && content_length.is_some();
    let kept = if http11 { !close } else { keep_alive && !close };
    let reusable = kept && !ambiguous && framing != Framing::UntilClose;
    Ok(Parsed::Final(Head { status, retry_after, framing, reusable }, length))
}

/// A `Content-Length` value: a decimal number, or a list of equal ones (RFC 9110 §8.6).
fn parse_content_length(value: &[u8]) -> Result<u64, EngineError> {
    let mut length = None;
    for token in value.split(|byte| *byte == b',') {
        let token = token.trim_ascii();
        if token.is_empty() || token.len() > 19 || !token.iter().all(u8::is_ascii_digit) {
            return Err(EngineError::Transport);
        }
        let parsed = token.iter().fold(0u64, |sum, digit| sum * 10 + u64::from(digit - b'0'));
        if length.is_some_and(|seen| seen != parsed) {
            return Err(EngineError::Transport);
        }
        length = Some(parsed);
    }
    length.ok_or(EngineError::Transport)
}

/// The comma-separated tokens of a header value, trimmed, empty ones left out.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|byte| *byte == b',').map(<[u8]>::trim_ascii).filter(|token| !token.is_empty())
}

fn last_token(value: &[u8]) -> Option<&[u8]> {
    tokens(value).last()
}

/// Parse the chunk-size line at the start of `bytes`: `Some((line length, chunk size))`, `None`
/// when the line is not whole yet. Fails on a line without a hexadecimal size, over 15 digits, or
/// longer than [`MAX_CHUNK_LINE`] bytes.
pub(super) fn parse_chunk_line(bytes: &[u8]) -> Result<Option<(usize, u64)>, EngineError> {
    if bytes.first().is_some_and(|first| !first.is_ascii_hexdigit()) {
        return Err(EngineError::Transport);
    }
    match httparse::parse_chunk_size(bytes) {
        Ok(httparse::Status::Complete(line)) => Ok(Some(line)),
        Ok(httparse::Status::Partial) if bytes.len() < MAX_CHUNK_LINE => Ok(None),
        _ => Err(EngineError::Transport),
    }
}

/// Parse one trailer line (or the empty line that ends the trailers) at the start of `bytes`:
/// `Some((line length, whether it was the last))`, `None` when the line is not whole yet.
pub(super) fn parse_trailer_line(bytes: &[u8]) -> Option<(usize, bool)> {
    let end = bytes.windows(2).position(|pair| pair == b"\r\n")?;
    Some((end + 2, end == 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::request::{HeaderText, JsonBody};

    fn request(method: SearchMethod, url: &str, body: Option<serde_json::Value>) -> UpstreamRequest {
        UpstreamRequest {
            method,
            url: url::Url::parse(url).expect("url"),
            headers: vec![("accept", HeaderText::from("application/json")), ("authorization", "Token s".into())],
            body: body.as_ref().map(JsonBody::from_value),
        }
    }

    fn encoded(request: &UpstreamRequest) -> Result<String, EngineError> {
        Ok(String::from_utf8(encode_request(request)?).expect("utf-8"))
    }

    #[test]
    fn a_request_is_written_with_host_then_length_after_its_headers() {
        let post = request(SearchMethod::Post, "http://mem0:8000/v1/search/?a=1", Some(serde_json::json!({"q": 1})));
        assert_eq!(
            encoded(&post).expect("encoded"),
            "POST /v1/search/?a=1 HTTP/1.1\r\naccept: application/json\r\nauthorization: Token s\r\n\
             host: mem0:8000\r\ncontent-length: 7\r\n\r\n{\"q\":1}"
        );
        let get = request(SearchMethod::Get, "http://mem0/search?query=a+b", None);
        assert_eq!(
            encoded(&get).expect("encoded"),
            "GET /search?query=a+b HTTP/1.1\r\naccept: application/json\r\nauthorization: Token s\r\nhost: mem0\r\n\r\n"
        );
    }

    #[test]
    fn a_header_value_with_a_control_character_is_not_sent() {
        for bad in ["Token a\r\nx-injected: 1", "Token \0", "Token é"] {
            let mut with_bad = request(SearchMethod::Get, "http://mem0/search", None);
            with_bad.headers[1].1 = bad.to_owned().into();
            assert_eq!(encoded(&with_bad), Err(EngineError::InvalidRequest), "{bad:?}");
        }
    }

    #[test]
    fn lengths_are_written_in_decimal() {
        let mut buffer = [0; 20];
        for length in [0, 7, 10, 1234, usize::MAX] {
            assert_eq!(format_length(&mut buffer, length), length.to_string().as_bytes());
        }
    }

    fn head(text: &str) -> Head {
        match parse_head(text.as_bytes()) {
            Ok(Parsed::Final(head, length)) => {
                assert_eq!(length, text.len(), "the whole head");
                head
            }
            other => panic!("{other:?} for {text:?}"),
        }
    }

    #[test]
    fn an_answer_is_framed_as_rfc_9112_says() {
        let cases: [(&str, Framing, bool); 12] = [
            ("HTTP/1.1 200 OK\r\ncontent-length: 14\r\n\r\n", Framing::Length(14), true),
            ("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", Framing::Length(5), true),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", Framing::Chunked, true),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", Framing::Chunked, true),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n", Framing::UntilClose, false),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n", Framing::Chunked, false),
            ("HTTP/1.1 200 OK\r\n\r\n", Framing::UntilClose, false),
            ("HTTP/1.1 204 No Content\r\ncontent-length: 9\r\n\r\n", Framing::Length(0), true),
            ("HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n", Framing::Length(0), true),
            ("HTTP/1.1 200 OK\r\nconnection: Close\r\ncontent-length: 1\r\n\r\n", Framing::Length(1), false),
            ("HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n", Framing::Length(1), false),
            ("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 1\r\n\r\n", Framing::Length(1), true),
        ];
        for (text, framing, reusable) in cases {
            let parsed = head(text);
            assert_eq!((parsed.framing, parsed.reusable), (framing, reusable), "{text:?}");
        }
    }

    #[test]
    fn status_and_the_first_retry_after_are_kept() {
        let parsed = head("HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nretry-after: 9\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(parsed.status, 429);
        assert_eq!(parsed.retry_after, Some(HeaderValue::from_static("7")));
    }

    #[test]
    fn a_switch_of_protocols_ends_the_answer_and_its_connection() {
        let switched = head("HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\ncontent-length: 5\r\n\r\n");
        assert_eq!((switched.status, switched.framing, switched.reusable), (101, Framing::Length(0), false));
    }

    #[test]
    fn interim_heads_are_skipped_and_partial_heads_wait() {
        let interim = "HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(parse_head(format!("{interim}HTTP/1.1 200").as_bytes()), Ok(Parsed::Interim(interim.len())));
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-len"), Ok(Parsed::Partial));
        assert_eq!(parse_head(b""), Ok(Parsed::Partial));
    }

    #[test]
    fn malformed_heads_fail() {
        let too_many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "x-a: 1\r\n".repeat(MAX_HEADERS + 1));
        for text in [
            "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 1, 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length:\r\n\r\n",
            "HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
            "HTTP/1.1 200 OK\r\nfolded: a\r\n b\r\n\r\n",
            "SMTP ready\r\n\r\n",
            too_many.as_str(),
        ] {
            assert_eq!(parse_head(text.as_bytes()), Err(EngineError::Transport), "{text:?}");
        }
    }

    #[test]
    fn chunk_lines_are_parsed_with_extensions_and_bounded() {
        assert_eq!(parse_chunk_line(b"1a\r\nrest"), Ok(Some((4, 26))));
        assert_eq!(parse_chunk_line(b"5;name=value\r\n"), Ok(Some((14, 5))));
        assert_eq!(parse_chunk_line(b"0\r\n"), Ok(Some((3, 0))));
        assert_eq!(parse_chunk_line(b"1a"), Ok(None));
        assert_eq!(parse_chunk_line(b""), Ok(None));
        for bad in [&b"\r\n"[..], b"x\r\n", b"1\rx", b";ext\r\n", b"1234567890abcdef0\r\n"] {
            assert_eq!(parse_chunk_line(bad), Err(EngineError::Transport), "{:?}", String::from_utf8_lossy(bad));
        }
        let long = format!("1;{}", "e".repeat(MAX_CHUNK_LINE));
        assert_eq!(parse_chunk_line(long.as_bytes()), Err(EngineError::Transport));
    }

    #[test]
    fn trailer_lines_end_at_the_empty_line() {
        assert_eq!(parse_trailer_line(b"x-sum: 1\r\n\r\n"), Some((10, false)));
        assert_eq!(parse_trailer_line(b"\r\n"), Some((2, true)));
        assert_eq!(parse_trailer_line(b"x-sum: 1"), None);
    }
}
