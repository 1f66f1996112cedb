//! Every built-in dialect's search fixtures, replayed against a real local upstream.
//!
//! For each fixture the engine must send exactly the fixture's request (method, path, query string,
//! the headers memgate controls, JSON body) and make exactly the fixture's items of its response.
//!
//! Header set: everything the server received except `host` and `content-length` (added by the
//! HTTP layer) must equal the fixture's headers. The engine sets no `user-agent` and asks for no
//! compression, so nothing else may appear.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use memgate_crds::validation::credential_value;
use memgate_crds::{
    AuthScheme, Collection, ContentField, DialectPresetSpec, IdField, IdLocation, LimitField, QueryLocation,
    ResponseSpec, Scope, ScoreField, SearchMethod, SearchSpec, TitleField, UpdatedAtField, UriField,
};
use memgate_gateway::engine::{Engine, EngineConfig, Item, Target};
use memgate_presets::{ContentEncoding, ExpectedItem, ExpectedRequest, SearchFixture};
use serde_json::json;
use support::{CREDENTIAL, Recorded, Reply, Server};

const TRANSPORT_HEADERS: [&str; 2] = ["host", "content-length"];

fn as_expected(item: &Item) -> ExpectedItem {
    ExpectedItem {
        id: item.id.clone(),
        content: item.content.clone(),
        title: item.title.clone(),
        uri: item.uri.clone(),
        score: item.score,
        updated_at: item.updated_at.clone(),
    }
}

/// Assert that `got` is exactly `want`.
fn assert_request(context: &str, got: &Recorded, want: &ExpectedRequest) {
    assert_eq!(got.method, want.method, "{context}: method");
    assert_eq!(got.path, want.path, "{context}: path");
    let query: Vec<(String, String)> = got
        .query
        .as_deref()
        .map(|raw| url::form_urlencoded::parse(raw.as_bytes()).into_owned().collect())
        .unwrap_or_default();
    assert_eq!(query, want.query, "{context}: query string");
    if want.query.is_empty() {
        assert_eq!(got.query, None, "{context}: no query string at all");
    }

    let controlled: Vec<&(String, String)> =
        got.headers.iter().filter(|(name, _)| !TRANSPORT_HEADERS.contains(&name.as_str())).collect();
    let headers: BTreeMap<String, String> = controlled.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
    assert_eq!(headers.len(), controlled.len(), "{context}: a header was sent twice: {:?}", got.headers);
    assert_eq!(headers, want.headers, "{context}: headers");

    match &want.body {
        Some(body) => {
            let sent: serde_json::Value = serde_json::from_slice(&got.body).expect("request body is JSON");
            assert_eq!(&sent, body, "{context}: body");
        }
        None => {
            assert!(got.body.is_empty(), "{context}: no body");
            assert!(!got.headers.iter().any(|(name, _)| name == "content-length" || name == "transfer-encoding"));
        }
    }
}

/// Serve the fixture's answer, run the search with `target` pointed at the server, check everything.
async fn replay(
    engine: &Engine,
    dialect: &DialectPresetSpec,
    encoding: ContentEncoding,
    fixture: &SearchFixture,
    mut target: Target,
) {
    let context = &fixture.name;
    let answer = fixture.response.clone();
    let server = Server::always(Reply::Full {
        status: answer.status,
        headers: answer.headers.into_iter().collect(),
        body: serde_json::to_vec(&answer.body).expect("serializes"),
    })
    .await;
    target.origin = server.origin();
    let result = engine.search("fixture", &target, dialect, encoding, &fixture.query, fixture.limit).await;

    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{context}: exactly one upstream request");
    assert_request(context, &requests[0], &fixture.request);
    if (200..300).contains(&fixture.response.status) {
        let items: Vec<ExpectedItem> = result.expect("fixture search succeeds").iter().map(as_expected).collect();
        assert_eq!(items, fixture.expect.items, "{context}: items");
    } else {
        assert!(result.is_err(), "{context}: a non-2xx answer fails");
    }
}

#[tokio::test]
async fn every_builtin_search_fixture_matches_the_contract() {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let mut replayed = 0;
    for builtin in memgate_presets::all() {
        let fixtures = memgate_presets::fixtures(&builtin.id).expect("every built-in ships fixtures");
        assert!(!fixtures.search.is_empty(), "{}: at least one search fixture", builtin.id);
        for fixture in &fixtures.search {
            let provider = &fixtures.provider;
            let credential = credential_value("fixture", provider.credential.as_bytes()).expect("fixture credential");
            let target = Target {
                origin: String::new(),
                base_path: provider.base_path.clone(),
                scope: provider.scope.clone(),
                credential,
                timeout: Duration::from_secs(30),
                max_in_flight: None,
                urls: memgate_gateway::engine::UrlCache::default(),
            };
            replay(&engine, &builtin.spec, builtin.content_encoding, fixture, target).await;
            replayed += 1;
        }
    }
    assert!(replayed >= memgate_presets::all().len());
}

#[tokio::test]
async fn custom_get_dialect_sends_only_a_query_string() {
    let dialect = DialectPresetSpec {
        dialect_version: 1,
        auth: AuthScheme::AuthorizationBearer,
        search: SearchSpec {
            method: SearchMethod::Get,
            path: "/api/v1/memories/search".into(),
            query_location: QueryLocation::Query,
            user_id_location: IdLocation::Query,
            agent_id_location: IdLocation::Omit,
            app_id_location: IdLocation::Omit,
            limit_field: LimitField::Limit,
            threshold: Some(0.5),
            rerank: Some(true),
        },
        response: ResponseSpec {
            collection: Collection::RootArray,
            id_field: IdField::MemoryId,
            content_field: ContentField::Text,
            title_field: TitleField::Title,
            uri_field: UriField::Uri,
            score_field: ScoreField::Omit,
            updated_at_field: UpdatedAtField::UpdatedAtCamel,
        },
    };
    let fixture = SearchFixture {
        name: "custom GET".into(),
        query: "café & crème = 100%".into(),
        limit: 2,
        request: ExpectedRequest {
            method: "GET".into(),
            path: "/base/api/v1/memories/search".into(),
            query: vec![
                ("query".into(), "café & crème = 100%".into()),
                ("user_id".into(), "user 1".into()),
                ("limit".into(), "2".into()),
                ("threshold".into(), "0.5".into()),
                ("rerank".into(), "true".into()),
            ],
            headers: BTreeMap::from([
                ("accept".into(), "application/json".into()),
                ("authorization".into(), format!("Bearer {CREDENTIAL}")),
            ]),
            body: None,
        },
        response: serde_json::from_value(json!({"status": 200, "body": [
            {"memory_id": "a", "text": "A", "title": "Title A", "uri": "https://docs/a", "score": 0.9, "updatedAt": "2026-01-01"},
            {"id": "b", "text": "wrong id field"},
            {"memory_id": "c", "text": "C"},
            {"memory_id": "d", "text": "beyond the limit"}
        ]}))
        .expect("answer"),
        expect: serde_json::from_value(json!({"items": [
            {"id": "a", "content": "A", "title": "Title A", "uri": "https://docs/a", "updatedAt": "2026-01-01"},
            {"id": "c", "content": "C"}
        ]}))
        .expect("expectation"),
    };
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let scope = Scope { user_id: Some("user 1".into()), ..Scope::default() };
    let target = support::target("", "/base/", scope, Duration::from_secs(30));
    replay(&engine, &dialect, ContentEncoding::Plain, &fixture, target).await;
}
