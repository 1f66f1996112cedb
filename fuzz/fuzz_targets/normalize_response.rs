//! Upstream response normalisation (`engine::normalize`) and what the MCP surface makes of it.
//!
//! Input: 9 choice bytes (response grammar, content encoding, limit), then the response body.
//! Properties: no panic; at most `limit` items, each with a non-empty id and content, a finite
//! score and non-empty optional strings; an error is one of the documented codes and never shows
//! the body (the planted marker); the items always render within the profile's bounds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_fuzz::{MARKER, assert_hidden, response_spec, utf16_len};
use memgate_gateway::engine::{EngineError, normalize};
use memgate_gateway::profile::{MAX_ITEMS, MAX_TEXT_UTF16_UNITS, render};
use memgate_presets::ContentEncoding;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let (options, body) = data.split_at(9);
    let choices: [u8; 7] = std::array::from_fn(|i| options[i]);
    let Some(response) = response_spec(&choices) else { return };
    let encoding = if options[7] % 2 == 0 { ContentEncoding::Plain } else { ContentEncoding::MessageJson };
    let limit = usize::from(options[8] % 60);
    match normalize(body, &response, encoding, limit) {
        Ok(items) => {
            assert!(items.len() <= limit);
            for item in &items {
                assert!(!item.id.is_empty() && !item.content.is_empty());
                assert!(item.score.is_none_or(f64::is_finite));
                for optional in [&item.title, &item.uri, &item.updated_at] {
                    assert!(optional.as_ref().is_none_or(|s| !s.is_empty()));
                }
            }
            let output = render(&items);
            assert!(output.items.len() <= MAX_ITEMS.min(items.len()));
            assert!(utf16_len(&output.text) <= MAX_TEXT_UTF16_UNITS);
        }
        Err(err) => {
            assert!(
                matches!(err, EngineError::InvalidUtf8 | EngineError::InvalidJson | EngineError::SchemaMismatch),
                "unexpected error {err:?}"
            );
            assert_hidden("normalize error", &err, MARKER);
        }
    }
});
