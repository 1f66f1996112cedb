//! The bounded request engine: the only code that performs upstream HTTP.
//!
//! One search is: [`request`] builds the exact upstream request from the dialect and the target
//! (pure), [`client`] sends it under a per-provider permit and one deadline and reads at most
//! 1 MiB, [`normalize`](mod@normalize) turns the body into [`Item`]s (pure), and every failure is an
//! [`EngineError`] that knows its Nexent `code` and `severity` ([`error`]).
//!
//! One write (ingest unit) is [`write`](mod@write): the add request (pure) and [`Engine::add`],
//! under the same permits, deadline, cap and redirect rules, classified into a [`WriteOutcome`].
//!
//! Nothing here retries, caches or follows redirects; no message, log event or `Debug` output
//! contains the query, the content, the URL, the credential or an upstream body.

mod answer;
pub mod client;
pub mod destination;
pub mod error;
mod http1;
pub mod normalize;
pub mod request;
mod wire;
pub mod write;

#[doc(hidden)]
pub use answer::{INBOX_SIZE as UPSTREAM_FIRST_READ_BYTES, PiecesAnswer, read_from_pieces as read_upstream_answer};
pub use client::{DEFAULT_PERMITS_PER_PROVIDER, Engine, EngineConfig, EngineInitError, MAX_RESPONSE_BYTES};
pub use error::{EngineError, ErrorCode, Severity};
pub use normalize::{Item, normalize};
pub use request::{JsonBody, Target, UpstreamRequest, UrlCache, build_search_request};
pub use write::{AddUnit, WriteOutcome, build_add_request};
