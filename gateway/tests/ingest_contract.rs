//! Every built-in dialect's `ingest:` fixtures, replayed against a real local upstream.
//!
//! For each fixture the unit is written twice, each time to a fresh server answering the fixture's
//! response: once through [`Engine::add`] and once through [`ingest`] (one-unit request, fresh
//! ledger). Both must send exactly the fixture's request (method, path, no query string, the
//! headers memgate controls, JSON body) and end in the fixture's unit status.

mod ingest_support;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use memgate_gateway::engine::{AddUnit, Engine, EngineConfig, WriteOutcome};
use memgate_gateway::ingest::{IngestStatus, MemoryLedger, UnitStatus, ingest};
use memgate_presets::{ExpectedRequest, IngestFixture};
use support::{Recorded, Reply, Server};

const TRANSPORT_HEADERS: [&str; 2] = ["host", "content-length"];

fn assert_request(context: &str, got: &Recorded, want: &ExpectedRequest) {
    assert_eq!(got.method, want.method, "{context}: method");
    assert_eq!(got.path, want.path, "{context}: path");
    assert_eq!(got.query, None, "{context}: no query string");
    assert!(want.query.is_empty(), "{context}: ingest fixtures have no query string");
    let controlled: Vec<&(String, String)> =
        got.headers.iter().filter(|(name, _)| !TRANSPORT_HEADERS.contains(&name.as_str())).collect();
    let headers: BTreeMap<String, String> = controlled.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
    assert_eq!(headers.len(), controlled.len(), "{context}: a header was sent twice");
    assert_eq!(headers, want.headers, "{context}: headers");
    let sent: serde_json::Value = serde_json::from_slice(&got.body).expect("request body is JSON");
    assert_eq!(Some(&sent), want.body.as_ref(), "{context}: body");
}

async fn fixture_server(fixture: &IngestFixture) -> Server {
    let answer = fixture.response.clone();
    Server::always(Reply::Full {
        status: answer.status,
        headers: answer.headers.into_iter().collect(),
        body: serde_json::to_vec(&answer.body).expect("serializes"),
    })
    .await
}

fn status_name(outcome: &WriteOutcome) -> &'static str {
    match outcome {
        WriteOutcome::Accepted => "accepted",
        WriteOutcome::Rejected { .. } => "rejected",
        WriteOutcome::Degraded { .. } => "degraded",
    }
}

#[tokio::test]
async fn every_builtin_ingest_fixture_matches_the_contract() {
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let mut replayed = 0;
    for builtin in memgate_presets::all() {
        let fixtures = memgate_presets::fixtures(&builtin.id).expect("every built-in ships fixtures");
        let Some(contract) = &builtin.write else {
            assert!(fixtures.ingest.is_empty(), "{}: ingest fixtures without a write contract", builtin.id);
            continue;
        };
        assert!(!fixtures.ingest.is_empty(), "{}: a write contract needs ingest fixtures", builtin.id);
        for fixture in &fixtures.ingest {
            let context = format!("{} / {}", builtin.id, fixture.name);
            let settings = &fixtures.provider;
            let unit = AddUnit {
                event_id: &fixture.unit.event_id,
                unit_type: &fixture.unit.unit_type,
                content: &fixture.unit.content,
            };

            // The engine call on its own.
            let server = fixture_server(fixture).await;
            let target = ingest_support::target(
                &server.origin(),
                &settings.base_path,
                settings.scope.clone(),
                &settings.credential,
                Duration::from_secs(30),
            );
            let outcome = engine
                .add("fixture", &target, builtin.spec.auth, contract, &unit)
                .await
                .expect("no call-level failure");
            let requests = server.requests();
            assert_eq!(requests.len(), 1, "{context}: exactly one upstream request");
            assert_request(&context, &requests[0], &fixture.request);
            assert_eq!(status_name(&outcome), fixture.expect.status, "{context}: engine outcome");

            // The same unit through the ingest entry point.
            let server = fixture_server(fixture).await;
            let target = ingest_support::target(
                &server.origin(),
                &settings.base_path,
                settings.scope.clone(),
                &settings.credential,
                Duration::from_secs(30),
            );
            let provider = ingest_support::provider("fixture", &builtin.id, target);
            let mut one = ingest_support::unit(&fixture.unit.event_id, &fixture.unit.content);
            one.unit_type = fixture.unit.unit_type.clone();
            let request = ingest_support::request(&fixture.unit.event_id, vec![one]);
            let ledger = MemoryLedger::default();
            let result = ingest(&engine, &provider, &ledger, request).await.expect("no call-level failure");
            let requests = server.requests();
            assert_eq!(requests.len(), 1, "{context}: exactly one upstream request through ingest");
            assert_request(&context, &requests[0], &fixture.request);
            assert_eq!(result.unit_results.len(), 1);
            let unit_result = &result.unit_results[0];
            assert_eq!(unit_result.unit_id, fixture.unit.event_id, "{context}: unit id is the event id");
            let want = match fixture.expect.status.as_str() {
                "accepted" => UnitStatus::Accepted,
                "rejected" => UnitStatus::Rejected,
                "degraded" => UnitStatus::Degraded,
                other => panic!("{context}: unknown expected status {other}"),
            };
            assert_eq!(unit_result.status, want, "{context}: unit status");
            let overall = if want == UnitStatus::Accepted { IngestStatus::Ok } else { IngestStatus::Error };
            assert_eq!(result.status, overall, "{context}: overall status");
            assert_eq!(result.provider, "fixture");
            replayed += 1;
        }
    }
    assert!(replayed >= 3, "every writable built-in replayed at least one ingest fixture, got {replayed}");
}
