//! External Context MCP Profile v1: the `context_search` input and output rules, as pure functions.
//!
//! Owns the query rules ([`normalize_query`]) and the result object with its caps, escaping and
//! 4000-unit budget ([`render`]); see `external-context-profile.md` §1. It performs no I/O, knows
//! nothing about MCP transports and never sees a provider's endpoint or credential. The MCP
//! surface ([`crate::mcp`]) is its only caller in the gateway.

mod js_json;
mod query;
mod render;

pub use query::{MAX_QUERY_CHARS, QueryError, normalize_query};
pub use render::{
    CONTENT_CAP, ID_CAP, MAX_ITEMS, MAX_TEXT_UTF16_UNITS, NOTICE, ProfileItem, ProfileOutput, TITLE_CAP,
    UPDATED_AT_CAP, URI_CAP, render, render_owned,
};

/// Append `text` to `out` as a JSON string literal, escaped exactly as serde_json escapes it (`"`,
/// `\\`, the short escapes `\b \t \n \f \r`, other code points below U+0020 as lowercase `\u00xx`,
/// nothing else): for answers written without building a `serde_json::Value`.
pub(crate) fn push_json_string(out: &mut String, text: &str) {
    js_json::push_string(out, text, false);
}

/// How many results the provider is always asked for; the caller cannot change it.
pub const SEARCH_LIMIT: u32 = 5;
