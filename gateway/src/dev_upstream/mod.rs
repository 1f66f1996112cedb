//! A development upstream: a small in-memory server speaking the self-hosted Mem0 REST routes
//! (dialect `mem0-oss-rest-2026-08`), for trying memgate and for tests.
//!
//! **A development aid, NOT for production**: memories live in process memory only (lost on exit,
//! at most [`MAX_MEMORIES`]), search is lexical token overlap rather than embeddings, `infer` is
//! ignored (every non-`system` message is stored verbatim, never de-duplicated), and one API key
//! guards everything. It never talks to anything else.
//!
//! # Routes (as mem0's `server/`)
//!
//! - `POST /memories` `{messages: [{role, content}], user_id?, agent_id?, run_id?, metadata?, infer?}`:
//!   needs at least one id (else 400); answers `{"results": [{id, memory, event: "ADD"}]}`.
//! - `POST /search` `{query, filters?: {user_id?, agent_id?, run_id?, ..}, user_id?, agent_id?,
//!   run_id?, top_k?, threshold?}`: ids at the root win over those in `filters`; other `filters`
//!   keys must equal the memory's metadata value. Needs at least one id (else 400). Answers
//!   `{"results": [{id, memory, hash, metadata, score, created_at, updated_at, user_id?, agent_id?,
//!   run_id?}]}`: score is the fraction of query tokens (lower-cased, alphanumeric) in the memory;
//!   score 0 and scores below `threshold` are dropped; best first, ties in insertion order; at most
//!   `top_k` (default [`DEFAULT_TOP_K`]).
//! - `GET /memories?user_id=..&agent_id=..&run_id=..`: the scope's memories in insertion order,
//!   for debugging; needs at least one id.
//!
//! Every route needs `X-API-Key: <key>` or `Authorization: Bearer <key>`. Errors are FastAPI-shaped
//! `{"detail": ..}`: 400 (no id), 401 (missing or wrong key), 404, 405, 413 (body over
//! [`MAX_BODY_BYTES`]), 422 (malformed JSON or wrong field types), 507 (store full).

mod store;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;

use store::{Filter, Ids, Store};

/// Largest accepted request body, in bytes (1 MiB).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Most memories the store holds; adds beyond it answer 507.
pub const MAX_MEMORIES: usize = 100_000;
/// Search result count when `top_k` is not given.
pub const DEFAULT_TOP_K: usize = 10;

const NO_ADD_ID: &str = "At least one identifier (user_id, agent_id, run_id) is required.";
const NO_SEARCH_ID: &str = "At least one of 'user_id', 'agent_id', or 'run_id' must be specified.";

struct DevState {
    api_key: String,
    store: Mutex<Store>,
}

impl DevState {
    fn store(&self) -> MutexGuard<'_, Store> {
        // The store has no invariant a panicking holder could break half-way.
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `headers` carry the key (`X-API-Key` or `Authorization: Bearer`); never for an empty key.
    fn authorised(&self, headers: &HeaderMap) -> bool {
        let key = self.api_key.as_bytes();
        let bearer = headers.get_all(header::AUTHORIZATION).iter().filter_map(|value| {
            let value = value.as_bytes();
            let (scheme, token) = (value.get(..7)?, value.get(7..)?);
            scheme.eq_ignore_ascii_case(b"bearer ").then(|| token.trim_ascii())
        });
        !key.is_empty()
            && headers.get_all("x-api-key").iter().map(|value| value.as_bytes()).chain(bearer).any(|got| same(got, key))
    }
}

/// Byte equality whose time does not depend on where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The development upstream's routes over a fresh empty store, guarded by `api_key` (an empty key
/// admits nobody). A development aid, not for production.
pub fn router(api_key: String) -> Router {
    let state = Arc::new(DevState { api_key, store: Mutex::new(Store::new(MAX_MEMORIES)) });
    Router::new()
        .route("/memories", post(add).get(list))
        .route("/search", post(search))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), require_key))
        .fallback(|| async { detail(StatusCode::NOT_FOUND, "Not Found") })
        .method_not_allowed_fallback(|| async { detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Serves [`router`] on `listener` until the task is dropped or accepting fails. A development aid,
/// not for production; an empty `api_key` is refused.
pub async fn serve(listener: TcpListener, api_key: String) -> std::io::Result<()> {
    if api_key.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the memgate development upstream needs a non-empty API key",
        ));
    }
    let address = listener.local_addr()?;
    tracing::warn!(
        %address,
        "memgate development upstream (mem0 REST) listening: a development aid, NOT for production \
         (in-memory, lexical search, single API key)"
    );
    axum::serve(listener, router(api_key)).await
}

async fn require_key(State(state): State<Arc<DevState>>, request: Request, next: Next) -> Response {
    if state.authorised(request.headers()) {
        next.run(request).await
    } else {
        detail(StatusCode::UNAUTHORIZED, "Invalid or missing API key").into_response()
    }
}

/// An error answer: a status and its FastAPI-shaped JSON body (`{"detail": ..}`).
#[derive(Debug)]
struct Reject(StatusCode, Value);

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        json_response(self.0, &self.1)
    }
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: String,
}

/// `POST /memories` body (unknown fields, `infer` included, are ignored).
#[derive(Deserialize)]
struct AddRequest {
    messages: Vec<Message>,
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    metadata: Option<Map<String, Value>>,
}

/// `POST /search` body.
#[derive(Deserialize)]
struct SearchRequest {
    query: String,
    filters: Option<Map<String, Value>>,
    user_id: Option<String>,
    agent_id: Option<String>,
    run_id: Option<String>,
    top_k: Option<u64>,
    threshold: Option<f64>,
}

async fn add(State(state): State<Arc<DevState>>, body: Result<Bytes, BytesRejection>) -> Result<Response, Reject> {
    let request: AddRequest = parse(body)?;
    let ids = Ids::new(request.user_id, request.agent_id, request.run_id);
    if ids.is_empty() {
        return Err(detail(StatusCode::BAD_REQUEST, NO_ADD_ID));
    }
    // As mem0 with `infer: false`: system messages are not memories.
    let texts = request.messages.into_iter().filter(|m| m.role != "system").map(|m| m.content).collect();
    let mut store = state.store();
    let added = store.add(texts, &ids, request.metadata.as_ref(), SystemTime::now()).map_err(|full| {
        let message = format!("the development store is full (at most {} memories)", full.capacity);
        detail(StatusCode::INSUFFICIENT_STORAGE, &message)
    })?;
    let results: Vec<Value> = added.iter().map(|m| json!({"id": m.id, "memory": m.text, "event": "ADD"})).collect();
    Ok(json_response(StatusCode::OK, &json!({ "results": results })))
}

async fn search(State(state): State<Arc<DevState>>, body: Result<Bytes, BytesRejection>) -> Result<Response, Reject> {
    let request: SearchRequest = parse(body)?;
    let mut filters = request.filters.unwrap_or_default();
    let ids = Ids::new(
        scope_id(&mut filters, "user_id", request.user_id)?,
        scope_id(&mut filters, "agent_id", request.agent_id)?,
        scope_id(&mut filters, "run_id", request.run_id)?,
    );
    if ids.is_empty() {
        return Err(detail(StatusCode::BAD_REQUEST, NO_SEARCH_ID));
    }
    let filter = Filter { ids, metadata: filters };
    let top_k = request.top_k.map_or(DEFAULT_TOP_K, |k| usize::try_from(k).unwrap_or(usize::MAX));
    let store = state.store();
    let results: Vec<Value> = store
        .search(&request.query, &filter, top_k, request.threshold)
        .into_iter()
        .map(|(memory, score)| memory.to_json(Some(score)))
        .collect();
    Ok(json_response(StatusCode::OK, &json!({ "results": results })))
}

/// Session id `name` of a search: from the body root when set, else taken out of `filters`.
fn scope_id(filters: &mut Map<String, Value>, name: &str, root: Option<String>) -> Result<Option<String>, Reject> {
    match (root, filters.remove(name)) {
        (Some(root), _) if !root.is_empty() => Ok(Some(root)),
        (_, None | Some(Value::Null)) => Ok(None),
        (_, Some(Value::String(id))) => Ok(Some(id)),
        (_, Some(_)) => {
            Err(unprocessable("string_type", &["body", "filters", name], "Input should be a valid string", None))
        }
    }
}

async fn list(State(state): State<Arc<DevState>>, RawQuery(query): RawQuery) -> Result<Response, Reject> {
    let (mut user_id, mut agent_id, mut run_id) = (None, None, None);
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match name.as_ref() {
            "user_id" => user_id = Some(value.into_owned()),
            "agent_id" => agent_id = Some(value.into_owned()),
            "run_id" => run_id = Some(value.into_owned()),
            _ => {}
        }
    }
    let ids = Ids::new(user_id, agent_id, run_id);
    if ids.is_empty() {
        return Err(detail(StatusCode::BAD_REQUEST, NO_ADD_ID));
    }
    let filter = Filter { ids, metadata: Map::new() };
    let store = state.store();
    let results: Vec<Value> = store.list(&filter).map(|memory| memory.to_json(None)).collect();
    Ok(json_response(StatusCode::OK, &json!({ "results": results })))
}

/// The JSON body as `T`, or a FastAPI-shaped rejection (413 too large, 400 unreadable, 422 invalid).
fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, Reject> {
    let body = body.map_err(|rejection| detail(rejection.status(), &rejection.body_text()))?;
    let value: Value = serde_json::from_slice(&body).map_err(|error| {
        unprocessable("json_invalid", &["body"], "JSON decode error", Some(json!({ "error": error.to_string() })))
    })?;
    serde_json::from_value(value).map_err(|error| unprocessable("value_error", &["body"], &error.to_string(), None))
}

/// A FastAPI validation error: 422 `{"detail": [{type, loc, msg, ctx?}]}`.
fn unprocessable(kind: &str, loc: &[&str], msg: &str, ctx: Option<Value>) -> Reject {
    let mut entry = json!({"type": kind, "loc": loc, "msg": msg});
    if let (Some(ctx), Value::Object(fields)) = (ctx, &mut entry) {
        fields.insert("ctx".into(), ctx);
    }
    Reject(StatusCode::UNPROCESSABLE_ENTITY, json!({ "detail": [entry] }))
}

/// `{"detail": message}` with `status`.
fn detail(status: StatusCode, message: &str) -> Reject {
    Reject(status, json!({ "detail": message }))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
