//! The Nexent API: `POST /nexent/v1/{provider}/search` and `POST /nexent/v1/{provider}/ingest`
//! (the `ingest` submodule).
//!
//! Owns Nexent's wire shapes (`reference/nexent.md` §2) over HTTP and the mapping of every failure
//! onto `{code, severity, message, retry_after_seconds}` with an HTTP status ([`ApiError`]). It
//! never talks upstream itself (that is [`AppState::search`]) and never puts the query, an
//! upstream body, the endpoint or a credential into a response, a log event or a metric.
//!
//! Request: Nexent's `MemorySearchRequest` JSON. Only `query` and `limit` are read; every other
//! field (tenant, user, agent ids, `top_k`, `threshold`, `embedding`, fields added later) is
//! accepted and ignored, because the scope comes from the provider's config. `query` follows the
//! MCP profile's rule (1 to 2000 code points, not blank; whitespace runs folded). `limit` defaults
//! to 5, must be at least 1, and is capped at the configured maximum (default 20).
//!
//! Response: a JSON array of `{external_id, content, score, source, is_external, metadata}` with
//! `source` = the provider name, `is_external` = true and `metadata` holding `title`, `uri` and
//! `updated_at` when the upstream gave them. `score` is 0.0 when the upstream gave none.
//!
//! Checks run in this order: provider served with `nexent.search` (404), caller allowed (401 /
//! 403 / 503), search kill switch (503), body (413 / 400), then the search.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Serialize;

use crate::auth::AuthError;
use crate::engine::{EngineError, ErrorCode, Item, Severity};
use crate::listener::ClientAddr;
use crate::mcp::McpHttpConfig;
use crate::mcp::http_checks::{self, Refusal};
use crate::metrics::Operation;
use crate::profile::{normalize_query, push_json_string};
use crate::state::AppState;

mod admission;
mod ingest;
mod search_body;

pub use ingest::parse_ingest_body;

use admission::Admitted;
use search_body::{Limit, Query};

/// `limit` when the request has none.
pub const DEFAULT_LIMIT: u32 = 5;
/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The routes of this surface, behind `rules` ([`head_rules`]: the same `Host` and `Origin` rules as MCP) and a
/// JSON body requirement: a browser page (DNS rebinding onto a gateway on a developer's loopback,
/// a `no-cors` form post) can reach neither.
pub fn router(rules: Arc<http_checks::HeadRules>) -> Router<Arc<AppState>> {
    Router::new()
        .route("/nexent/v1/{provider}/search", post(search))
        .route("/nexent/v1/{provider}/ingest", post(ingest::ingest))
        .route_layer(axum::middleware::from_fn(move |request: axum::extract::Request, next: axum::middleware::Next| {
            let rules = Arc::clone(&rules);
            async move {
                match browser_shaped(&request, &rules) {
                    Some(refusal) => refusal.into_response(),
                    None => next.run(request).await,
                }
            }
        }))
}

/// `POST /nexent/v1/{provider}/search` for `provider` (the path segment) answered as its route
/// does after the app's layers, for the route taken before the router
/// (`crate::server::data_routes`): the router's `browser_shaped` layer with `rules`, then
/// [`search`].
pub async fn direct_search(
    state: Arc<AppState>,
    rules: Arc<http_checks::HeadRules>,
    provider: String,
    request: axum::extract::Request,
) -> Response {
    if let Some(refusal) = browser_shaped(&request, &rules) {
        return refusal.into_response();
    }
    let (parts, body) = request.into_parts();
    let client = parts.extensions.get::<ClientAddr>().copied().map(Extension);
    search(State(state), Path(provider), client, parts.headers, body).await.into_response()
}

/// The host and origin rules of this surface: the same as MCP's.
pub fn head_rules(http: &McpHttpConfig) -> http_checks::HeadRules {
    http_checks::HeadRules::new(&http.effective_hosts(), &http.allowed_origins)
}

/// Why a request is refused before anything else looks at it: an authority or `Origin` the
/// gateway does not accept (`mcp::http_checks`), or a body not declared as JSON (what a plain
/// HTML form or a `no-cors` fetch can send is never `application/json`).
fn browser_shaped(request: &axum::extract::Request, rules: &http_checks::HeadRules) -> Option<ApiError> {
    if let Err(refusal) = http_checks::check_head(request.uri(), request.headers(), rules) {
        return Some(match refusal {
            Refusal::BadHost => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_payload",
                Severity::NonRetryable,
                "Bad Request: invalid or missing Host.",
            ),
            Refusal::OriginNotAllowed => {
                ApiError::new(StatusCode::FORBIDDEN, "forbidden", Severity::NonRetryable, "Origin is not allowed.")
            }
            _ => ApiError::new(StatusCode::FORBIDDEN, "forbidden", Severity::NonRetryable, "Host is not allowed."),
        });
    }
    (!http_checks::has_json_content_type(request.headers())).then(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_payload",
            Severity::NonRetryable,
            "The request body must be JSON (Content-Type: application/json).",
        )
    })
}

/// One Nexent `MemorySearchResult`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult<'a> {
    /// The upstream id.
    pub external_id: String,
    /// The memory text.
    pub content: String,
    /// The upstream score; 0.0 when it gave none.
    pub score: f64,
    /// The provider name.
    pub source: &'a str,
    /// Always true.
    pub is_external: bool,
    /// Optional safe fields.
    pub metadata: ResultMetadata,
}

/// `metadata` of a result: only fields the upstream gave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResultMetadata {
    /// Title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Last update time as the upstream wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

impl<'a> SearchResult<'a> {
    /// Bytes of its strings (its JSON is at least this long, plus keys and punctuation).
    fn text_bytes(&self) -> usize {
        let metadata = [&self.metadata.title, &self.metadata.uri, &self.metadata.updated_at];
        self.external_id.len()
            + self.content.len()
            + self.source.len()
            + metadata.iter().map(|field| field.as_ref().map_or(0, String::len)).sum::<usize>()
    }

    /// The Nexent form of an engine item from provider `source`.
    pub fn from_item(item: Item, source: &'a str) -> SearchResult<'a> {
        SearchResult {
            external_id: item.id,
            content: item.content,
            score: item.score.unwrap_or(0.0),
            source,
            is_external: true,
            metadata: ResultMetadata { title: item.title, uri: item.uri, updated_at: item.updated_at },
        }
    }
}

/// Nexent's `ProviderError` as the response body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    /// Nexent `ProviderErrorCode`.
    pub code: &'static str,
    /// `retryable` or `non_retryable`.
    pub severity: &'static str,
    /// Fixed text.
    pub message: &'static str,
    /// Seconds from an upstream `Retry-After`, when it gave a number.
    pub retry_after_seconds: Option<u64>,
}

/// A failed call: HTTP status plus Nexent error body.
///
/// | case | status | code | severity |
/// |---|---|---|---|
/// | body not JSON / no valid `query` / `limit` < 1 | 400 | `invalid_payload` | non_retryable |
/// | body over 1 MiB | 413 | `invalid_payload` | non_retryable |
/// | no or invalid credential | 401 + `WWW-Authenticate: Bearer` | `unauthorized` | non_retryable |
/// | caller not allowed | 403 | `forbidden` | non_retryable |
/// | unknown provider, disabled provider, `nexent.search` false | 404 | `provider_error` | non_retryable |
/// | search kill switch off | 503 | `provider_error` | retryable |
/// | ServiceAccount token cannot be reviewed now | 503 | `provider_error` | retryable |
/// | upstream timeout | 504 | `timeout` | retryable |
/// | upstream 429, or provider concurrency exhausted | 429 (+ `Retry-After` when known) | `rate_limited` | retryable |
/// | a limit of the provider (`spec.limits`) | 429 + `Retry-After` | `rate_limited` | retryable |
/// | upstream 401 / 403 (the gateway's upstream credential) | 502 | `unauthorized` / `forbidden` | non_retryable |
/// | upstream 5xx, connection failure | 502 | `provider_error` | retryable |
/// | upstream redirect, other 4xx | 502 | `provider_error` | non_retryable |
/// | upstream 400/409/422, oversized, bad UTF-8 or JSON | 502 | `invalid_payload` | non_retryable |
/// | upstream collection of the wrong shape | 502 | `schema_mismatch` | non_retryable |
///
/// Upstream-derived failures are never 401/403 so a caller can tell "my token is wrong" from "the
/// gateway's upstream credential is wrong"; the body `code` carries the Nexent meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Body.
    pub body: ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, severity: Severity, message: &'static str) -> ApiError {
        ApiError { status, body: ErrorBody { code, severity: severity.as_str(), message, retry_after_seconds: None } }
    }

    /// 400: the request body is not a valid search request.
    pub fn bad_request() -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_payload",
            Severity::NonRetryable,
            "The request must be a JSON object with a `query` of 1 to 2000 characters containing a non-whitespace \
             character, and an optional `limit` of at least 1.",
        )
    }

    /// 413: the request body is too large.
    pub fn too_large() -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_payload",
            Severity::NonRetryable,
            "The request body is too large.",
        )
    }

    /// 404: no such provider on this surface.
    pub fn not_found() -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "provider_error", Severity::NonRetryable, "No such provider.")
    }

    /// 503: the search kill switch is off.
    pub fn switched_off() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "provider_error",
            Severity::Retryable,
            "External memory search is disabled.",
        )
    }

    /// 401 / 403 / 503 for a refused caller.
    pub fn from_auth(err: AuthError) -> ApiError {
        match err {
            AuthError::Unauthenticated => ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                Severity::NonRetryable,
                "Authentication required.",
            ),
            AuthError::Forbidden | AuthError::InsufficientScope => {
                ApiError::new(StatusCode::FORBIDDEN, "forbidden", Severity::NonRetryable, "Access denied.")
            }
            AuthError::Unavailable => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "provider_error",
                Severity::Retryable,
                "Caller identity cannot be verified now.",
            ),
        }
    }

    /// The response to an upstream failure.
    pub fn from_engine(err: &EngineError) -> ApiError {
        let code = err.code();
        let status = match (err, code) {
            (_, ErrorCode::Timeout) => StatusCode::GATEWAY_TIMEOUT,
            (EngineError::HeldFull, _) => StatusCode::SERVICE_UNAVAILABLE,
            (_, ErrorCode::RateLimited) => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::BAD_GATEWAY,
        };
        let message = match err {
            EngineError::Timeout => "The memory service did not answer in time.",
            EngineError::Saturated => "Too many concurrent requests to this provider.",
            EngineError::HeldFull => {
                "The gateway holds as many answer bytes for slow readers as it allows; retry later."
            }
            EngineError::Limited { .. } => "A limit set on this provider refused the call; retry after the time given.",
            EngineError::RateLimited { .. } => "The memory service rate-limited the request.",
            EngineError::Unauthorized => "The memory service refused the gateway's credential.",
            EngineError::Forbidden => "The memory service denied the gateway access.",
            EngineError::ServerError(_) | EngineError::Connect | EngineError::Transport => "The memory service failed.",
            EngineError::Redirect(_) | EngineError::UpstreamStatus(_) | EngineError::InvalidRequest => {
                "The memory service answered unexpectedly."
            }
            EngineError::Rejected(_) => "The memory service rejected the request.",
            EngineError::TooLarge | EngineError::InvalidUtf8 | EngineError::InvalidJson => {
                "The memory service sent an unusable response."
            }
            EngineError::SchemaMismatch => "The memory service's response does not match its dialect.",
        };
        let mut api = ApiError::new(status, code.as_str(), err.severity(), message);
        api.body.retry_after_seconds = err.retry_after_seconds();
        api
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = json_response(self.status, &self.body);
        let headers = response.headers_mut();
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.body.retry_after_seconds {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// `value` as a JSON response with `status`.
pub(crate) fn json_response(status: StatusCode, value: &impl Serialize) -> Response {
    json_response_sized(status, value, 128)
}

/// [`json_response`] rendered by [`render_json`] into a buffer of about `size` bytes.
fn json_response_sized(status: StatusCode, value: &impl Serialize, size: usize) -> Response {
    match render_json(value, size) {
        Some(body) => {
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
        }
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// `value` as JSON, written into one buffer of `size` bytes (grown only when the JSON is longer,
/// e.g. with many escapes) and shrunk when much of it is left unused: a large answer is neither
/// copied while its buffer doubles nor held for a slow reader at up to twice its length (the
/// held-bytes budget counts the length). `None` if `value` cannot be serialised.
fn render_json(value: &impl Serialize, size: usize) -> Option<Vec<u8>> {
    let mut body = Vec::with_capacity(size);
    serde_json::to_writer(&mut body, value).ok()?;
    if body.capacity() - body.len() > body.len() / 4 + 4096 {
        body.shrink_to_fit();
    }
    Some(body)
}

/// The buffer size [`render_results`] starts from for `results`: their strings, plus room for
/// keys, punctuation and a score per item.
fn results_size(results: &[SearchResult<'_>]) -> usize {
    results.iter().map(SearchResult::text_bytes).sum::<usize>() + 128 * results.len() + 2
}

/// `results` as JSON, the bytes serde_json writes for them (held equal by the tests), written
/// straight into one buffer of about their length: no serializer state per field, the strings
/// escaped a block of plain bytes at a time. Grown and shrunk as [`render_json`] does.
fn render_results(results: &[SearchResult<'_>]) -> Vec<u8> {
    let mut out = String::with_capacity(results_size(results));
    out.push('[');
    for (at, result) in results.iter().enumerate() {
        out.push_str(if at == 0 { "{\"external_id\":" } else { ",{\"external_id\":" });
        push_json_string(&mut out, &result.external_id);
        out.push_str(",\"content\":");
        push_json_string(&mut out, &result.content);
        out.push_str(",\"score\":");
        // serde_json writes a finite f64 as its `Number`'s `Display` does, any other as `null`.
        match serde_json::Number::from_f64(result.score) {
            Some(number) => {
                let _ = write!(out, "{number}");
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"source\":");
        push_json_string(&mut out, result.source);
        out.push_str(",\"is_external\":");
        out.push_str(if result.is_external { "true" } else { "false" });
        out.push_str(",\"metadata\":{");
        let metadata = &result.metadata;
        let fields = [("title", &metadata.title), ("uri", &metadata.uri), ("updated_at", &metadata.updated_at)];
        let mut first = true;
        for (name, value) in fields {
            let Some(value) = value else { continue };
            if !std::mem::take(&mut first) {
                out.push(',');
            }
            out.push('"');
            out.push_str(name);
            out.push_str("\":");
            push_json_string(&mut out, value);
        }
        out.push_str("}}");
    }
    out.push(']');
    let mut body = out.into_bytes();
    if body.capacity() - body.len() > body.len() / 4 + 4096 {
        body.shrink_to_fit();
    }
    body
}

async fn search(
    State(state): State<Arc<AppState>>,
    Path(provider): Path<String>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let operation = Operation::NexentSearch;
    let call = admission::admit(&state, &provider, operation, &headers, client.map(|c| c.0), body).await?;
    let (query, limit) = parse_search_body(&call.body, state.settings().nexent_max_limit)
        .ok_or_else(|| call.refuse(&state, ApiError::bad_request()))?;
    let Admitted { provider, caller, .. } = call;
    let items =
        state.search(&provider, &caller, &query, limit, operation).await.map_err(|e| ApiError::from_engine(&e))?;
    let results: Vec<SearchResult> =
        items.into_iter().map(|item| SearchResult::from_item(item, &provider.name)).collect();
    let body = render_results(&results);
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response())
}

/// A search request body's normalised query and effective limit (capped at `max_limit`), or
/// `None` for a bad request. Pure; public for the fuzz targets.
pub fn parse_search_body(bytes: &[u8], max_limit: u32) -> Option<(String, u32)> {
    let body = search_body::read(bytes)?;
    let Some(Query::Text(query)) = body.query else { return None };
    let query = normalize_query(&query).ok()?;
    let limit = match body.limit {
        None | Some(Limit::Null) => DEFAULT_LIMIT,
        Some(Limit::Integer(n)) if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
        Some(_) => return None,
    };
    Some((query, limit.min(max_limit.max(1))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(content: String, title: Option<&str>) -> SearchResult<'static> {
        let item = Item {
            id: "mem-1".into(),
            content,
            title: title.map(str::to_string),
            uri: Some("https://example.test/m/1".into()),
            score: Some(0.125),
            updated_at: Some("2026-12-05T12:00:00Z".into()),
        };
        SearchResult::from_item(item, "team-memory")
    }

    #[test]
    fn search_answers_are_rendered_into_one_buffer_of_about_their_length() {
        let plain = (0..20).map(|n| result("m".repeat(50 * 1024 + n), Some("Title"))).collect::<Vec<_>>();
        let size = results_size(&plain);
        let body = render_json(&plain, size).expect("renders");
        assert_eq!(body, serde_json::to_vec(&plain).expect("json"), "the same bytes as serde_json renders");
        assert_eq!(body.capacity(), size, "the buffer was never grown (no copy while the answer is written)");
        let written = render_results(&plain);
        assert_eq!(written, body, "written by hand: the same bytes");
        assert_eq!(written.capacity(), size, "written by hand: the buffer was never grown");

        // Escapes make the JSON longer than the strings: the buffer grows, then is shrunk when
        // more than a quarter (plus 4 KiB) of it would be held unused.
        let escaped = (0..20).map(|_| result("\"\n\u{1}".repeat(20 * 1024), None)).collect::<Vec<_>>();
        let body = render_json(&escaped, results_size(&escaped)).expect("renders");
        assert_eq!(body, serde_json::to_vec(&escaped).expect("json"));
        assert!(body.capacity() <= body.len() + body.len() / 4 + 4096, "{} for {}", body.capacity(), body.len());
        let written = render_results(&escaped);
        assert_eq!(written, body, "written by hand: the same bytes");
        assert!(written.capacity() <= written.len() + written.len() / 4 + 4096);

        let empty: Vec<SearchResult> = Vec::new();
        assert_eq!(render_json(&empty, results_size(&empty)).expect("renders"), b"[]");
        assert_eq!(render_results(&empty), b"[]");
    }

    /// Every field, each metadata subset, escapes, non-ASCII text and every kind of score (plain,
    /// tiny, huge, negative zero, not finite): written by hand exactly as serde_json writes them.
    #[test]
    fn results_are_written_as_serde_json_writes_them() {
        let scores = [0.0, -0.0, 0.125, 1.0, 0.87654321, 1e-7, 123_456_789.0, 1e21, 5e-324, f64::NAN, f64::INFINITY];
        let texts = ["plain", "", "quote \" back \\ slash", "\u{0}\u{1f}\t\n\r\u{8}\u{c}", "é中😀\u{2028}</script>"];
        let mut results = Vec::new();
        for (at, score) in scores.into_iter().enumerate() {
            for mask in 0..8u8 {
                let text = texts[(at + usize::from(mask)) % texts.len()];
                let field = |bit: u8| (mask & bit != 0).then(|| format!("{text}-{bit}"));
                results.push(SearchResult {
                    external_id: format!("id-{at}-{text}"),
                    content: text.repeat(at + 1),
                    score,
                    source: text,
                    is_external: mask % 2 == 0,
                    metadata: ResultMetadata { title: field(1), uri: field(2), updated_at: field(4) },
                });
            }
        }
        for count in [0, 1, 2, results.len()] {
            let some = &results[..count];
            assert_eq!(render_results(some), serde_json::to_vec(some).expect("json"), "{count} results");
        }
    }

    /// The reading before `search_body`: the body as a `Value`, then the two members from it. The
    /// oracle of [`the_body_is_read_as_a_value_would_be`] (and of the `nexent_requests` fuzz target).
    fn parse_through_value(bytes: &[u8], max_limit: u32) -> Option<(String, u32)> {
        #[derive(serde::Deserialize)]
        struct SearchRequest {
            query: String,
            #[serde(default)]
            limit: Option<i64>,
        }
        let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        if !value.is_object() {
            return None;
        }
        let request: SearchRequest = serde_json::from_value(value).ok()?;
        let query = normalize_query(&request.query).ok()?;
        let limit = match request.limit {
            None => DEFAULT_LIMIT,
            Some(n) if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
            Some(_) => return None,
        };
        Some((query, limit.min(max_limit.max(1))))
    }

    #[test]
    fn the_body_is_read_as_a_value_would_be() {
        let deep = format!("{{\"query\":\"q\",\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        let fields = [
            r#""query":"release checklist""#,
            r#""query":"  a \n b ""#,
            r#""query":"\u0071\"uoted\"""#,
            r#""query":"""#,
            r#""query":7"#,
            r#""query":null"#,
            r#""query":["q"]"#,
            r#""query":{"q":1}"#,
            r#""qu\u0065ry":"escaped key""#,
            r#""limit":7"#,
            r#""limit":0"#,
            r#""limit":-3"#,
            r#""limit":null"#,
            r#""limit":7.0"#,
            r#""limit":1e2"#,
            r#""limit":-0"#,
            r#""limit":9223372036854775807"#,
            r#""limit":9223372036854775808"#,
            r#""limit":18446744073709551616"#,
            r#""limit":"5""#,
            r#""limit":true"#,
            r#""limit":[1]"#,
            r#""top_k":1e999"#,
            r#""tenant_id":"t","user_id":null,"embedding":[0.1,-2,3e5]"#,
            r#""nested":{"a":[{"b":"\ud83d\ude00"}]}"#,
            r#""bad_escape":"\ud800""#,
            r#""x":"\q""#,
            r#""$serde_json::private::RawValue":"{\"query\":\"raw\"}""#,
            r#""\u0024serde_json::private::RawValue":"[1]""#,
            r#""query":{"$serde_json::private::RawValue":"\"raw\""}"#,
            r#""limit":{"$serde_json::private::RawValue":"9"}"#,
            r#""limit":{"$serde_json::private::RawValue":"nine"}"#,
            r#""m":{"$serde_json::private::RawValue":"oops"}"#,
            r#""m":{"a":1,"$serde_json::private::RawValue":"oops"}"#,
            r#""m":{"$serde_json::private::RawValue":7}"#,
        ];
        let mut bodies: Vec<String> = vec![
            String::new(),
            "[]".into(),
            r#"["query","q"]"#.into(),
            r#""q""#.into(),
            "null".into(),
            "{}".into(),
            r#"{"query":"q"} "#.into(),
            r#"{"query":"q"} {}"#.into(),
            r#"{"query":"q",}"#.into(),
            // serde_json's raw-value key (`engine::normalize::RAW_VALUE_KEY`) first in an object.
            r#"{"$serde_json::private::RawValue":"{\"query\":\"q\"}"}"#.into(),
            r#"{"$serde_json::private::RawValue":"{\"query\":\"q\"}","limit":3}"#.into(),
            r#"{"$serde_json::private::RawValue":"x","query":"q"}"#.into(),
            r#"{"query":"q","m":{"$serde_json::private::RawValue":"{\"$serde_json::private::RawValue\":\"1\"}"}}"#
                .into(),
            deep,
        ];
        for first in fields {
            bodies.push(format!("{{{first}}}"));
            for second in fields {
                bodies.push(format!("{{{first},{second}}}"));
            }
        }
        for body in &bodies {
            for max_limit in [0, 20] {
                assert_eq!(
                    parse_search_body(body.as_bytes(), max_limit),
                    parse_through_value(body.as_bytes(), max_limit),
                    "{body}"
                );
            }
        }
        let accepted = bodies.iter().filter(|body| parse_search_body(body.as_bytes(), 20).is_some()).count();
        assert!(accepted > 50 && accepted < bodies.len() / 2, "{accepted} of {}", bodies.len());
    }

    fn parsed(value: serde_json::Value) -> Option<(String, u32)> {
        parse_search_body(&serde_json::to_vec(&value).expect("json"), 20)
    }

    #[test]
    fn unknown_fields_are_ignored_and_limit_defaults_and_caps() {
        let full = json!({
            "query": "  release \n checklist ", "tenant_id": "t", "user_id": "u", "agent_id": null,
            "conversation_id": null, "layers": [], "top_k": 50, "threshold": 0.65, "embedding": [0.1],
            "hybrid": false, "weight_accurate": 0.3, "added_later": {"x": 1}
        });
        assert_eq!(parsed(full), Some(("release checklist".to_string(), DEFAULT_LIMIT)));
        assert_eq!(parsed(json!({"query": "q", "limit": 7})), Some(("q".to_string(), 7)));
        assert_eq!(parsed(json!({"query": "q", "limit": 500})), Some(("q".to_string(), 20)));
        assert_eq!(parsed(json!({"query": "q", "limit": null})), Some(("q".to_string(), 5)));
    }

    #[test]
    fn bad_requests_are_refused() {
        for bad in [
            json!({}),
            json!({"query": " \t"}),
            json!({"query": 7}),
            json!({"query": "q".repeat(2001)}),
            json!({"query": "q", "limit": 0}),
            json!({"query": "q", "limit": -1}),
            json!({"query": "q", "limit": "5"}),
            json!(["q"]),
        ] {
            assert_eq!(parsed(bad.clone()), None, "{bad}");
        }
        assert_eq!(parse_search_body(b"{not json", 20), None);
    }

    #[test]
    fn engine_errors_map_to_documented_statuses() {
        let cases = [
            (EngineError::Timeout, 504, "timeout", "retryable"),
            (EngineError::RateLimited { retry_after_seconds: Some(7) }, 429, "rate_limited", "retryable"),
            (EngineError::Saturated, 429, "rate_limited", "retryable"),
            (EngineError::HeldFull, 503, "provider_error", "retryable"),
            (EngineError::ServerError(500), 502, "provider_error", "retryable"),
            (EngineError::Unauthorized, 502, "unauthorized", "non_retryable"),
            (EngineError::Forbidden, 502, "forbidden", "non_retryable"),
            (EngineError::InvalidJson, 502, "invalid_payload", "non_retryable"),
            (EngineError::SchemaMismatch, 502, "schema_mismatch", "non_retryable"),
        ];
        for (err, status, code, severity) in cases {
            let api = ApiError::from_engine(&err);
            assert_eq!((api.status.as_u16(), api.body.code, api.body.severity), (status, code, severity), "{err:?}");
        }
        let limited = ApiError::from_engine(&EngineError::RateLimited { retry_after_seconds: Some(7) }).into_response();
        assert_eq!(limited.headers().get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("7"));
        let unauthenticated = ApiError::from_auth(AuthError::Unauthenticated).into_response();
        assert_eq!(
            unauthenticated.headers().get(header::WWW_AUTHENTICATE).and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
    }

    #[test]
    fn missing_score_becomes_zero_and_source_is_the_provider() {
        let item = Item { id: "a".into(), content: "c".into(), title: None, uri: None, score: None, updated_at: None };
        let value = serde_json::to_value(SearchResult::from_item(item, "repo-memory")).expect("json");
        assert_eq!(
            value,
            json!({"external_id": "a", "content": "c", "score": 0.0, "source": "repo-memory", "is_external": true, "metadata": {}})
        );
    }
}
