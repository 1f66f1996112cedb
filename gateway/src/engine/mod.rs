//! The bounded request engine: the only code that performs upstream HTTP.
//!
//! One search is: [`request`] builds the exact upstream request from the dialect and the target
//! (pure), [`client`] sends it under a per-provider permit and one deadline and reads at most
//! 1 MiB, [`normalize`] turns the body into [`Item`]s (pure), and every failure is an
//! [`EngineError`] that knows its Nexent `code` and `severity` ([`error`]).
//!
//! Nothing here retries, caches, follows redirects or writes upstream; no message, log event or
//! `Debug` output contains the query, the URL, the credential or an upstream body.

pub mod client;
pub mod error;
pub mod normalize;
pub mod request;

pub use client::{DEFAULT_PERMITS_PER_PROVIDER, Engine, EngineConfig, EngineInitError, MAX_RESPONSE_BYTES};
pub use error::{EngineError, ErrorCode, Severity};
pub use normalize::{Item, normalize};
pub use request::{Target, UpstreamRequest, build_search_request};
