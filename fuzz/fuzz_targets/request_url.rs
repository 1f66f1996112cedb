//! URL construction from origin, basePath and path (`engine::build_search_request`), for every
//! combination the validation rules accept.
//!
//! Input: lines `origin`, `basePath`, `path`, `query`, `user_id`, `agent_id`, `app_id`, then one
//! line whose bytes choose the grammar (method, locations, limit field, threshold, rerank) and the
//! limit. Properties: for an accepted origin and paths, the request goes to exactly that scheme,
//! host and port, its path is exactly basePath (without a trailing `/`) + path with nothing
//! normalised away, it has no user info or fragment and only the documented query parameters;
//! the credential is in exactly one header and nowhere else, and `Debug` redacts it; a grammar the
//! rules would refuse (a GET with body locations) or a missing scope id fails as `invalid_request`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_crds::validation::{check_path, credential_value, parse_origin};
use memgate_crds::{AuthScheme, IdLocation, QueryLocation, Scope, SearchMethod};
use memgate_fuzz::{MARKER, search_spec};
use memgate_gateway::engine::{EngineError, Target, build_search_request};
use memgate_gateway::profile::normalize_query;

const QUERY_KEYS: [&str; 7] = ["query", "user_id", "agent_id", "app_id", "top_k", "limit", "threshold"];

fuzz_target!(|text: &str| {
    let mut lines = text.split('\n');
    let mut next = || lines.next().unwrap_or("");
    let (origin, base_path, path, query) = (next(), next(), next(), next());
    let id = |value: &str| (!value.is_empty()).then(|| value.to_string());
    let scope = Scope { user_id: id(next()), agent_id: id(next()), app_id: id(next()) };
    let options = next().as_bytes();
    let byte = |i: usize| options.get(i).copied().unwrap_or(0);
    let choices: [u8; 8] = std::array::from_fn(byte);
    let limit = u32::from(byte(8)).max(1);
    let auth = [AuthScheme::AuthorizationToken, AuthScheme::AuthorizationBearer, AuthScheme::XApiKey]
        [usize::from(byte(9)) % 3];

    let Ok(origin) = parse_origin("origin", origin, true) else { return };
    if !check_path("basePath", base_path, true).is_empty() || !check_path("path", path, false).is_empty() {
        return;
    }
    let Ok(query) = normalize_query(query) else { return };
    let Some(search) = search_spec(&choices, path) else { return };
    let credential = credential_value("credential", MARKER.as_bytes()).expect("the marker is a valid credential");
    let target = Target {
        origin: origin.clone(),
        base_path: base_path.to_string(),
        scope: scope.clone(),
        credential,
        timeout: std::time::Duration::from_secs(5),
        max_in_flight: None,
        urls: memgate_gateway::engine::UrlCache::default(),
    };

    let is_get = search.method == SearchMethod::Get;
    let ids = [
        (search.user_id_location, &scope.user_id),
        (search.agent_id_location, &scope.agent_id),
        (search.app_id_location, &scope.app_id),
    ];
    let body_location_on_get = is_get
        && (search.query_location == QueryLocation::Json
            || ids.iter().any(|(l, _)| matches!(l, IdLocation::Json | IdLocation::JsonFilters)));
    let missing_id = ids.iter().any(|(l, v)| *l != IdLocation::Omit && v.is_none());

    let request = match build_search_request(&target, auth, &search, &query, limit) {
        Ok(request) => request,
        Err(err) => {
            assert!(matches!(err, EngineError::InvalidRequest), "unexpected error {err:?}");
            assert!(body_location_on_get || missing_id, "refused a valid combination: {search:?} {scope:?}");
            return;
        }
    };
    assert!(!body_location_on_get && !missing_id, "built a request the rules refuse: {search:?}");

    let expected = url::Url::parse(&origin).expect("origin parses");
    let url = &request.url;
    assert_eq!(url.scheme(), expected.scheme());
    assert_eq!(url.host_str(), expected.host_str());
    assert_eq!(url.port_or_known_default(), expected.port_or_known_default());
    assert!(url.username().is_empty() && url.password().is_none(), "user info in {url}");
    assert!(url.fragment().is_none(), "fragment in {url}");
    assert_eq!(url.path(), format!("{}{}", base_path.trim_end_matches('/'), path), "path changed in {url}");
    for (key, _) in url.query_pairs() {
        assert!(QUERY_KEYS.contains(&key.as_ref()) || key == "rerank", "unexpected query key {key}");
    }
    assert_eq!(request.body.is_none(), is_get);

    assert!(!url.as_str().contains(MARKER), "credential in the URL");
    if let Some(body) = &request.body {
        assert!(!String::from_utf8_lossy(body.as_bytes()).contains(MARKER), "credential in the body");
        assert!(body.value().is_object(), "the body is a JSON object");
    }
    let carrying: Vec<_> = request.headers.iter().filter(|(_, value)| value.contains(MARKER)).collect();
    assert_eq!(carrying.len(), 1, "the credential must be in exactly one header");
    assert!(matches!(carrying[0].0, "authorization" | "x-api-key"));
    assert!(!format!("{request:?}").contains(MARKER), "Debug shows the credential");
});
