//! Building the upstream search request (reference §2-§4), as a pure function.
//!
//! Owns where every value goes: the URL (`origin + basePath + path`), the query string, the JSON
//! body and the exact header set. It performs no I/O and knows nothing about HTTP clients.
//!
//! Placement order in the query string is fixed: `query`, `user_id`, `agent_id`, `app_id`, the
//! limit field, `threshold`, `rerank`. A GET request never has a body; a POST request always has a
//! JSON object body (possibly `{}`) and `content-type: application/json`.

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::sync::OnceLock;

use memgate_crds::validation::{Credential, join_url};
use memgate_crds::{AuthScheme, IdLocation, LimitField, QueryLocation, Scope, SearchMethod, SearchSpec};
use serde_json::Value;

use super::error::EngineError;

/// Where and as whom one provider is called: everything the engine takes from a `MemoryProvider`.
#[derive(Clone, Debug)]
pub struct Target {
    /// `spec.endpoint.origin`, already validated (`scheme://host[:port]`).
    pub origin: String,
    /// `spec.endpoint.basePath`, already validated (may be empty).
    pub base_path: String,
    /// `spec.scope`: fixed routing ids.
    pub scope: Scope,
    /// The credential read from the referenced Secret.
    pub credential: Credential,
    /// `spec.timeoutMs`: bounds the whole call, permit wait included.
    pub timeout: std::time::Duration,
    /// `spec.limits.upstream.maxInFlight`: the provider's upstream requests in flight at once in
    /// this replica; `None` leaves the engine's default ([`super::client::EngineConfig`]).
    pub max_in_flight: Option<usize>,
    /// The URLs of [`Target::url`], parsed once (start with `UrlCache::default()`).
    pub urls: UrlCache,
}

/// The URLs a target's requests go to, each parsed once: those of the first two paths asked for
/// (a provider has two, its search path and its write path; any other is parsed per call).
#[derive(Debug, Clone, Default)]
pub struct UrlCache([OnceLock<(String, url::Url)>; 2]);

impl Target {
    /// `origin + basePath + path` as a URL, parsed on first use and cloned after;
    /// [`EngineError::InvalidRequest`] when it does not parse or has a query or fragment (both
    /// ruled out by validation).
    pub fn url(&self, path: &str) -> Result<url::Url, EngineError> {
        for slot in &self.urls.0 {
            match slot.get() {
                Some((cached, url)) if cached == path => return Ok(url.clone()),
                Some(_) => continue,
                None => {
                    let built = self.parse_url(path)?;
                    let (cached, url) = slot.get_or_init(|| (path.to_string(), built.clone()));
                    // Another call may have filled the slot with its own path meanwhile.
                    return Ok(if cached == path { url.clone() } else { built });
                }
            }
        }
        self.parse_url(path)
    }

    fn parse_url(&self, path: &str) -> Result<url::Url, EngineError> {
        let url =
            url::Url::parse(&join_url(&self.origin, &self.base_path, path)).map_err(|_| EngineError::InvalidRequest)?;
        if url.query().is_some() || url.fragment().is_some() {
            return Err(EngineError::InvalidRequest);
        }
        Ok(url)
    }
}

/// One fully built upstream request.
#[derive(Clone, PartialEq)]
pub struct UpstreamRequest {
    /// `GET` or `POST`.
    pub method: SearchMethod,
    /// Absolute URL including the query string.
    pub url: url::Url,
    /// Every header memgate sets, in sending order (lower-case names).
    pub headers: Vec<(&'static str, HeaderText)>,
    /// JSON body; always `Some` for POST, always `None` for GET.
    pub body: Option<JsonBody>,
}

/// A header's value: one of this module's fixed texts, or built for the call (the credential's).
pub type HeaderText = Cow<'static, str>;

/// The headers of every upstream request, in sending order: `accept`, the credential's header for
/// `auth`, and `content-type` when the request has a (JSON) body.
pub fn upstream_headers(credential: &Credential, auth: AuthScheme, with_body: bool) -> Vec<(&'static str, HeaderText)> {
    let credential = credential.expose();
    let auth_header = match auth {
        AuthScheme::AuthorizationToken => ("authorization", format!("Token {credential}")),
        AuthScheme::AuthorizationBearer => ("authorization", format!("Bearer {credential}")),
        AuthScheme::XApiKey => ("x-api-key", credential.to_string()),
    };
    let mut headers = Vec::with_capacity(3);
    headers.push(("accept", HeaderText::Borrowed(JSON)));
    headers.push((auth_header.0, HeaderText::Owned(auth_header.1)));
    if with_body {
        headers.push(("content-type", HeaderText::Borrowed(JSON)));
    }
    headers
}

const JSON: &str = "application/json";

/// A request's JSON body, serialised once when the request is built.
#[derive(Clone, PartialEq, Eq)]
pub struct JsonBody(hyper::body::Bytes);

impl JsonBody {
    /// `value` serialised as serde_json writes it.
    pub fn from_value(value: &Value) -> JsonBody {
        // Serialising a `Value` into memory cannot fail (its map keys are strings).
        JsonBody(serde_json::to_vec(value).unwrap_or_default().into())
    }

    /// The body's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The body's bytes, shared (no copy).
    pub fn to_bytes(&self) -> hyper::body::Bytes {
        self.0.clone()
    }

    /// The body read back as a `Value` (`Null` if it were not JSON, which a built body always is).
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.0).unwrap_or(Value::Null)
    }
}

impl fmt::Debug for JsonBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Debug for UpstreamRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| (*name, if is_credential_header(name) { "<redacted>" } else { value.as_ref() }))
            .collect();
        f.debug_struct("UpstreamRequest")
            .field("method", &self.method)
            .field("url", &self.url.as_str())
            .field("headers", &headers)
            .field("body", &self.body)
            .finish()
    }
}

fn is_credential_header(name: &str) -> bool {
    name == "authorization" || name == "x-api-key"
}

/// Where one value goes.
#[derive(Clone, Copy)]
enum Place {
    Root,
    Filters,
    QueryString,
}

/// One value of a search request: the query or an id, the limit, the threshold or the rerank flag.
enum Scalar<'a> {
    Text(&'a str),
    Count(u32),
    Number(serde_json::Number),
    Flag(bool),
}

impl Scalar<'_> {
    /// Append the value as JSON, as serde_json writes it.
    fn push_json(&self, out: &mut String) {
        match self {
            Scalar::Text(text) => crate::profile::push_json_string(out, text),
            Scalar::Count(count) => {
                let _ = write!(out, "{count}");
            }
            Scalar::Number(number) => {
                let _ = write!(out, "{number}");
            }
            Scalar::Flag(flag) => out.push_str(if *flag { "true" } else { "false" }),
        }
    }

    /// The value's text in a query string (before form encoding).
    fn query_text(&self) -> String {
        match self {
            Scalar::Text(text) => (*text).to_string(),
            Scalar::Count(count) => count.to_string(),
            Scalar::Number(number) => number.to_string(),
            Scalar::Flag(flag) => flag.to_string(),
        }
    }
}

/// A JSON object written member by member (names are this module's constants: no escaping).
struct ObjectWriter {
    text: String,
}

impl ObjectWriter {
    /// An empty object with room for about `capacity` bytes.
    fn with_capacity(capacity: usize) -> ObjectWriter {
        let mut text = String::with_capacity(capacity);
        text.push('{');
        ObjectWriter { text }
    }

    fn is_empty(&self) -> bool {
        self.text.len() == 1
    }

    /// Open the next member: `"name":`.
    fn member(&mut self, name: &str) -> &mut String {
        if !self.is_empty() {
            self.text.push(',');
        }
        self.text.push('"');
        self.text.push_str(name);
        self.text.push_str("\":");
        &mut self.text
    }

    fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }
}

/// Build the search request for `query` (already normalised) asking for at most `limit` items.
///
/// Fails with [`EngineError::InvalidRequest`] when the dialect sends a scope id the target does not
/// configure, or the joined URL does not parse (both ruled out by validation).
///
/// The body is written straight into its bytes, members in the order they are placed (the
/// `filters` object last), as serde_json writes the same object (held equal by the tests).
pub fn build_search_request(
    target: &Target,
    auth: AuthScheme,
    search: &SearchSpec,
    query: &str,
    limit: u32,
) -> Result<UpstreamRequest, EngineError> {
    let is_get = search.method == SearchMethod::Get;
    // Values that are not ids or the query (limit, threshold, rerank) follow the method.
    let extra = if is_get { Place::QueryString } else { Place::Root };

    let mut pairs: Vec<(&'static str, String)> = Vec::new();
    // Room for every value unescaped plus names and punctuation: written without regrowing.
    let ids_bytes = [&target.scope.user_id, &target.scope.agent_id, &target.scope.app_id]
        .iter()
        .map(|id| id.as_ref().map_or(0, String::len))
        .sum::<usize>();
    let mut root = ObjectWriter::with_capacity(query.len() + ids_bytes + 128);
    let mut filters = ObjectWriter::with_capacity(0);
    let mut put = |place: Place, name: &'static str, value: Scalar<'_>| -> Result<(), EngineError> {
        match place {
            Place::Root if !is_get => value.push_json(root.member(name)),
            Place::Filters if !is_get => value.push_json(filters.member(name)),
            Place::QueryString => pairs.push((name, value.query_text())),
            // A GET dialect with a body location: refused by validation, refused here too.
            Place::Root | Place::Filters => return Err(EngineError::InvalidRequest),
        }
        Ok(())
    };

    let query_place = match search.query_location {
        QueryLocation::Json => Place::Root,
        QueryLocation::Query => Place::QueryString,
    };
    put(query_place, "query", Scalar::Text(query))?;
    let ids = [
        ("user_id", search.user_id_location, &target.scope.user_id),
        ("agent_id", search.agent_id_location, &target.scope.agent_id),
        ("app_id", search.app_id_location, &target.scope.app_id),
    ];
    for (name, location, value) in ids {
        let place = match location {
            IdLocation::Omit => continue,
            IdLocation::Json => Place::Root,
            IdLocation::JsonFilters => Place::Filters,
            IdLocation::Query => Place::QueryString,
        };
        let value = value.as_ref().ok_or(EngineError::InvalidRequest)?;
        put(place, name, Scalar::Text(value))?;
    }
    match search.limit_field {
        LimitField::TopK => put(extra, "top_k", Scalar::Count(limit))?,
        LimitField::Limit => put(extra, "limit", Scalar::Count(limit))?,
        LimitField::Omit => {}
    }
    if let Some(threshold) = search.threshold {
        let number = serde_json::Number::from_f64(threshold).ok_or(EngineError::InvalidRequest)?;
        put(extra, "threshold", Scalar::Number(number))?;
    }
    if let Some(rerank) = search.rerank {
        put(extra, "rerank", Scalar::Flag(rerank))?;
    }

    let mut url = target.url(&search.path)?;
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
    }

    let headers = upstream_headers(&target.credential, auth, !is_get);
    let body = if is_get {
        None
    } else {
        if !filters.is_empty() {
            root.member("filters").push_str(&filters.finish());
        }
        Some(JsonBody(root.finish().into_bytes().into()))
    };
    Ok(UpstreamRequest { method: search.method, url, headers, body })
}

#[cfg(test)]
mod tests {
    use memgate_crds::validation::credential_value;
    use serde_json::json;

    use super::*;

    fn target(scope: Scope) -> Target {
        Target {
            origin: "https://memory.example.com/".to_string(),
            base_path: "/tenant-a/".to_string(),
            scope,
            credential: credential_value("test", b"s3cret").expect("valid credential"),
            timeout: std::time::Duration::from_secs(5),
            max_in_flight: None,
            urls: UrlCache::default(),
        }
    }

    fn spec(method: SearchMethod, query: QueryLocation, ids: [IdLocation; 3], limit: LimitField) -> SearchSpec {
        SearchSpec {
            method,
            path: "/v1/search/".to_string(),
            query_location: query,
            user_id_location: ids[0],
            agent_id_location: ids[1],
            app_id_location: ids[2],
            limit_field: limit,
            threshold: None,
            rerank: None,
        }
    }

    /// A target's URLs are parsed once for its first two paths and are the same URLs as parsed
    /// each time: for those paths, for any further path, and after a clone of the target.
    #[test]
    fn a_targets_urls_are_parsed_once_and_equal_to_fresh_parses() {
        let target = target(Scope::default());
        let fresh =
            |path: &str| url::Url::parse(&join_url("https://memory.example.com/", "/tenant-a/", path)).expect("parses");
        for round in 0..3 {
            for path in ["/v1/search/", "/v1/memories/", "/v2/other", "/v1/search/"] {
                assert_eq!(target.url(path).expect("url"), fresh(path), "round {round}: {path}");
            }
        }
        let cached: Vec<&str> = target.urls.0.iter().filter_map(|slot| slot.get()).map(|(p, _)| p.as_str()).collect();
        assert_eq!(cached, ["/v1/search/", "/v1/memories/"]);
        assert_eq!(target.clone().url("/v2/other").expect("url"), fresh("/v2/other"));
        for refused in ["/v1/search?x=1", "/v1/search#f"] {
            assert_eq!(target.url(refused), Err(EngineError::InvalidRequest), "{refused}");
        }
    }

    fn header_names(request: &UpstreamRequest) -> Vec<&str> {
        request.headers.iter().map(|(name, _)| *name).collect()
    }

    #[test]
    fn get_dialect_puts_everything_in_the_query_string_and_sends_no_body() {
        let mut search = spec(
            SearchMethod::Get,
            QueryLocation::Query,
            [IdLocation::Query, IdLocation::Omit, IdLocation::Query],
            LimitField::Limit,
        );
        search.threshold = Some(0.25);
        search.rerank = Some(true);
        let scope = Scope { user_id: Some("u 1".into()), agent_id: Some("unused".into()), app_id: Some("a/b".into()) };
        let request = build_search_request(
            &target(scope),
            AuthScheme::AuthorizationBearer,
            &search,
            "deploy & roll back = café ☕ 100%+",
            5,
        )
        .expect("builds");

        assert_eq!(request.method, SearchMethod::Get);
        assert_eq!(request.url.path(), "/tenant-a/v1/search/");
        assert_eq!(
            request.url.query(),
            Some(
                "query=deploy+%26+roll+back+%3D+caf%C3%A9+%E2%98%95+100%25%2B&user_id=u+1&app_id=a%2Fb&limit=5&threshold=0.25&rerank=true"
            )
        );
        let decoded: Vec<(String, String)> = request.url.query_pairs().into_owned().collect();
        assert_eq!(decoded[0], ("query".to_string(), "deploy & roll back = café ☕ 100%+".to_string()));
        assert_eq!(request.body, None);
        assert_eq!(
            request.headers,
            vec![
                ("accept", HeaderText::from("application/json")),
                ("authorization", HeaderText::from("Bearer s3cret"))
            ]
        );
    }

    #[test]
    fn post_dialect_mixes_root_filters_and_query_string() {
        let mut search = spec(
            SearchMethod::Post,
            QueryLocation::Json,
            [IdLocation::JsonFilters, IdLocation::Json, IdLocation::Query],
            LimitField::TopK,
        );
        search.threshold = Some(0.1);
        search.rerank = Some(false);
        let scope =
            Scope { user_id: Some("user-1".into()), agent_id: Some("agent-1".into()), app_id: Some("app 1".into()) };
        let request =
            build_search_request(&target(scope), AuthScheme::XApiKey, &search, "release notes", 3).expect("builds");

        assert_eq!(request.url.as_str(), "https://memory.example.com/tenant-a/v1/search/?app_id=app+1");
        assert_eq!(
            request.body.as_ref().map(JsonBody::value),
            Some(json!({
                "query": "release notes", "agent_id": "agent-1", "filters": {"user_id": "user-1"},
                "top_k": 3, "threshold": 0.1, "rerank": false
            }))
        );
        assert_eq!(header_names(&request), ["accept", "x-api-key", "content-type"]);
        assert_eq!(request.headers[1].1, "s3cret");
    }

    #[test]
    fn post_without_body_values_still_sends_an_empty_object_and_no_query_string() {
        let search = spec(
            SearchMethod::Post,
            QueryLocation::Query,
            [IdLocation::Omit, IdLocation::Omit, IdLocation::Omit],
            LimitField::Omit,
        );
        let request = build_search_request(&target(Scope::default()), AuthScheme::AuthorizationToken, &search, "q", 5)
            .expect("builds");
        assert_eq!(request.url.as_str(), "https://memory.example.com/tenant-a/v1/search/?query=q");
        assert_eq!(request.body.as_ref().map(JsonBody::value), Some(json!({})));
        assert_eq!(request.headers[1], ("authorization", HeaderText::from("Token s3cret")));

        let search = spec(
            SearchMethod::Post,
            QueryLocation::Json,
            [IdLocation::Omit, IdLocation::Omit, IdLocation::Omit],
            LimitField::Omit,
        );
        let request = build_search_request(&target(Scope::default()), AuthScheme::AuthorizationToken, &search, "q", 5)
            .expect("builds");
        assert_eq!(request.url.query(), None);
        assert!(!request.url.as_str().ends_with('?'));
    }

    /// The body and query string as first built, through a `serde_json` map (insertion order
    /// kept, `filters` last) and each value's `Value` text: the oracle of the written body.
    fn through_value(
        search: &SearchSpec,
        scope: &Scope,
        query: &str,
        limit: u32,
    ) -> (Option<Vec<u8>>, Vec<(String, String)>) {
        let is_get = search.method == SearchMethod::Get;
        let (mut root, mut filters, mut pairs) = (serde_json::Map::new(), serde_json::Map::new(), Vec::new());
        let mut put = |place: IdLocation, name: &str, value: Value| match place {
            IdLocation::Json => drop(root.insert(name.to_string(), value)),
            IdLocation::JsonFilters => drop(filters.insert(name.to_string(), value)),
            IdLocation::Query => {
                pairs.push((name.to_string(), value.as_str().map_or_else(|| value.to_string(), str::to_string)))
            }
            IdLocation::Omit => {}
        };
        let extra = if is_get { IdLocation::Query } else { IdLocation::Json };
        let query_place =
            if search.query_location == QueryLocation::Json { IdLocation::Json } else { IdLocation::Query };
        put(query_place, "query", json!(query));
        for (name, location, value) in [
            ("user_id", search.user_id_location, &scope.user_id),
            ("agent_id", search.agent_id_location, &scope.agent_id),
            ("app_id", search.app_id_location, &scope.app_id),
        ] {
            if location != IdLocation::Omit {
                put(location, name, json!(value.as_deref().expect("scope id")));
            }
        }
        match search.limit_field {
            LimitField::TopK => put(extra, "top_k", json!(limit)),
            LimitField::Limit => put(extra, "limit", json!(limit)),
            LimitField::Omit => {}
        }
        if let Some(threshold) = search.threshold {
            put(extra, "threshold", json!(threshold));
        }
        if let Some(rerank) = search.rerank {
            put(extra, "rerank", json!(rerank));
        }
        if !filters.is_empty() {
            root.insert("filters".to_string(), Value::Object(filters));
        }
        let body = (!is_get).then(|| serde_json::to_vec(&Value::Object(root)).expect("serializes"));
        (body, pairs)
    }

    /// Every grammar (method, query and id locations, limit field, thresholds, rerank) with ids and
    /// a query that need escaping: the written body is byte for byte the map's, the query string
    /// carries the same values.
    #[test]
    fn the_written_body_is_the_bytes_serde_json_writes_for_the_same_map() {
        const LOCATIONS: [IdLocation; 4] =
            [IdLocation::Omit, IdLocation::Json, IdLocation::JsonFilters, IdLocation::Query];
        let scope = Scope {
            user_id: Some("u \"1\" \\ é\u{1}".into()),
            agent_id: Some("agent/1 ☕".into()),
            app_id: Some("app&1=</x>".into()),
        };
        let query = "deploy & \"roll\" back\t☕ 100%+";
        let mut built = 0;
        for method in [SearchMethod::Get, SearchMethod::Post] {
            for query_location in [QueryLocation::Json, QueryLocation::Query] {
                for ids in 0..LOCATIONS.len().pow(3) {
                    let ids = [0, 1, 2].map(|at| LOCATIONS[ids / LOCATIONS.len().pow(at) % LOCATIONS.len()]);
                    for limit_field in [LimitField::TopK, LimitField::Limit, LimitField::Omit] {
                        for threshold in [None, Some(0.1), Some(1e-7), Some(3.0), Some(0.0)] {
                            for rerank in [None, Some(true), Some(false)] {
                                let mut search = spec(method, query_location, ids, limit_field);
                                (search.threshold, search.rerank) = (threshold, rerank);
                                let Ok(request) = build_search_request(
                                    &target(scope.clone()),
                                    AuthScheme::XApiKey,
                                    &search,
                                    query,
                                    7,
                                ) else {
                                    continue;
                                };
                                let (body, pairs) = through_value(&search, &scope, query, 7);
                                assert_eq!(request.body.as_ref().map(|b| b.as_bytes().to_vec()), body, "{search:?}");
                                let sent: Vec<(String, String)> = request.url.query_pairs().into_owned().collect();
                                assert_eq!(sent, pairs, "{search:?}");
                                built += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(built > 1000, "grammars built: {built}");
    }

    #[test]
    fn missing_scope_value_and_get_with_body_location_are_refused() {
        let search = spec(
            SearchMethod::Post,
            QueryLocation::Json,
            [IdLocation::Json, IdLocation::Omit, IdLocation::Omit],
            LimitField::TopK,
        );
        let err = build_search_request(&target(Scope::default()), AuthScheme::XApiKey, &search, "q", 5);
        assert_eq!(err, Err(EngineError::InvalidRequest));

        let search = spec(
            SearchMethod::Get,
            QueryLocation::Json,
            [IdLocation::Omit, IdLocation::Omit, IdLocation::Omit],
            LimitField::TopK,
        );
        let err = build_search_request(&target(Scope::default()), AuthScheme::XApiKey, &search, "q", 5);
        assert_eq!(err, Err(EngineError::InvalidRequest));
    }

    #[test]
    fn debug_never_shows_the_credential() {
        let search = spec(
            SearchMethod::Get,
            QueryLocation::Query,
            [IdLocation::Omit, IdLocation::Omit, IdLocation::Omit],
            LimitField::Omit,
        );
        for auth in [AuthScheme::AuthorizationToken, AuthScheme::AuthorizationBearer, AuthScheme::XApiKey] {
            let request = build_search_request(&target(Scope::default()), auth, &search, "q", 5).expect("builds");
            assert!(!format!("{request:?}").contains("s3cret"));
        }
        assert!(!format!("{:?}", target(Scope::default())).contains("s3cret"));
    }
}
