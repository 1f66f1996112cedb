//! The Remote MCP surface: one `context_search` tool per provider at `/mcp/{provider}`.
//!
//! Owns the MCP wire behaviour of External Context Profile v1 (§1): the tool definition, argument
//! checking, the result and error shapes, cancellation, and the Streamable HTTP transport set-up.
//! It never performs upstream HTTP and never decides who may call which provider: both come from
//! the [`ProviderSearch`] it is given (the gateway state, which owns the config snapshot, access
//! control and metrics, wraps the bounded [`crate::engine::Engine`]). Output rules live in
//! [`crate::profile`].
//!
//! # Transport and replicas
//!
//! rmcp's Streamable HTTP service runs with `legacy_session_mode = false` and
//! `json_response = true`: no request ever creates or needs server-side state.
//!
//! - 2026-07-28 clients (per-request `_meta`, no `initialize`, no `Mcp-Session-Id`) are served
//!   statelessly; every request is self-contained, so any replica answers any request.
//! - Older clients (2024-11-05 .. 2025-11-25) still send `initialize`: it is answered (version
//!   negotiated) without an `Mcp-Session-Id` header, which the Streamable HTTP spec allows. Such
//!   clients then send no session id, and each later POST (`notifications/initialized`,
//!   `tools/list`, `tools/call`, `ping`) is served on its own by whichever replica receives it.
//!   The optional GET event stream and session DELETE answer 405, which clients treat as "not
//!   offered". What does not exist in this mode: server-to-client requests and notifications
//!   outside a response, resumption (`Last-Event-ID`), and `notifications/cancelled` (a separate
//!   POST that cannot reach the request it names); a client cancels by closing the HTTP request,
//!   which cancels the tool call and drops the upstream request.
//!
//! Responses are `application/json` unless a handler emits a message before its result (this
//! surface never does). Order of checks ([`http_checks`]): the request's authority (absolute-form
//! target or `Host`) must be an allowed host (default: loopback only) and an `Origin`, when sent,
//! a configured one (none by default): 400 / 403; an unknown provider answers 404; a JSON body
//! over [`MAX_REQUEST_BODY_BYTES`] is 413, one that is not JSON or not JSON-RPC a JSON-RPC error
//! (`-32700` / `-32600`, HTTP 400); only then does the transport see the request (where rmcp checks
//! `Host` and `Origin` once more), except a plain stateless `tools/call` of `context_search` (from
//! a client of a handshake version or a 2026-07-28 one), which is answered on the [`direct`] path
//! exactly as rmcp would answer it, without rmcp's per-request service.

mod direct;
pub mod http_checks;
mod server;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::future::BoxFuture;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::engine::{EngineError, Item};

pub use server::{
    ContextSearchServer, FAILURE_TEXT, INPUT_ERROR_TEXT, TOOL_DESCRIPTION, TOOL_NAME, TOOL_TITLE, input_schema, tool,
};

/// Largest accepted request body. A maximal `tools/call` (2000 code points, even fully
/// `\uXXXX`-escaped: about 24 KB) fits.
pub const MAX_REQUEST_BODY_BYTES: usize = 64 * 1024;

/// `Host` values accepted when no allowed hosts are configured: loopback only.
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

pub use http_checks::{Refusal, valid_origin_entry};

#[doc(hidden)]
pub use direct::readings as direct_readings;

/// Which requests the HTTP side of the MCP surface accepts (see [`http_checks`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpHttpConfig {
    /// Accepted authorities (`name` or `name:port`); empty means [`DEFAULT_ALLOWED_HOSTS`], never
    /// "any host".
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values (`scheme://host[:port]` or `null`); empty refuses every request that
    /// carries an `Origin`.
    pub allowed_origins: Vec<String>,
}

impl McpHttpConfig {
    /// The hosts actually accepted: the configured ones, or loopback names.
    pub fn effective_hosts(&self) -> Vec<String> {
        if self.allowed_hosts.is_empty() {
            DEFAULT_ALLOWED_HOSTS.iter().map(ToString::to_string).collect()
        } else {
            self.allowed_hosts.clone()
        }
    }
}

/// What the MCP surface needs from the gateway: which providers exist and how to search one.
///
/// The gateway state implements it over its config snapshot and the bounded engine; tests use
/// stand-ins.
pub trait ProviderSearch: Send + Sync + 'static {
    /// Whether `provider` (the `{provider}` path segment) is currently served.
    fn exists(&self, provider: &str) -> bool;

    /// Search `provider` for `query` (already normalised), asking for at most `limit` items.
    ///
    /// Dropping the future must abort the upstream request (the engine's futures do).
    fn search<'a>(
        &'a self,
        provider: &'a str,
        query: String,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>>;

    /// [`ProviderSearch::search`] with the HTTP request's extensions: whatever middleware in front
    /// of [`router`] inserted (an authenticated caller, for instance). Defaults to `search`.
    fn search_in_request<'a>(
        &'a self,
        provider: &'a str,
        query: String,
        limit: u32,
        request: &'a http::Extensions,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
        let _ = request;
        self.search(provider, query, limit)
    }

    /// A `context_search` call to `provider` whose arguments were refused before any search (the
    /// tool answered with its input error). Lets the implementation count and audit it; defaults
    /// to nothing.
    fn record_invalid_call(&self, provider: &str, request: &http::Extensions) {
        let _ = (provider, request);
    }
}

/// The provider name from the request path, handed to the tool handler.
#[derive(Debug, Clone)]
pub(crate) struct ProviderName(pub(crate) String);

type Service = StreamableHttpService<ContextSearchServer, NeverSessionManager>;

struct McpState {
    search: Arc<dyn ProviderSearch>,
    service: Service,
    /// Whether eligible `tools/call`s take the direct path ([`direct`]); off only in tests that
    /// compare it with rmcp's.
    direct: bool,
    /// The allowed hosts and origins.
    rules: http_checks::HeadRules,
}

/// The rmcp transport configuration this surface uses (see the module docs).
pub fn transport_config(config: &McpHttpConfig) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_allowed_hosts(config.effective_hosts())
        .with_allowed_origins(config.allowed_origins.clone())
        .enforce_origin_validation()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
}

/// [`router_with`] accepting the `allowed_hosts` authorities and no `Origin`.
pub fn router(search: Arc<dyn ProviderSearch>, allowed_hosts: Vec<String>) -> Router {
    router_with(search, McpHttpConfig { allowed_hosts, allowed_origins: Vec::new() })
}

/// The axum router serving `/mcp/{provider}` (POST; other methods answer 405 from the transport),
/// checking each request as the module docs say before the transport sees it.
pub fn router_with(search: Arc<dyn ProviderSearch>, config: McpHttpConfig) -> Router {
    router_served(search, config, true)
}

/// [`router_with`], answering eligible `tools/call`s on the direct path when `direct`.
fn router_served(search: Arc<dyn ProviderSearch>, config: McpHttpConfig, direct: bool) -> Router {
    Endpoint::served(search, config, direct).router()
}

/// The handler behind `/mcp/{provider}`: its [`Endpoint::router`], or [`Endpoint::serve`] for a
/// route taken before the router (`crate::server::data_routes`). Clones share one transport.
#[derive(Clone)]
pub struct Endpoint(Arc<McpState>);

impl Endpoint {
    /// The endpoint [`router_with`] serves.
    pub fn new(search: Arc<dyn ProviderSearch>, config: McpHttpConfig) -> Endpoint {
        Endpoint::served(search, config, true)
    }

    fn served(search: Arc<dyn ProviderSearch>, config: McpHttpConfig, direct: bool) -> Endpoint {
        let handler_search = Arc::clone(&search);
        let service = StreamableHttpService::new(
            move || Ok(ContextSearchServer::new(Arc::clone(&handler_search))),
            Arc::new(NeverSessionManager::default()),
            transport_config(&config),
        );
        let rules = http_checks::HeadRules::new(&config.effective_hosts(), &config.allowed_origins);
        Endpoint(Arc::new(McpState { search, service, direct, rules }))
    }

    /// The router serving `/mcp/{provider}` with this endpoint.
    pub fn router(&self) -> Router {
        Router::new().route("/mcp/{provider}", any(serve)).with_state(Arc::clone(&self.0))
    }

    /// Answer `request` for `provider` (the path segment, as axum's `Path` reads it) as the
    /// router's handler does.
    pub fn serve(&self, provider: String, request: Request) -> impl Future<Output = Response> + Send + use<> {
        serve(State(Arc::clone(&self.0)), Path(provider), request)
    }
}

async fn serve(State(state): State<Arc<McpState>>, Path(provider): Path<String>, request: Request) -> Response {
    if let Err(refusal) = http_checks::check_head(request.uri(), request.headers(), &state.rules) {
        return refusal.into_response();
    }
    if !state.search.exists(&provider) {
        return (StatusCode::NOT_FOUND, "Not Found: no such provider").into_response();
    }
    let mut request = if request.method() == Method::POST && http_checks::has_json_content_type(request.headers()) {
        let (mut parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BODY_BYTES).await else {
            return Refusal::TooLarge.into_response();
        };
        // A plain call is read typed (`read_call`); any other body is parsed once with rmcp's
        // message type, for the checks and for the direct path's general reader.
        let direct_call = match state.direct.then(|| direct::read_call(&parts.uri, &parts.headers, &bytes)).flatten() {
            Some(call) => Some(call),
            None => {
                let message = match http_checks::check_body(&bytes) {
                    Ok(message) => message,
                    Err(refusal) => return refusal.into_response(),
                };
                state.direct.then(|| direct::direct_call(&parts.uri, &parts.headers, message)).flatten()
            }
        };
        if let Some(call) = direct_call {
            parts.extensions.insert(ProviderName(provider));
            let outcome = server::context_search(state.search.as_ref(), call.query, &parts.extensions);
            return direct::answer(call.id, call.era, outcome.await);
        }
        Request::from_parts(parts, axum::body::Body::from(bytes))
    } else {
        request
    };
    request.extensions_mut().insert(ProviderName(provider));
    state.service.handle(request).await.map(axum::body::Body::new)
}
