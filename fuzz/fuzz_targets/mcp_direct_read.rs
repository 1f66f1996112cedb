//! The MCP direct path's typed reader of a `tools/call` body (`mcp/direct.rs`, `read_call`).
//!
//! Property: whenever the typed reader takes a body, reading the same body with rmcp's message type
//! and the direct path's general reader (`direct_call`) takes it too and gives the same call (id,
//! normalised query, era); where the typed reader declines, the body goes to that general path,
//! so declining is always allowed. The first byte picks the client's era (2025-11-25 or
//! 2026-07-28), the rest is the body.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_gateway::mcp::direct_readings;

fuzz_target!(|data: &[u8]| {
    let Some((era, body)) = data.split_first() else { return };
    let (typed, general) = direct_readings(era & 1 == 1, body);
    if typed.is_some() {
        assert_eq!(
            typed,
            general,
            "the typed reader's call differs from rmcp's reading of {:?}",
            String::from_utf8_lossy(body)
        );
    }
});
