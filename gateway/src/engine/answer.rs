//! Reading one upstream answer off an HTTP/1.1 connection: its head (interim ones skipped) and
//! its body as [`wire::Framing`] says, from a connection's read buffer ([`Inbox`]) and socket.
//!
//! Generic over the socket so that tests and the `upstream_answer` fuzz target read answers from
//! memory, delivered in whatever pieces they choose; the engine reads from a `TcpStream`.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use super::error::EngineError;
use super::wire::{self, Framing, Head, Parsed};

/// A connection's read buffer: its size while pooled (so the most its first read of an answer
/// takes), and the most it grows to (which is also the longest answer head read).
pub const INBOX_SIZE: usize = 8 * 1024;
const MAX_INBOX_SIZE: usize = 64 * 1024;

/// Bytes read from a connection and not used yet: `bytes[start..]`. The vector's capacity is the
/// buffer's size; reads append into its spare capacity, so no byte of it is ever zeroed.
pub(super) struct Inbox {
    bytes: Vec<u8>,
    start: usize,
}

impl Inbox {
    pub(super) fn new() -> Inbox {
        Inbox { bytes: Vec::with_capacity(INBOX_SIZE), start: 0 }
    }

    /// Nothing read is left unused.
    pub(super) fn is_empty(&self) -> bool {
        self.start == self.bytes.len()
    }

    /// Back to [`INBOX_SIZE`] (when empty): a pooled connection keeps only that.
    pub(super) fn shrink(&mut self) {
        if self.bytes.capacity() > INBOX_SIZE && self.is_empty() {
            self.bytes.clear();
            self.start = 0;
            self.bytes.shrink_to(INBOX_SIZE);
        }
    }

    fn unread(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    fn consume(&mut self, count: usize) {
        self.start += count;
        if self.start >= self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        }
    }

    /// Make room to read into after the unread bytes: they are moved to the front, or the buffer
    /// doubled (up to [`MAX_INBOX_SIZE`]), when it is full. `false` only when [`MAX_INBOX_SIZE`]
    /// unread bytes are buffered.
    fn make_room(&mut self) -> bool {
        if self.bytes.len() == self.bytes.capacity() {
            if self.start > 0 {
                self.bytes.drain(..self.start);
                self.start = 0;
            } else {
                self.grow();
            }
        }
        self.bytes.len() < self.bytes.capacity()
    }

    /// `count` bytes were read; a read that filled the buffer doubles it for the next (a large
    /// body is read in fewer, larger reads, as hyper's adaptive read buffer does).
    fn filled(&mut self, count: usize) {
        if self.bytes.len() == self.bytes.capacity() && count > 0 {
            self.grow();
        }
    }

    fn grow(&mut self) {
        let size = (self.bytes.capacity() * 2).min(MAX_INBOX_SIZE);
        self.bytes.reserve_exact(size.saturating_sub(self.bytes.len()));
    }
}

/// Where the bytes of a body go as they are read.
pub(super) trait BodySink {
    /// Take the next run of the body's bytes; an error ends the read.
    fn push(&mut self, chunk: &[u8]) -> Result<(), EngineError>;

    /// A buffer to read the next `left` bytes of the body straight into, instead of through the
    /// inbox and [`BodySink::push`] (no copy, and no inbox grown for a large body): only where the
    /// bytes appended are checked already, as a body of declared length is against its cap when
    /// its buffer is reserved. A read appends at most the buffer's spare capacity, so it is used
    /// only when that is at most `left` (else the read could take bytes past the body's end).
    fn direct(&mut self, left: u64) -> Option<&mut Vec<u8>> {
        let _ = left;
        None
    }
}

/// `buffer` for [`BodySink::direct`] when its spare capacity is not empty and at most `left`.
pub(super) fn spare_within(buffer: &mut Vec<u8>, left: u64) -> Option<&mut Vec<u8>> {
    let spare = buffer.capacity() - buffer.len();
    (spare > 0 && spare as u64 <= left).then_some(buffer)
}

impl<F: FnMut(&[u8]) -> Result<(), EngineError>> BodySink for F {
    fn push(&mut self, chunk: &[u8]) -> Result<(), EngineError> {
        self(chunk)
    }
}

/// One answer being read from `socket` through `inbox`.
pub(super) struct AnswerReader<'a, S> {
    pub(super) socket: &'a mut S,
    pub(super) inbox: &'a mut Inbox,
}

impl<S: AsyncRead + Unpin> AnswerReader<'_, S> {
    /// The answer's final head, interim (`1xx`) ones skipped.
    pub(super) async fn head(&mut self) -> Result<Head, EngineError> {
        loop {
            match wire::parse_head(self.inbox.unread())? {
                Parsed::Partial => self.more_lines(MAX_INBOX_SIZE).await?,
                Parsed::Interim(length) => self.inbox.consume(length),
                Parsed::Final(head, length) => {
                    self.inbox.consume(length);
                    return Ok(head);
                }
            }
        }
    }

    /// Read the body `head` frames, handing each run of its bytes to `sink` (whose error ends the
    /// read). `true` when the connection may carry another request: the answer allows it and
    /// nothing unasked follows its end.
    pub(super) async fn body(&mut self, head: &Head, sink: &mut impl BodySink) -> Result<bool, EngineError> {
        match head.framing {
            Framing::Length(length) => self.exact(length, sink).await?,
            Framing::Chunked => self.chunked(sink).await?,
            Framing::UntilClose => loop {
                let unread = self.inbox.unread();
                sink.push(unread)?;
                let read = unread.len();
                self.inbox.consume(read);
                if self.fill().await? == 0 {
                    break;
                }
            },
        }
        Ok(head.reusable && self.inbox.is_empty())
    }

    /// `length` bytes of body, to `sink`: what the inbox holds of them, then the rest straight
    /// into the sink's buffer where it offers one ([`BodySink::direct`]), else through the inbox.
    async fn exact(&mut self, mut length: u64, sink: &mut impl BodySink) -> Result<(), EngineError> {
        loop {
            let unread = self.inbox.unread();
            let take = usize::try_from(length).map_or(unread.len(), |length| length.min(unread.len()));
            if take > 0 {
                sink.push(&unread[..take])?;
                self.inbox.consume(take);
                length -= take as u64;
            }
            if length == 0 {
                return Ok(());
            }
            match sink.direct(length) {
                Some(buffer) => length -= self.read_into(buffer).await?,
                None => self.more().await?,
            }
        }
    }

    /// One read from the socket appended to `buffer` (into its spare capacity, which must not be
    /// empty): how many bytes. The upstream closing here is [`EngineError::Transport`].
    async fn read_into(&mut self, buffer: &mut Vec<u8>) -> Result<u64, EngineError> {
        if buffer.capacity() == buffer.len() {
            return Err(EngineError::Transport);
        }
        match self.socket.read_buf(buffer).await {
            Ok(0) | Err(_) => Err(EngineError::Transport),
            Ok(read) => Ok(read as u64),
        }
    }

    /// A chunked body (RFC 9112 §7.1) to `sink`: each chunk's data, then the trailers, read and
    /// dropped (they carry nothing the engine reads).
    async fn chunked(&mut self, sink: &mut impl BodySink) -> Result<(), EngineError> {
        let mut extensions = 0;
        loop {
            let line = loop {
                match wire::parse_chunk_line(self.inbox.unread())? {
                    Some(line) => break line,
                    None => self.more_lines(wire::MAX_CHUNK_LINE).await?,
                }
            };
            extensions += line.extensions;
            if extensions >= wire::CHUNK_EXTENSION_LIMIT {
                return Err(EngineError::Transport);
            }
            self.inbox.consume(line.length);
            if line.size == 0 {
                break;
            }
            self.exact(line.size, sink).await?;
            while self.inbox.unread().len() < 2 {
                self.more().await?;
            }
            if !self.inbox.unread().starts_with(b"\r\n") {
                return Err(EngineError::Transport);
            }
            self.inbox.consume(2);
        }
        loop {
            match wire::parse_trailers(self.inbox.unread())? {
                Some(length) => {
                    self.inbox.consume(length);
                    return Ok(());
                }
                None => self.more_lines(wire::TRAILER_LIMIT).await?,
            }
        }
    }

    /// Read more of the answer until a line feed arrives, where a head, a chunk-size line or the
    /// trailers can end, or until `bound` bytes are unread (so that the parse refuses what has
    /// grown past its bound): an upstream trickling them a byte at a time has them parsed once per
    /// line, not once per byte (at most 100 lines of a head or trailers).
    async fn more_lines(&mut self, bound: usize) -> Result<(), EngineError> {
        loop {
            let before = self.inbox.unread().len();
            self.more().await?;
            let unread = self.inbox.unread();
            if unread.len() >= bound || unread[before..].contains(&b'\n') {
                return Ok(());
            }
        }
    }

    /// Read more of the answer; its end here (the upstream closed) is [`EngineError::Transport`].
    async fn more(&mut self) -> Result<(), EngineError> {
        if self.fill().await? == 0 { Err(EngineError::Transport) } else { Ok(()) }
    }

    /// One read from the socket into the inbox: how many bytes (0 when the upstream closed).
    /// Fails when [`MAX_INBOX_SIZE`] unread bytes are already buffered (a head that long).
    async fn fill(&mut self) -> Result<usize, EngineError> {
        if !self.inbox.make_room() {
            return Err(EngineError::Transport);
        }
        let read = self.socket.read_buf(&mut self.inbox.bytes).await.map_err(|_| EngineError::Transport)?;
        self.inbox.filled(read);
        Ok(read)
    }
}

/// What [`read_from_pieces`] read: the status, the body and whether the connection could be
/// reused, or the error.
pub type PiecesAnswer = Result<(u16, Vec<u8>, bool), EngineError>;

/// Read one answer (head and body, bodies of `204`/`304` empty) from `pieces` delivered one read
/// each, then the end of the connection. For tests and the `upstream_answer` fuzz target, which
/// holds that however an answer is cut into reads, what is read of it is the same. Reading from
/// memory never waits; if it did, that would be reported as [`EngineError::Timeout`], which the
/// reader itself never returns.
#[doc(hidden)]
pub fn read_from_pieces(pieces: &[&[u8]]) -> PiecesAnswer {
    let mut socket = Pieces { pieces, at: 0 };
    let mut inbox = Inbox::new();
    let read = async {
        let mut reader = AnswerReader { socket: &mut socket, inbox: &mut inbox };
        let head = reader.head().await?;
        let mut body = Collected::for_framing(&head.framing);
        let reusable = reader.body(&head, &mut body).await?;
        Ok((head.status, body.bytes, reusable))
    };
    // Reads from memory never wait: one poll finishes the read.
    match pin!(read).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(answer) => answer,
        Poll::Pending => Err(EngineError::Timeout),
    }
}

/// The body [`read_from_pieces`] reads, as the engine reads one: a body of declared length (up
/// to [`MAX_COLLECTED_RESERVE`]) into a buffer reserved for all of it, the rest read straight into
/// it ([`BodySink::direct`]); any other through the inbox.
struct Collected {
    bytes: Vec<u8>,
    declared: bool,
}

/// The most [`Collected`] reserves for a declared length (a declared length may be any number).
const MAX_COLLECTED_RESERVE: u64 = 1024 * 1024;

impl Collected {
    fn for_framing(framing: &Framing) -> Collected {
        match *framing {
            Framing::Length(length) if length <= MAX_COLLECTED_RESERVE => {
                let mut bytes = Vec::new();
                bytes.reserve_exact(usize::try_from(length).unwrap_or(0));
                Collected { bytes, declared: true }
            }
            _ => Collected { bytes: Vec::new(), declared: false },
        }
    }
}

impl BodySink for Collected {
    fn push(&mut self, chunk: &[u8]) -> Result<(), EngineError> {
        self.bytes.extend_from_slice(chunk);
        Ok(())
    }

    fn direct(&mut self, left: u64) -> Option<&mut Vec<u8>> {
        if self.declared { spare_within(&mut self.bytes, left) } else { None }
    }
}

/// A socket whose reads return `pieces` in turn (each cut to the reader's room), then the end.
struct Pieces<'a> {
    pieces: &'a [&'a [u8]],
    at: usize,
}

impl AsyncRead for Pieces<'_> {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        while let Some((first, rest)) = self.pieces.split_first() {
            if first.len() > self.at {
                let take = (first.len() - self.at).min(buf.remaining());
                buf.put_slice(&first[self.at..self.at + take]);
                self.at += take;
                return Poll::Ready(Ok(()));
            }
            (self.pieces, self.at) = (rest, 0);
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::wire;

    /// `text` read whole, and cut into reads of every size from 1 to 9 bytes: the same status and
    /// body or the same error. Whether the connection may be kept can differ only where bytes
    /// follow the body: read whole they are seen at once, cut they may not have arrived yet
    /// (the pool's idle check sees them before the next request).
    fn read_every_way(text: &str) -> PiecesAnswer {
        let whole = read_from_pieces(&[text.as_bytes()]);
        for size in 1..10 {
            let pieces: Vec<&[u8]> = text.as_bytes().chunks(size).collect();
            let cut = read_from_pieces(&pieces);
            match (&whole, &cut) {
                (Ok((status, body, kept)), Ok((cut_status, cut_body, cut_kept))) => {
                    assert_eq!((status, body), (cut_status, cut_body), "cut into {size}-byte reads: {text:?}");
                    assert!(cut_kept >= kept, "cut into {size}-byte reads: {text:?}");
                }
                _ => assert_eq!(cut, whole, "cut into {size}-byte reads: {text:?}"),
            }
        }
        whole
    }

    fn answer(status: u16, body: &str, reusable: bool) -> PiecesAnswer {
        Ok((status, body.as_bytes().to_vec(), reusable))
    }

    #[test]
    fn bodies_are_read_as_their_framing_says_however_they_are_cut() {
        let cases = [
            ("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", answer(200, "hello", true)),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n1\r\n!\r\n0\r\nx-t: 1\r\n\r\n",
                answer(200, "hello!", true),
            ),
            ("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", answer(200, "", true)),
            ("HTTP/1.1 200 OK\r\n\r\nuntil the end", answer(200, "until the end", false)),
            ("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", answer(200, "ok", true)),
            ("HTTP/1.1 204 No Content\r\n\r\n", answer(204, "", true)),
            ("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok", answer(200, "ok", false)),
            // Bytes after the body the upstream was not asked for: the connection is not kept.
            ("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n", answer(200, "ok", false)),
        ];
        for (text, expected) in cases {
            assert_eq!(read_every_way(text), expected, "{text:?}");
        }
    }

    #[test]
    fn an_answer_cut_short_or_malformed_is_a_transport_error() {
        for text in [
            "",
            "HTTP/1.1 200 OK\r\ncontent-len",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhell",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-t: 1\r\n",
        ] {
            assert_eq!(read_every_way(text), Err(EngineError::Transport), "{text:?}");
        }
    }

    #[test]
    fn heads_and_trailers_are_bounded() {
        let long_head = format!("HTTP/1.1 200 OK\r\nx-long: {}\r\n\r\n", "a".repeat(MAX_INBOX_SIZE));
        assert_eq!(read_from_pieces(&[long_head.as_bytes()]), Err(EngineError::Transport));
        let fits =
            format!("HTTP/1.1 200 OK\r\nx-long: {}\r\ncontent-length: 0\r\n\r\n", "a".repeat(MAX_INBOX_SIZE / 2));
        assert_eq!(read_from_pieces(&[fits.as_bytes()]), answer(200, "", true));
        let trailer_line = format!("x-t: {}\r\n", "b".repeat(1000));
        let long_trailers = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n{}\r\n",
            trailer_line.repeat(wire::TRAILER_LIMIT / 1000 + 1)
        );
        assert_eq!(read_every_way(&long_trailers), Err(EngineError::Transport));
        let one_long_trailer = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-t: {}",
            "c".repeat(wire::TRAILER_LIMIT)
        );
        assert_eq!(read_every_way(&one_long_trailer), Err(EngineError::Transport));
        // Trailers one byte under the limit, their last line feed arriving on its own or not.
        let filler = "d".repeat(wire::TRAILER_LIMIT - 1 - "x-t: \r\n\r\n".len());
        let at_the_bound = format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nx-t: {filler}\r\n\r\n");
        assert_eq!(read_every_way(&at_the_bound), answer(200, "", true));
        assert_eq!(read_every_way(&at_the_bound.replace("x-t: ", "x-t: d")), Err(EngineError::Transport));
        // Chunk extensions: under 16 KiB per body, a line under 17 KiB, however they arrive.
        let chunked = |lines: &str| format!("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{lines}0\r\n\r\n");
        let with_extension = |bytes: usize| format!("1;{}\r\nx\r\n", "e".repeat(bytes));
        let under = chunked(&[with_extension(8000), with_extension(wire::CHUNK_EXTENSION_LIMIT - 8001)].concat());
        assert_eq!(read_every_way(&under), answer(200, "xx", true));
        let at = chunked(&[with_extension(8000), with_extension(wire::CHUNK_EXTENSION_LIMIT - 8000)].concat());
        assert_eq!(read_every_way(&at), Err(EngineError::Transport));
        let blanks = |count: usize| chunked(&format!("1{};e\r\nx\r\n", " ".repeat(count)));
        assert_eq!(read_every_way(&blanks(1000)), answer(200, "x", true));
        assert_eq!(read_every_way(&blanks(wire::MAX_CHUNK_LINE)), Err(EngineError::Transport));
    }

    #[test]
    fn a_large_body_is_read_whole_and_a_grown_buffer_shrinks_back() {
        let body = "x".repeat(300 * 1024);
        let text = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        assert_eq!(read_from_pieces(&[text.as_bytes()]), answer(200, &body, true));
        let mut inbox = Inbox::new();
        inbox.grow();
        inbox.grow();
        assert_eq!(inbox.bytes.capacity(), 4 * INBOX_SIZE);
        inbox.shrink();
        assert_eq!(inbox.bytes.capacity(), INBOX_SIZE);
    }

    /// Reads `pieces` as the engine reads an answer, into a [`Collected`] body: the status, the
    /// body, whether the connection may be kept, the inbox's size at the end and the bytes the
    /// socket still holds.
    fn read_collected(pieces: &[&[u8]]) -> (u16, Vec<u8>, bool, usize, Vec<u8>) {
        let mut socket = Pieces { pieces, at: 0 };
        let mut inbox = Inbox::new();
        let read = async {
            let mut reader = AnswerReader { socket: &mut socket, inbox: &mut inbox };
            let head = reader.head().await.expect("a head");
            let mut body = Collected::for_framing(&head.framing);
            let reusable = reader.body(&head, &mut body).await.expect("a body");
            (head.status, body.bytes, reusable)
        };
        let Poll::Ready((status, body, reusable)) = pin!(read).poll(&mut Context::from_waker(Waker::noop())) else {
            panic!("reading from memory waited");
        };
        let left: Vec<u8> = socket.pieces.concat().get(socket.at..).unwrap_or_default().to_vec();
        (status, body, reusable, inbox.bytes.capacity(), left)
    }

    #[test]
    fn the_rest_of_a_declared_body_is_read_straight_into_its_buffer() {
        // The head and the body's first bytes in one read, the rest (20 KiB, more than the inbox
        // holds) in reads of up to 16 KiB: none of it passes through the inbox, which never grows
        // (read through it, the first such read fills it and it doubles).
        let body = "y".repeat(20 * 1024);
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{}", body.len(), &body[..100]);
        let mut pieces: Vec<&[u8]> = vec![head.as_bytes()];
        pieces.extend(body.as_bytes()[100..].chunks(16 * 1024));
        let (status, read, reusable, inbox_size, left) = read_collected(&pieces);
        assert_eq!((status, read.as_slice(), reusable), (200, body.as_bytes(), true));
        assert_eq!(inbox_size, INBOX_SIZE, "the body went through the inbox");
        assert!(left.is_empty());
    }

    #[test]
    fn a_straight_read_takes_no_byte_past_the_body() {
        // Unasked bytes right after the body, in the same read: the straight read stops at the
        // body's end and leaves them in the socket (where the pool's idle check finds them before
        // the connection carries another request: `http1::still_open`).
        let pieces: [&[u8]; 2] = [b"HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nab", b"cdefghHTTP/1.1 200 OK\r\n\r\n"];
        let (status, read, _, _, left) = read_collected(&pieces);
        assert_eq!((status, read.as_slice()), (200, b"abcdefgh".as_slice()));
        assert_eq!(left, b"HTTP/1.1 200 OK\r\n\r\n");
    }
}
