//! Building the upstream search request (reference §2-§4), as a pure function.
//!
//! Owns where every value goes: the URL (`origin + basePath + path`), the query string, the JSON
//! body and the exact header set. It performs no I/O and knows nothing about HTTP clients.
//!
//! Placement order in the query string is fixed: `query`, `user_id`, `agent_id`, `app_id`, the
//! limit field, `threshold`, `rerank`. A GET request never has a body; a POST request always has a
//! JSON object body (possibly `{}`) and `content-type: application/json`.

use std::fmt;

use memgate_crds::validation::{Credential, join_url};
use memgate_crds::{AuthScheme, IdLocation, LimitField, QueryLocation, Scope, SearchMethod, SearchSpec};
use serde_json::{Map, Value};

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
}

/// One fully built upstream request.
#[derive(Clone, PartialEq)]
pub struct UpstreamRequest {
    /// `GET` or `POST`.
    pub method: SearchMethod,
    /// Absolute URL including the query string.
    pub url: url::Url,
    /// Every header memgate sets, in sending order (lower-case names).
    pub headers: Vec<(&'static str, String)>,
    /// JSON body; always `Some` for POST, always `None` for GET.
    pub body: Option<Value>,
}

impl fmt::Debug for UpstreamRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| (*name, if is_credential_header(name) { "<redacted>" } else { value.as_str() }))
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

/// Build the search request for `query` (already normalised) asking for at most `limit` items.
///
/// Fails with [`EngineError::InvalidRequest`] when the dialect sends a scope id the target does not
/// configure, or the joined URL does not parse (both ruled out by validation).
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
    let mut root = Map::new();
    let mut filters = Map::new();
    let mut put = |place: Place, name: &'static str, value: Value| -> Result<(), EngineError> {
        match place {
            Place::Root if !is_get => {
                root.insert(name.to_string(), value);
            }
            Place::Filters if !is_get => {
                filters.insert(name.to_string(), value);
            }
            Place::QueryString => pairs.push((name, query_text(&value))),
            // A GET dialect with a body location: refused by validation, refused here too.
            Place::Root | Place::Filters => return Err(EngineError::InvalidRequest),
        }
        Ok(())
    };

    let query_place = match search.query_location {
        QueryLocation::Json => Place::Root,
        QueryLocation::Query => Place::QueryString,
    };
    put(query_place, "query", Value::String(query.to_string()))?;
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
        put(place, name, Value::String(value.clone()))?;
    }
    match search.limit_field {
        LimitField::TopK => put(extra, "top_k", Value::from(limit))?,
        LimitField::Limit => put(extra, "limit", Value::from(limit))?,
        LimitField::Omit => {}
    }
    if let Some(threshold) = search.threshold {
        let number = serde_json::Number::from_f64(threshold).ok_or(EngineError::InvalidRequest)?;
        put(extra, "threshold", Value::Number(number))?;
    }
    if let Some(rerank) = search.rerank {
        put(extra, "rerank", Value::Bool(rerank))?;
    }

    let joined = join_url(&target.origin, &target.base_path, &search.path);
    let mut url = url::Url::parse(&joined).map_err(|_| EngineError::InvalidRequest)?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(EngineError::InvalidRequest);
    }
    if !pairs.is_empty() {
        url.query_pairs_mut().extend_pairs(pairs.iter().map(|(k, v)| (*k, v.as_str())));
    }

    let credential = target.credential.expose();
    let auth_header = match auth {
        AuthScheme::AuthorizationToken => ("authorization", format!("Token {credential}")),
        AuthScheme::AuthorizationBearer => ("authorization", format!("Bearer {credential}")),
        AuthScheme::XApiKey => ("x-api-key", credential.to_string()),
    };
    let mut headers = vec![("accept", "application/json".to_string()), auth_header];
    let body = if is_get {
        None
    } else {
        headers.push(("content-type", "application/json".to_string()));
        if !filters.is_empty() {
            root.insert("filters".to_string(), Value::Object(filters));
        }
        Some(Value::Object(root))
    };
    Ok(UpstreamRequest { method: search.method, url, headers, body })
}

/// The query-string text of a JSON scalar.
fn query_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
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
            vec![("accept", "application/json".to_string()), ("authorization", "Bearer s3cret".to_string())]
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
            request.body,
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
        assert_eq!(request.body, Some(json!({})));
        assert_eq!(request.headers[1], ("authorization", "Token s3cret".to_string()));

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
