//! The MCP search runs against exactly the provider `mcp_guard` authorised the caller against
//! (the `AuthorizedProvider` request extension), never a fresh lookup in a possibly newer config
//! snapshot; without it, or for another provider, it fails closed without an upstream request.
//! Real local upstreams count the requests.

mod ingest_support;
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use memgate_crds::Scope;
use memgate_gateway::auth::{Authenticator, Caller};
use memgate_gateway::config::{ConfigHandle, Provider, Snapshot};
use memgate_gateway::engine::{Engine, EngineConfig, EngineError};
use memgate_gateway::mcp::ProviderSearch;
use memgate_gateway::state::{AppState, AuthorizedProvider, Settings};
use serde_json::json;
use support::{CREDENTIAL, Reply, Server};

fn mcp_provider(name: &str, origin: &str) -> Arc<Provider> {
    let scope = Scope { user_id: Some("repository-memory".into()), agent_id: Some("qwen-code".into()), app_id: None };
    let target = ingest_support::target(origin, "", scope, CREDENTIAL, Duration::from_secs(10));
    let mut provider = ingest_support::provider(name, "mem0-oss-rest-2026-08", target);
    provider.mcp = true;
    Arc::new(provider)
}

fn extensions(caller: bool, authorized: Option<&Arc<Provider>>) -> http::Extensions {
    let mut extensions = http::Extensions::new();
    if caller {
        extensions.insert(Caller::default());
    }
    if let Some(provider) = authorized {
        extensions.insert(AuthorizedProvider(Arc::clone(provider)));
    }
    extensions
}

#[tokio::test]
async fn the_search_uses_the_authorised_provider_not_the_current_snapshot() {
    let empty = Reply::json(&json!({"results": []}));
    let (authorised, current) = (Server::always(empty.clone()).await, Server::always(empty).await);
    // The guard authorised against snapshot A; a reload has since installed snapshot B, where
    // `repo-memory` points elsewhere (and could have other access rules).
    let in_a = mcp_provider("repo-memory", &authorised.origin());
    let in_b = mcp_provider("repo-memory", &current.origin());
    let snapshot = Snapshot { providers: BTreeMap::from([("repo-memory".to_string(), in_b)]), disabled: Vec::new() };
    let state = AppState::new(
        Arc::new(ConfigHandle::new(snapshot)),
        Engine::new(EngineConfig::default()).expect("engine"),
        Authenticator::new(None),
        Settings::default(),
    );

    let items = state
        .search_in_request("repo-memory", "release".into(), 5, &extensions(true, Some(&in_a)))
        .await
        .expect("searched");
    assert!(items.is_empty());
    assert_eq!((authorised.requests().len(), current.requests().len()), (1, 0), "only the authorised provider");

    // Fail closed: no authorised provider, no caller, or another provider than the authorised one.
    let other = mcp_provider("other-memory", &authorised.origin());
    for (caller, authorized) in [(true, None), (false, Some(&in_a)), (true, Some(&other))] {
        let refused =
            state.search_in_request("repo-memory", "release".into(), 5, &extensions(caller, authorized)).await;
        assert_eq!(
            refused,
            Err(EngineError::InvalidRequest),
            "caller {caller}, authorised {:?}",
            authorized.map(|p| &p.name)
        );
    }
    assert_eq!((authorised.requests().len(), current.requests().len()), (1, 0), "refusals send nothing");
}
