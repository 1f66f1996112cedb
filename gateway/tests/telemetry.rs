//! The engine's log events carry the provider name and the outcome only: never the query, the
//! endpoint, the credential or an upstream body.

mod support;

use std::fmt::{Debug, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memgate_crds::Scope;
use memgate_gateway::engine::{Engine, EngineConfig};
use memgate_presets::ContentEncoding;
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records every field of every event emitted by this crate, as `name=value` text.
struct Capture(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if event.metadata().target().starts_with("memgate_gateway") {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            self.0.lock().expect("lock").push(fields.0);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test]
async fn events_name_the_provider_and_outcome_only() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let _guard = tracing::dispatcher::set_default(&tracing::Dispatch::new(Capture(Arc::clone(&events))));

    let query = "confidential-query-7f3a";
    let secret_body = "upstream-detail-9c1e";
    let ok = Server::always(Reply::json(&json!({"results": [{"id": "a", "memory": secret_body}]}))).await;
    let denied = Server::always(Reply::status_json(401, &json!({"detail": secret_body}))).await;
    let dialect = &memgate_presets::get("mem0-platform-v3").expect("built-in").spec;
    let engine = Engine::new(EngineConfig::default()).expect("engine");
    let scope = Scope { app_id: Some("app".into()), ..Scope::default() };
    for (server, provider) in [(&ok, "team-a/mem0"), (&denied, "team-b/mem0")] {
        let target = support::target(&server.origin(), "", scope.clone(), Duration::from_secs(30));
        let _ = engine.search(provider, &target, dialect, ContentEncoding::Plain, query, 5).await;
    }

    let events = events.lock().expect("lock").clone();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(events[0].contains("provider=\"team-a/mem0\"") && events[0].contains("outcome=\"ok\""), "{events:?}");
    assert!(events[1].contains("provider=\"team-b/mem0\"") && events[1].contains("error_code=\"unauthorized\""));
    for event in &events {
        for forbidden in [query, CREDENTIAL, secret_body, "127.0.0.1", "http://", "app"] {
            assert!(!event.contains(forbidden), "{event} contains {forbidden}");
        }
    }
}
