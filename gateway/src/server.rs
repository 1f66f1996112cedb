//! The HTTP routes: every route of the gateway in one axum [`Router`], the admin port's routes, and
//! the shutdown signal. Sockets, limits and draining are [`crate::listener`]'s.
//!
//! | route | what |
//! |---|---|
//! | `/mcp/{provider}` | Remote MCP ([`crate::mcp`]), behind [`mcp_guard`] |
//! | `POST /nexent/v1/{provider}/search` | Nexent search ([`crate::nexent`]) |
//! | `POST /nexent/v1/{provider}/ingest` | Nexent ingest ([`crate::nexent`]) |
//! | `GET /healthz` | 200 while the process serves HTTP |
//! | `GET /readyz` | 200 with `{"ready":true,"providers":N,"generation":G,"lastReloadError":null\|"..."}` |
//! | `GET /metrics` | OpenMetrics text ([`crate::metrics`]) |
//! | `GET /.well-known/oauth-protected-resource[/mcp/{provider}]` | RFC 9728 metadata of OIDC providers ([`crate::oauth_resource`]) |
//!
//! The two routes that carry the load, `POST /nexent/v1/{provider}/search` and
//! `POST /mcp/{provider}`, are also taken by the data listener before the router
//! ([`data_routes`]): the same layers and handlers in the same order, without the router's
//! per-request work.
//!
//! `/healthz`, `/readyz` and `/metrics` are also the whole of [`admin_app`], served on the admin port when one is
//! configured; on the data port they stay for compatibility and for load balancers that check the
//! data path itself (they answer from memory and hold nothing a tenant could not already learn).
//!
//! `/readyz` is 200 whenever a config is loaded, which is always true once the server listens (the
//! binary refuses to start without a valid config). When the newest config on disk was refused,
//! the last good one is still served, so readiness stays 200 and `lastReloadError` says why (file,
//! document and field; never a credential value).
//!
//! Access control for MCP happens here, at HTTP level, before any MCP processing: an unknown
//! provider or one without `mcp.enabled` is 404, an unauthenticated caller 401 (with
//! `WWW-Authenticate: Bearer`, for OIDC providers with `resource_metadata` and `scope`), a caller
//! not allowed 403 (a missing OAuth scope: 403 with `error="insufficient_scope"`), and with the search kill switch off
//! every MCP request is 503; the bodies are the fixed JSON of [`crate::nexent::ApiError`].

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use http_body::Body as _;
use serde_json::json;
use tokio::time::Instant;

use crate::auth::Caller;
use crate::listener::{ClientAddr, Direct, DirectAnswer};
use crate::metrics::{OPENMETRICS_CONTENT_TYPE, Operation};
use crate::nexent::{self, ApiError, json_response};
use crate::state::{AppState, AuthorizedProvider, RetryAfter};
use crate::{mcp, oauth_resource};

/// The whole gateway as one router. `mcp_http` says which hosts and origins `/mcp/*` and
/// `/nexent/*` accept (see [`mcp::McpHttpConfig`]).
pub fn app(state: Arc<AppState>, mcp_http: mcp::McpHttpConfig) -> Router {
    data_routes(state, mcp_http).0
}

/// The data port's router ([`app`]) and the routes the listener takes before it: Nexent search
/// and `POST /mcp/{provider}`, the calls that carry the load, answered exactly as the router
/// answers them (the same layers and handler in the same order, and the `content-length` axum's
/// route sets) without the router's per-request boxing, service clones and path parameters. A
/// request whose provider segment axum would percent-decode, and every other request, is handed
/// back to the router. `gateway/tests/direct_routes.rs` holds both answers equal byte for byte.
pub fn data_routes(state: Arc<AppState>, mcp_http: mcp::McpHttpConfig) -> (Router, Direct) {
    let search: Arc<dyn mcp::ProviderSearch> = Arc::clone(&state) as Arc<dyn mcp::ProviderSearch>;
    let endpoint = mcp::Endpoint::new(search, mcp_http.clone());
    let nexent_rules = Arc::new(nexent::head_rules(&mcp_http));
    let nexent_routes = nexent::router(Arc::clone(&nexent_rules));
    let mcp_routes = endpoint.router().route_layer(middleware::from_fn_with_state(Arc::clone(&state), mcp_guard));
    let own = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(nexent_routes)
        .merge(oauth_resource::router())
        .with_state(Arc::clone(&state));
    let router = own.merge(mcp_routes).layer(middleware::from_fn(crate::telemetry::caller_trace));
    let direct: Direct = Arc::new(move |request: Request| {
        if let Some(provider) = provider_segment(&request, "/nexent/v1/", "/search") {
            let (state, rules) = (Arc::clone(&state), Arc::clone(&nexent_rules));
            return DirectAnswer::Taken(routed_answer(request, move |request| {
                nexent::direct_search(state, rules, provider, request)
            }));
        }
        if let Some(provider) = provider_segment(&request, "/mcp/", "") {
            let (state, endpoint) = (Arc::clone(&state), endpoint.clone());
            return DirectAnswer::Taken(routed_answer(request, move |request| async move {
                guarded(&state, provider, request, move |request, provider| endpoint.serve(provider, request)).await
            }));
        }
        DirectAnswer::Declined(request)
    });
    (router, direct)
}

/// The provider segment of a `POST` to `{prefix}{provider}{suffix}` exactly: not empty, no `/`,
/// no `%` (which axum's `Path` would decode: such a request is left to the router).
fn provider_segment(request: &Request, prefix: &str, suffix: &str) -> Option<String> {
    if request.method() != Method::POST {
        return None;
    }
    let provider = request.uri().path().strip_prefix(prefix)?.strip_suffix(suffix)?;
    (!provider.is_empty() && !provider.contains(['/', '%'])).then(|| provider.to_string())
}

/// `route` run as the router runs a route: inside the app's `caller_trace` layer, then with the
/// `content-length` axum's route sets on an answer whose size is known (axum 0.8.9
/// `routing/route.rs`, `set_content_length`).
fn routed_answer<F, Fut>(request: Request, route: F) -> BoxFuture<'static, Response>
where
    F: FnOnce(Request) -> Fut + Send + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    Box::pin(async move {
        let mut response = crate::telemetry::in_caller_trace(request, route).await;
        if !response.headers().contains_key(header::CONTENT_LENGTH)
            && let Some(size) = response.body().size_hint().exact()
        {
            response.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(size));
        }
        response
    })
}

/// The admin port's routes: `/healthz`, `/readyz` and `/metrics` only, the same handlers as on the
/// data port. Served by their own listener (`--admin-listen`), so probes and scrapes keep working
/// while tenants saturate the data port.
pub fn admin_app(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Access control and the kill switch in front of `/mcp/{provider}`; puts the [`Caller`] and the
/// provider it was authorised against ([`AuthorizedProvider`]) into the request extensions for the
/// handler, which searches exactly that provider: a reload between the guard and the search
/// cannot make the search run under access rules the caller was not checked against.
pub async fn mcp_guard(
    State(state): State<Arc<AppState>>,
    Path(provider): Path<String>,
    request: Request,
    next: Next,
) -> Response {
    guarded(&state, provider, request, |request, _| next.run(request)).await
}

/// [`mcp_guard`] for the provider called `name` in front of `run`, which is handed the name back.
async fn guarded<F, Fut>(state: &AppState, name: String, mut request: Request, run: F) -> Response
where
    F: FnOnce(Request, String) -> Fut,
    Fut: Future<Output = Response>,
{
    let started = Instant::now();
    let Some(provider) = state.provider(&name).filter(|p| p.mcp) else {
        return ApiError::not_found().into_response();
    };
    let refuse = |err: ApiError, caller: Option<&Caller>| {
        state.record_refusal(&provider, Operation::McpContextSearch, caller, err.body.code, started.elapsed());
        err.into_response()
    };
    let mut caller: Caller = match state.auth().authenticate(&provider.name, &provider.access, request.headers()).await
    {
        Ok(caller) => caller,
        Err(err) => {
            let mut response = refuse(ApiError::from_auth(err), None);
            if let Some(challenge) = oauth_resource::challenge(&provider, state.auth().public_url(), err) {
                response.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
            }
            return response;
        }
    };
    if !state.settings().switches.search {
        return refuse(ApiError::switched_off(), Some(&caller));
    }
    caller.client = request.extensions().get::<ClientAddr>().map(|client| client.0);
    // Only a provider with `spec.limits` can refuse a call for a while: only then a slot for it.
    let retry_after = provider.limits.is_some().then(RetryAfter::default);
    request.extensions_mut().insert(caller);
    request.extensions_mut().insert(AuthorizedProvider(provider));
    if let Some(slot) = &retry_after {
        request.extensions_mut().insert(slot.clone());
    }
    let mut response = run(request, name).await;
    // A limit refused the tool call: its result is the profile's failure text, and, when the
    // transport answered with this HTTP response (not a stream opened before), `Retry-After`.
    if let Some(seconds) = retry_after.as_ref().and_then(RetryAfter::get) {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

async fn healthz() -> Response {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let status = state.config().status();
    let providers = state.config().snapshot().providers.len();
    json_response(
        StatusCode::OK,
        &json!({
            "ready": true,
            "providers": providers,
            "generation": status.generation,
            "lastReloadError": status.last_error,
        }),
    )
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let body = state.metrics().encode();
    (StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE))], body).into_response()
}

/// Resolves on SIGTERM or ctrl-c (SIGINT).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}
