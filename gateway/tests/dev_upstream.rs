//! The development upstream ([`memgate_gateway::dev_upstream`]) served on 127.0.0.1 and driven over
//! real HTTP: the mem0 routes, scoping, limits, auth, error shapes, the dialect's contract fixtures,
//! and memgate's own engine searching it.

use std::collections::BTreeSet;
use std::time::Duration;

use memgate_crds::Scope;
use memgate_crds::validation::credential_value;
use memgate_gateway::dev_upstream::{self, DEFAULT_TOP_K, MAX_BODY_BYTES};
use memgate_gateway::engine::{Engine, EngineConfig, Target};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const KEY: &str = "dev-upstream-test-key";
const DIALECT: &str = "mem0-oss-rest-2026-08";

/// A running development upstream; stopped when dropped.
struct Upstream {
    origin: String,
    key: String,
    client: reqwest::Client,
    task: JoinHandle<std::io::Result<()>>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An answer: status and JSON body (`Null` when the body is not JSON).
struct Answer {
    status: u16,
    body: Value,
}

impl Upstream {
    async fn start() -> Self {
        Self::start_with_key(KEY).await
    }

    async fn start_with_key(key: &str) -> Self {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let origin = format!("http://{}", listener.local_addr().expect("address"));
        let task = tokio::spawn(dev_upstream::serve(listener, key.to_string()));
        let client = reqwest::Client::builder().build().expect("client");
        Self { origin, key: key.to_string(), client, task }
    }

    /// Sends `body` bytes with `headers` (no key unless among them).
    async fn raw(&self, method: reqwest::Method, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Answer {
        let mut request = self.client.request(method, format!("{}{path}", self.origin)).body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let bytes = response.bytes().await.expect("body");
        Answer { status, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) }
    }

    /// POSTs `body` as JSON with the right key.
    async fn post(&self, path: &str, body: &Value) -> Answer {
        let headers = [("x-api-key", self.key.as_str()), ("content-type", "application/json")];
        self.raw(reqwest::Method::POST, path, &headers, serde_json::to_vec(body).expect("serializes")).await
    }

    async fn get(&self, path_and_query: &str) -> Answer {
        self.raw(reqwest::Method::GET, path_and_query, &[("x-api-key", self.key.as_str())], Vec::new()).await
    }

    /// Adds `contents` as user messages for `scope` (user_id / agent_id / run_id fields); expects 200.
    async fn add(&self, scope: Value, contents: &[&str]) -> Vec<String> {
        let mut body = json!({"messages": contents.iter().map(|c| json!({"role": "user", "content": c})).collect::<Vec<_>>(), "infer": false});
        merge(&mut body, scope);
        let answer = self.post("/memories", &body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        results(&answer).iter().map(|r| r["id"].as_str().expect("id").to_string()).collect()
    }

    /// Searches `query` with `filters`; returns the result memories' texts (expects 200).
    async fn search(&self, body: Value) -> Vec<String> {
        let answer = self.post("/search", &body).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        results(&answer).iter().map(|r| r["memory"].as_str().expect("memory").to_string()).collect()
    }
}

fn merge(into: &mut Value, from: Value) {
    if let (Value::Object(into), Value::Object(from)) = (into, from) {
        into.extend(from);
    }
}

fn results(answer: &Answer) -> &Vec<Value> {
    answer.body["results"].as_array().expect("results array")
}

fn is_uuid_shaped(id: &str) -> bool {
    let groups: Vec<usize> = id.split('-').map(str::len).collect();
    groups == [8, 4, 4, 4, 12] && id.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

#[tokio::test]
async fn added_memories_are_found_by_search() {
    let upstream = Upstream::start().await;
    let add = upstream
        .post(
            "/memories",
            &json!({
                "messages": [
                    {"role": "user", "content": "Tag before release."},
                    {"role": "assistant", "content": "The build uses cargo."}
                ],
                "user_id": "alice", "agent_id": "qwen-code", "infer": false,
                "metadata": {"source": "memgate"}
            }),
        )
        .await;
    assert_eq!(add.status, 200);
    let added = results(&add);
    assert_eq!(added.len(), 2);
    assert_eq!(added[0]["memory"], "Tag before release.");
    assert_eq!(added[1]["memory"], "The build uses cargo.");
    for result in added {
        assert_eq!(result["event"], "ADD");
        assert!(is_uuid_shaped(result["id"].as_str().expect("id")), "{result}");
        assert_eq!(result.as_object().expect("object").len(), 3, "exactly id, memory, event: {result}");
    }
    assert_ne!(added[0]["id"], added[1]["id"]);

    let search = upstream
        .post(
            "/search",
            &json!({"query": "release checklist", "filters": {"user_id": "alice", "agent_id": "qwen-code"}}),
        )
        .await;
    assert_eq!(search.status, 200);
    let found = results(&search);
    assert_eq!(found.len(), 1, "{}", search.body);
    let hit = &found[0];
    assert_eq!(hit["id"], added[0]["id"]);
    assert_eq!(hit["memory"], "Tag before release.");
    assert_eq!(hit["score"], 0.5);
    assert_eq!(hit["metadata"], json!({"source": "memgate"}));
    assert_eq!(hit["user_id"], "alice");
    assert_eq!(hit["agent_id"], "qwen-code");
    assert!(hit["hash"].as_str().is_some_and(|h| !h.is_empty()));
    let created = hit["created_at"].as_str().expect("created_at");
    assert!(created.len() == 20 && created.ends_with('Z') && created.as_bytes()[10] == b'T', "{created}");
    assert_eq!(hit["updated_at"], hit["created_at"]);
}

#[tokio::test]
async fn exact_repeats_are_not_deduplicated() {
    let upstream = Upstream::start().await;
    let first = upstream.add(json!({"user_id": "u"}), &["The build uses cargo."]).await;
    let second = upstream.add(json!({"user_id": "u"}), &["The build uses cargo."]).await;
    assert_ne!(first, second);
    let found = upstream.search(json!({"query": "cargo", "filters": {"user_id": "u"}})).await;
    assert_eq!(found, ["The build uses cargo.", "The build uses cargo."]);
}

#[tokio::test]
async fn scopes_are_isolated() {
    let upstream = Upstream::start().await;
    upstream.add(json!({"user_id": "alice", "agent_id": "a1"}), &["alice secret plan"]).await;
    upstream.add(json!({"user_id": "bob", "agent_id": "a1"}), &["bob public plan"]).await;

    assert_eq!(upstream.search(json!({"query": "plan", "filters": {"user_id": "bob"}})).await, ["bob public plan"]);
    assert_eq!(
        upstream.search(json!({"query": "secret plan", "filters": {"user_id": "bob"}})).await,
        ["bob public plan"]
    );
    assert_eq!(
        upstream.search(json!({"query": "plan", "filters": {"user_id": "alice", "agent_id": "a2"}})).await,
        [""; 0]
    );
    assert_eq!(upstream.search(json!({"query": "plan", "filters": {"user_id": "carol"}})).await, [""; 0]);
    // Every given id must match; agent_id alone spans users.
    assert_eq!(upstream.search(json!({"query": "plan", "filters": {"agent_id": "a1"}})).await.len(), 2);
}

#[tokio::test]
async fn ids_at_the_body_root_scope_a_search() {
    let upstream = Upstream::start().await;
    upstream.add(json!({"user_id": "alice"}), &["alice note"]).await;
    upstream.add(json!({"user_id": "bob"}), &["bob note"]).await;
    assert_eq!(upstream.search(json!({"query": "note", "user_id": "bob"})).await, ["bob note"]);
    // The root id wins over the one in `filters`.
    assert_eq!(
        upstream.search(json!({"query": "note", "user_id": "bob", "filters": {"user_id": "alice"}})).await,
        ["bob note"]
    );
}

#[tokio::test]
async fn a_write_without_any_id_is_400() {
    let upstream = Upstream::start().await;
    for body in [
        json!({"messages": [{"role": "user", "content": "x"}]}),
        json!({"messages": [{"role": "user", "content": "x"}], "user_id": "", "metadata": {"a": 1}}),
        json!({"messages": [{"role": "user", "content": "x"}], "user_id": null}),
    ] {
        let answer = upstream.post("/memories", &body).await;
        assert_eq!(answer.status, 400, "{body}");
        assert!(answer.body["detail"].as_str().is_some_and(|d| d.contains("user_id")), "{}", answer.body);
    }
    let search = upstream.post("/search", &json!({"query": "x", "filters": {}})).await;
    assert_eq!(search.status, 400);
    assert!(search.body["detail"].is_string());
    assert_eq!(upstream.get("/memories").await.status, 400);
}

#[tokio::test]
async fn a_missing_or_wrong_key_is_401() {
    let upstream = Upstream::start().await;
    let body = serde_json::to_vec(&json!({"query": "x", "filters": {"user_id": "u"}})).expect("serializes");
    for headers in [
        vec![],
        vec![("x-api-key", "wrong")],
        vec![("x-api-key", "")],
        vec![("authorization", "Bearer wrong")],
        vec![("authorization", KEY)],
        vec![("x-api-key", "dev-upstream-test-ke")],
    ] {
        for path in ["/search", "/memories"] {
            let answer = upstream.raw(reqwest::Method::POST, path, &headers, body.clone()).await;
            assert_eq!(answer.status, 401, "{path} {headers:?}");
            assert!(answer.body["detail"].is_string(), "{}", answer.body);
        }
        let answer = upstream.raw(reqwest::Method::GET, "/memories?user_id=u", &headers, Vec::new()).await;
        assert_eq!(answer.status, 401, "GET /memories {headers:?}");
    }
    let bearer = format!("Bearer {KEY}");
    let answer = upstream.raw(reqwest::Method::POST, "/search", &[("authorization", &bearer)], body).await;
    assert_eq!(answer.status, 200, "a Bearer key is accepted: {}", answer.body);
}

#[tokio::test]
async fn top_k_is_respected_and_defaults_to_ten() {
    let upstream = Upstream::start().await;
    let contents: Vec<String> = (0..15).map(|i| format!("release note {i}")).collect();
    let contents: Vec<&str> = contents.iter().map(String::as_str).collect();
    upstream.add(json!({"user_id": "u"}), &contents).await;
    upstream.add(json!({"user_id": "u"}), &["release checklist"]).await;

    let top = upstream.search(json!({"query": "release checklist", "filters": {"user_id": "u"}, "top_k": 3})).await;
    // Best first, then insertion order among equal scores.
    assert_eq!(top, ["release checklist", "release note 0", "release note 1"]);
    let default = upstream.search(json!({"query": "release", "filters": {"user_id": "u"}})).await;
    assert_eq!(default.len(), DEFAULT_TOP_K);
    assert_eq!(default[0], "release note 0");
    let none = upstream.search(json!({"query": "release", "filters": {"user_id": "u"}, "top_k": 0})).await;
    assert!(none.is_empty());
}

#[tokio::test]
async fn threshold_and_zero_scores_drop_results() {
    let upstream = Upstream::start().await;
    upstream.add(json!({"agent_id": "a"}), &["alpha beta gamma", "alpha", "delta"]).await;
    let scores = |answer: &Answer| -> Vec<f64> { results(answer).iter().filter_map(|r| r["score"].as_f64()).collect() };

    let all = upstream.post("/search", &json!({"query": "alpha beta", "filters": {"agent_id": "a"}})).await;
    assert_eq!(scores(&all), [1.0, 0.5]);
    let above =
        upstream.post("/search", &json!({"query": "alpha beta", "filters": {"agent_id": "a"}, "threshold": 0.6})).await;
    assert_eq!(scores(&above), [1.0]);
}

#[tokio::test]
async fn metadata_filters_and_run_ids_narrow_a_search() {
    let upstream = Upstream::start().await;
    for (run, kind, content) in
        [("r1", "fact", "deploy on friday"), ("r1", "pref", "deploy with care"), ("r2", "fact", "deploy later")]
    {
        let body = json!({"messages": [{"role": "user", "content": content}], "user_id": "u", "run_id": run, "metadata": {"kind": kind}});
        assert_eq!(upstream.post("/memories", &body).await.status, 200);
    }
    let found =
        upstream.search(json!({"query": "deploy", "filters": {"user_id": "u", "run_id": "r1", "kind": "fact"}})).await;
    assert_eq!(found, ["deploy on friday"]);
}

#[tokio::test]
async fn system_messages_are_not_stored() {
    let upstream = Upstream::start().await;
    let body = json!({"messages": [{"role": "system", "content": "you are helpful"}, {"role": "user", "content": "helpful fact"}], "user_id": "u"});
    let answer = upstream.post("/memories", &body).await;
    assert_eq!(answer.status, 200);
    assert_eq!(results(&answer).len(), 1);
    assert_eq!(upstream.search(json!({"query": "helpful", "user_id": "u"})).await, ["helpful fact"]);
}

#[tokio::test]
async fn malformed_or_mistyped_bodies_are_422() {
    let upstream = Upstream::start().await;
    let headers = [("x-api-key", KEY), ("content-type", "application/json")];
    for (path, body) in [
        ("/memories", &b"{not json"[..]),
        ("/search", b"{\"query\": \"x\", "),
        ("/search", b""),
        ("/memories", br#"{"messages": "not a list", "user_id": "u"}"#),
        ("/memories", br#"{"user_id": "u"}"#),
        ("/search", br#"{"filters": {"user_id": "u"}}"#),
        ("/search", br#"{"query": "x", "filters": {"user_id": 7}}"#),
        ("/search", br#"{"query": "x", "filters": {"user_id": "u"}, "top_k": -1}"#),
        ("/search", b"[]"),
    ] {
        let answer = upstream.raw(reqwest::Method::POST, path, &headers, body.to_vec()).await;
        assert_eq!(answer.status, 422, "{path} {}", String::from_utf8_lossy(body));
        let detail = answer.body["detail"].as_array().expect("FastAPI detail list");
        assert!(detail[0]["msg"].is_string() && detail[0]["loc"][0] == "body", "{}", answer.body);
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let upstream = Upstream::start().await;
    let content = "x".repeat(MAX_BODY_BYTES);
    let answer =
        upstream.post("/memories", &json!({"messages": [{"role": "user", "content": content}], "user_id": "u"})).await;
    assert_eq!(answer.status, 413);
    assert!(answer.body["detail"].is_string());
}

#[tokio::test]
async fn listing_returns_a_scope_in_insertion_order() {
    let upstream = Upstream::start().await;
    upstream.add(json!({"user_id": "a b"}), &["first", "second"]).await;
    upstream.add(json!({"user_id": "other"}), &["elsewhere"]).await;
    let answer = upstream.get("/memories?user_id=a%20b").await;
    assert_eq!(answer.status, 200);
    let texts: Vec<&str> = results(&answer).iter().filter_map(|r| r["memory"].as_str()).collect();
    assert_eq!(texts, ["first", "second"]);
    assert!(results(&answer).iter().all(|r| r.get("score").is_none()));
}

#[tokio::test]
async fn unknown_routes_are_404_and_wrong_methods_405() {
    let upstream = Upstream::start().await;
    let answer = upstream.get("/nope").await;
    assert_eq!(answer.status, 404);
    assert_eq!(answer.body, json!({"detail": "Not Found"}));
    assert_eq!(upstream.get("/search").await.status, 405);
}

#[tokio::test]
async fn an_empty_key_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let error = dev_upstream::serve(listener, String::new()).await.expect_err("an empty key is refused");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn the_dialect_fixture_requests_are_accepted() {
    let fixtures = memgate_presets::fixtures(DIALECT).expect("fixtures");
    let upstream = Upstream::start_with_key(&fixtures.provider.credential).await;
    let base = fixtures.provider.base_path.trim_end_matches('/');
    let send = |request: &memgate_presets::ExpectedRequest| {
        let path = request.path.strip_prefix(base).expect("fixture path under the base path").to_string();
        let headers: Vec<(String, String)> = request.headers.clone().into_iter().collect();
        let body = serde_json::to_vec(request.body.as_ref().expect("fixture body")).expect("serializes");
        assert_eq!(request.method, "POST");
        let upstream = &upstream;
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            upstream.raw(reqwest::Method::POST, &path, &headers, body).await
        }
    };

    let mut accepted = 0;
    for fixture in fixtures.ingest.iter().filter(|f| f.expect.status == "accepted") {
        let answer = send(&fixture.request).await;
        assert_eq!(answer.status, 200, "{}: {}", fixture.name, answer.body);
        let keys = |item: &Value| item.as_object().expect("object").keys().cloned().collect::<BTreeSet<_>>();
        let want = &fixture.response.body["results"][0];
        let got = &results(&answer)[0];
        assert_eq!(keys(got), keys(want), "{}: result fields", fixture.name);
        assert_eq!(got["memory"], json!(fixture.unit.content));
        assert_eq!(got["event"], "ADD");
        accepted += 1;
    }
    assert!(accepted >= 1);

    for fixture in &fixtures.search {
        // Seed the fixture's scope with its first expected item so the answer is not empty.
        let filters = &fixture.request.body.as_ref().expect("fixture body")["filters"];
        let mut seed = json!({"messages": [{"role": "user", "content": fixture.expect.items[0].content}]});
        merge(&mut seed, filters.clone());
        assert_eq!(upstream.post("/memories", &seed).await.status, 200);

        let answer = send(&fixture.request).await;
        assert_eq!(answer.status, 200, "{}: {}", fixture.name, answer.body);
        let got = results(&answer);
        assert!(!got.is_empty(), "{}: the seeded memory is found", fixture.name);
        let fields = got[0].as_object().expect("object");
        for name in fixture.response.body["results"][0].as_object().expect("object").keys() {
            assert!(fields.contains_key(name), "{}: result field {name} in {}", fixture.name, got[0]);
        }
    }
}

#[tokio::test]
async fn memgate_engine_searches_the_dev_upstream() {
    let builtin = memgate_presets::get(DIALECT).expect("built-in dialect");
    let upstream = Upstream::start().await;
    upstream.add(json!({"user_id": "repo", "agent_id": "qwen-code"}), &["Tag before release.", "Unrelated."]).await;
    upstream.add(json!({"user_id": "repo", "agent_id": "other"}), &["Release elsewhere."]).await;

    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let target = Target {
        origin: upstream.origin.clone(),
        base_path: "/".into(),
        scope: Scope { user_id: Some("repo".into()), agent_id: Some("qwen-code".into()), ..Scope::default() },
        credential: credential_value("dev", KEY.as_bytes()).expect("credential"),
        timeout: Duration::from_secs(30),
        max_in_flight: None,
        urls: memgate_gateway::engine::UrlCache::default(),
    };
    let items = engine
        .search("dev", &target, &builtin.spec, builtin.content_encoding, "release checklist", 5)
        .await
        .expect("search succeeds");
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].content, "Tag before release.");
    assert_eq!(items[0].score, Some(0.5));
    assert!(items[0].updated_at.is_some());
}
