//! Reading an upstream's HTTP/1.1 answer off a connection (`engine/answer.rs`, `engine/wire.rs`).
//!
//! Input: one byte that picks how the answer is cut into reads, then the answer's bytes.
//! Properties: no panic, and reading from memory never waits; however the bytes are cut into
//! reads, the same status and body, or the same error, as reading them in one piece (the
//! connection may be kept after the cut reading where the whole one saw unasked bytes after the
//! body, never the other way round); an answer read whole and kept leaves nothing unread, so one
//! more byte arriving with it makes it not kept, with the same status and body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_gateway::engine::{EngineError, UPSTREAM_FIRST_READ_BYTES, read_upstream_answer};

fuzz_target!(|data: &[u8]| {
    let Some((cut, answer)) = data.split_first() else { return };
    let whole = read_upstream_answer(&[answer]);
    assert_ne!(whole, Err(EngineError::Timeout), "a read from memory waited");
    let pieces = cut_into_reads(answer, *cut);
    let cut_reading = read_upstream_answer(&pieces);
    match (&whole, &cut_reading) {
        (Ok((status, body, kept)), Ok((cut_status, cut_body, cut_kept))) => {
            assert_eq!((status, body), (cut_status, cut_body), "cut at {cut}");
            assert!(cut_kept >= kept, "kept only when read whole (cut at {cut})");
            if *kept && answer.len() < UPSTREAM_FIRST_READ_BYTES {
                // Nothing was left unread: bytes after the answer make it no longer kept (when
                // they arrive with it, in the same read).
                let mut longer = answer.to_vec();
                longer.push(b'x');
                let more = read_upstream_answer(&[&longer]);
                assert_eq!(more, Ok((*status, body.clone(), false)), "a byte after a kept answer");
            }
        }
        _ => assert_eq!(cut_reading, whole, "cut at {cut}"),
    }
});

/// `answer` cut into reads whose sizes cycle through a pattern `cut` picks (1 to 23 bytes).
fn cut_into_reads(answer: &[u8], cut: u8) -> Vec<&[u8]> {
    let mut pieces = Vec::new();
    let (mut rest, mut turn) = (answer, usize::from(cut));
    while !rest.is_empty() {
        let size = (1 + (turn * 7) % 23).min(rest.len());
        let (piece, after) = rest.split_at(size);
        pieces.push(piece);
        (rest, turn) = (after, turn + 1);
    }
    pieces
}
