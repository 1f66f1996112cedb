//! The HTTP/1.1 wire format of upstream exchanges with `http://` origins (pure: bytes in, bytes or
//! facts out; the socket work is in `http1`).
//!
//! Requests are written as hyper's client wrote them for reqwest (origin-form target, the headers
//! in the order the request builder gives them, then `host`, then `content-length` when there is a
//! body). Answers are read as RFC 9112 frames a response to a `GET` or `POST` (§6.3), and as
//! hyper 1.12's client reads them (`proto/h1/role.rs` and `decode.rs`, read in the vendored crate;
//! `tests/upstream_framing.rs` holds the two together): `1xx` heads are interim and skipped,
//! except `101`, which ends the answer with no body and its connection (memgate never asks to
//! upgrade; hyper hands a `101` back as the answer); `204` and `304` have no body; a status below
//! 100 and a `Transfer-Encoding` in an HTTP/1.0 answer fail (RFC 9112 §6.1: faulty framing); the
//! last `Transfer-Encoding` header decides: chunked when its last comma-separated element is
//! `chunked`, read to the close otherwise; else a `Content-Length` (all of its values equal) is the
//! exact length, and an answer with neither reads to the close. A connection is kept for the next
//! call only when the answer says so (HTTP/1.1 without `Connection: close`, or HTTP/1.0 with
//! `Connection: keep-alive`) and its framing is unambiguous.
//!
//! Chunk-size lines follow hyper's rules too: a hexadecimal size first, no line feed inside an
//! extension, under 16 KiB of extensions per body (and 17 KiB per line); trailers are parsed as header lines (at most
//! 100, 16 KiB) and dropped.
//!
//! The head is parsed with `httparse` (hyper's own parser) with hyper's default of at most 100
//! headers; nothing here keeps a header other than `Retry-After`, and no value is ever printed.

use http::HeaderValue;

use super::error::EngineError;
use memgate_crds::SearchMethod;

use super::request::UpstreamRequest;

/// The most headers an answer may have (hyper's client default, `DEFAULT_MAX_HEADERS`).
const MAX_HEADERS: usize = 100;

/// The longest chunk-size line accepted. hyper bounds only a body's extensions
/// ([`CHUNK_EXTENSION_LIMIT`]); a line also holds the size and blanks, given 1 KiB more.
pub(super) const MAX_CHUNK_LINE: usize = 17 * 1024;

/// Chunk extensions in one body must stay under this many bytes (hyper's
/// `CHUNKED_EXTENSIONS_LIMIT`, reached at its 16384th byte).
pub(super) const CHUNK_EXTENSION_LIMIT: usize = 16 * 1024;

/// Trailers after a chunked body, the empty line that ends them included, must stay under this
/// many bytes (hyper's `TRAILER_LIMIT`, reached at its 16384th byte).
pub(super) const TRAILER_LIMIT: usize = 16 * 1024;

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
    match parse_head_into(bytes, &mut [httparse::EMPTY_HEADER; FEW_HEADERS]) {
        Some(parsed) => parsed,
        None => {
            parse_head_into(bytes, &mut [httparse::EMPTY_HEADER; MAX_HEADERS]).unwrap_or(Err(EngineError::Transport))
        }
    }
}

/// How many header slots [`parse_head`] tries first. httparse fails with `TooManyHeaders` at the
/// first header past the slots it has, before or after any other fault, so a retry with
/// [`MAX_HEADERS`] slots reads every head exactly as one parse with them would; most answers never
/// need it (clearing 100 slots per answer showed in the profile).
const FEW_HEADERS: usize = 16;

/// [`parse_head`] with `headers` as httparse's slots: `None` when the head has more headers than
/// slots.
fn parse_head_into<'b>(bytes: &'b [u8], headers: &mut [httparse::Header<'b>]) -> Option<Result<Parsed, EngineError>> {
    let mut response = httparse::Response::new(headers);
    let length = match response.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Some(Ok(Parsed::Partial)),
        Err(httparse::Error::TooManyHeaders) => return None,
        Err(_) => return Some(Err(EngineError::Transport)),
    };
    Some(head_of(&response, length))
}

/// The [`Parsed`] head of a complete `response` of `length` bytes.
fn head_of(response: &httparse::Response<'_, '_>, length: usize) -> Result<Parsed, EngineError> {
    let status = response.code.ok_or(EngineError::Transport)?;
    if status < 100 {
        return Err(EngineError::Transport);
    }
    if status == 101 {
        let upgraded = Head { status, retry_after: None, framing: Framing::Length(0), reusable: false };
        return Ok(Parsed::Final(upgraded, length));
    }
    if (100..200).contains(&status) {
        return Ok(Parsed::Interim(length));
    }
    let http11 = response.version == Some(1);
    let (mut retry_after, mut chunked, mut encoded) = (None, false, false);
    // `Some(None)`: a Content-Length that is not a number, or values that differ.
    let mut content_length: Option<Option<u64>> = None;
    let (mut close, mut keep_alive) = (false, false);
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("content-length") {
            let value = parse_content_length(header.value);
            content_length = match content_length {
                None => Some(value),
                Some(seen) => Some(seen.filter(|_| seen == value)),
            };
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            // Only the last coding of the last header decides (RFC 9112 §6.3, item 4), read as
            // hyper reads it: the value's last comma-separated element, trimmed, even when empty.
            chunked = is_chunked(header.value);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in tokens(header.value) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("retry-after") && retry_after.is_none() {
            retry_after = HeaderValue::from_bytes(header.value).ok();
        }
    }
    // In hyper's order (`Client::decoder` in `proto/h1/role.rs`): no body for 204 and 304 whatever
    // the headers; then Transfer-Encoding (refused in HTTP/1.0); then Content-Length.
    let framing = if status == 204 || status == 304 {
        Framing::Length(0)
    } else if encoded {
        if !http11 {
            return Err(EngineError::Transport);
        }
        if chunked { Framing::Chunked } else { Framing::UntilClose }
    } else {
        match content_length {
            Some(Some(length)) => Framing::Length(length),
            Some(None) => return Err(EngineError::Transport),
            None => Framing::UntilClose,
        }
    };
    // Both headers at once is how requests are smuggled: the body is read as
    // `Transfer-Encoding` says, and the connection is not trusted with another request.
    let ambiguous = encoded && content_length.is_some();
    let kept = if http11 { !close } else { keep_alive && !close };
    let reusable = kept && !ambiguous && framing != Framing::UntilClose;
    Ok(Parsed::Final(Head { status, retry_after, framing, reusable }, length))
}

/// A `Content-Length` value as hyper reads it (`content_length_parse_all_values`): visible ASCII,
/// a decimal number or a list of equal ones (RFC 9110 §8.6) that fits in a `u64`; `None` otherwise.
fn parse_content_length(value: &[u8]) -> Option<u64> {
    if !value.iter().all(|byte| is_value_byte(*byte)) {
        return None;
    }
    let mut length = None;
    for token in value.split(|byte| *byte == b',') {
        let token = token.trim_ascii();
        if token.is_empty() {
            return None;
        }
        let parsed = token.iter().try_fold(0u64, |sum, digit| {
            let digit = digit.is_ascii_digit().then(|| u64::from(digit - b'0'))?;
            sum.checked_mul(10)?.checked_add(digit)
        })?;
        if length.is_some_and(|seen| seen != parsed) {
            return None;
        }
        length = Some(parsed);
    }
    length
}

/// The comma-separated tokens of a header value, trimmed, empty ones left out.
fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|byte| *byte == b',').map(<[u8]>::trim_ascii).filter(|token| !token.is_empty())
}

/// A `Transfer-Encoding` value ends in `chunked`, as hyper's `transfer_encoding_is_chunked` reads
/// it: visible ASCII, and its last comma-separated element (even an empty one) is `chunked`.
fn is_chunked(value: &[u8]) -> bool {
    value.iter().all(|byte| is_value_byte(*byte))
        && value
            .rsplit(|byte| *byte == b',')
            .next()
            .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// A chunk-size line at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ChunkLine {
    /// Its length, the line's end included.
    pub(super) length: usize,
    /// The size of the chunk it announces.
    pub(super) size: u64,
    /// How many bytes of it are extensions (after the first `;`, as hyper counts them).
    pub(super) extensions: usize,
}

/// Parse the chunk-size line at the start of `bytes`; `None` when it is not whole yet. Fails on a
/// line that does not start with a hexadecimal size, has more than 16 digits, a line feed inside
/// an extension, or is longer than [`MAX_CHUNK_LINE`] bytes.
pub(super) fn parse_chunk_line(bytes: &[u8]) -> Result<Option<ChunkLine>, EngineError> {
    if bytes.first().is_some_and(|first| !first.is_ascii_hexdigit()) {
        return Err(EngineError::Transport);
    }
    match httparse::parse_chunk_size(bytes) {
        Ok(httparse::Status::Complete((length, size))) if length <= MAX_CHUNK_LINE => {
            // httparse lets any byte through inside an extension; hyper refuses a line feed there
            // (a reader that ends lines at a bare LF would see another line).
            let text = &bytes[..length - 2];
            if text.contains(&b'\n') {
                return Err(EngineError::Transport);
            }
            let extensions = text.iter().position(|byte| *byte == b';').map_or(0, |at| text.len() - at - 1);
            Ok(Some(ChunkLine { length, size, extensions }))
        }
        Ok(httparse::Status::Partial) if bytes.len() < MAX_CHUNK_LINE => Ok(None),
        _ => Err(EngineError::Transport),
    }
}

/// Parse the trailers after a chunked body's last chunk, up to and including the empty line
/// that ends them, as hyper does (`httparse::parse_headers`, at most [`MAX_HEADERS`]): their
/// length, `None` when they are not whole yet. Fails on a malformed line, too many of them, a
/// line feed without a carriage return before it (hyper ends trailers only at CRLF CRLF), or
/// [`TRAILER_LIMIT`] bytes.
pub(super) fn parse_trailers(bytes: &[u8]) -> Result<Option<usize>, EngineError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::parse_headers(bytes, &mut headers) {
        Ok(httparse::Status::Complete((length, _))) if length < TRAILER_LIMIT => {
            let block = &bytes[..length];
            let bare_line_feed =
                block.iter().enumerate().any(|(at, byte)| *byte == b'\n' && (at == 0 || block[at - 1] != b'\r'));
            if bare_line_feed { Err(EngineError::Transport) } else { Ok(Some(length)) }
        }
        Ok(httparse::Status::Partial) if bytes.len() < TRAILER_LIMIT => Ok(None),
        _ => Err(EngineError::Transport),
    }
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
        let cases: [(&str, Framing, bool); 15] = [
            ("HTTP/1.1 200 OK\r\ncontent-length: 14\r\n\r\n", Framing::Length(14), true),
            ("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", Framing::Length(5), true),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", Framing::Chunked, true),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n", Framing::Chunked, true),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n", Framing::UntilClose, false),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked,\r\n\r\n", Framing::UntilClose, false),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: \u{ff}, chunked\r\n\r\n", Framing::UntilClose, false),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n\r\n",
                Framing::UntilClose,
                false,
            ),
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
    fn heads_past_the_first_header_slots_are_read_whole() {
        // The framing header comes last, so it is read only if every header before it was.
        for count in [FEW_HEADERS - 1, FEW_HEADERS, FEW_HEADERS + 1, MAX_HEADERS] {
            let text = format!("HTTP/1.1 200 OK\r\n{}content-length: 3\r\n\r\n", "x-a: 1\r\n".repeat(count - 1));
            assert_eq!(head(&text).framing, Framing::Length(3), "{count} headers");
            let cut = &text[..text.len() - 4];
            assert_eq!(parse_head(cut.as_bytes()), Ok(Parsed::Partial), "{count} headers, cut");
        }
        // A fault after the first slots is still found.
        let late_fault = format!("HTTP/1.1 200 OK\r\n{}bad header\r\n\r\n", "x-a: 1\r\n".repeat(FEW_HEADERS + 3));
        assert_eq!(parse_head(late_fault.as_bytes()), Err(EngineError::Transport));
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
            "HTTP/1.1 000 Zero\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 099 Low\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n",
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
        let line = |length, size, extensions| Ok(Some(ChunkLine { length, size, extensions }));
        assert_eq!(parse_chunk_line(b"1a\r\nrest"), line(4, 26, 0));
        assert_eq!(parse_chunk_line(b"5;name=value\r\n"), line(14, 5, 10));
        assert_eq!(parse_chunk_line(b"5 ;a\r\n"), line(6, 5, 1));
        assert_eq!(parse_chunk_line(b"0\r\n"), line(3, 0, 0));
        assert_eq!(parse_chunk_line(b"1a"), Ok(None));
        assert_eq!(parse_chunk_line(b""), Ok(None));
        for bad in [&b"\r\n"[..], b"x\r\n", b"1\rx", b";ext\r\n", b"1234567890abcdef0\r\n", b"5;a\nb\r\n"] {
            assert_eq!(parse_chunk_line(bad), Err(EngineError::Transport), "{:?}", String::from_utf8_lossy(bad));
        }
        let longest = format!("1;{}\r\n", "e".repeat(MAX_CHUNK_LINE - 4));
        assert_eq!(parse_chunk_line(longest.as_bytes()), line(MAX_CHUNK_LINE, 1, MAX_CHUNK_LINE - 4));
        let whole = format!("1;{}\r\n", "e".repeat(MAX_CHUNK_LINE - 3));
        assert_eq!(parse_chunk_line(whole.as_bytes()), Err(EngineError::Transport), "too long though whole");
        let partial = format!("1;{}", "e".repeat(MAX_CHUNK_LINE));
        assert_eq!(parse_chunk_line(partial.as_bytes()), Err(EngineError::Transport));
    }

    #[test]
    fn trailers_are_header_lines_up_to_the_empty_line_and_bounded() {
        assert_eq!(parse_trailers(b"\r\nnext"), Ok(Some(2)));
        assert_eq!(parse_trailers(b"x-sum: 1\r\nx-b: 2\r\n\r\n"), Ok(Some(20)));
        assert_eq!(parse_trailers(b"x-sum: 1\r\n"), Ok(None));
        assert_eq!(parse_trailers(b"\r"), Ok(None));
        for bad in ["HTTP/1.1 200 OK\r\n\r\n", "\rX: 1\r\n\r\n", "no colon\r\n\r\n"] {
            assert_eq!(parse_trailers(bad.as_bytes()), Err(EngineError::Transport), "{bad:?}");
        }
        let many = format!("{}\r\n", "x-a: 1\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(parse_trailers(many.as_bytes()), Err(EngineError::Transport));
        for bare in ["\n", "x-a: 1\n\n", "x-a: 1\n\r\n", "x-a: 1\r\n\n"] {
            assert_eq!(parse_trailers(bare.as_bytes()), Err(EngineError::Transport), "{bare:?}");
        }
        let longest = format!("x-a: {}\r\n\r\n", "a".repeat(TRAILER_LIMIT - 10));
        assert_eq!(parse_trailers(longest.as_bytes()), Ok(Some(TRAILER_LIMIT - 1)));
        let long = format!("x-a: {}\r\n\r\n", "a".repeat(TRAILER_LIMIT - 9));
        assert_eq!(parse_trailers(long.as_bytes()), Err(EngineError::Transport), "too long though whole");
        assert_eq!(parse_trailers(&long.as_bytes()[..TRAILER_LIMIT]), Err(EngineError::Transport));
    }
}
