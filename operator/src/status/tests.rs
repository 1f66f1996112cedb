//! Conditions from verdicts and rollouts, on plain values.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use serde_json::json;

use super::*;
use crate::validate::{ProviderVerdict, Refs};

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds).expect("time"))
}

fn provider(generation: i64, status: MemoryProviderStatus) -> ProviderEntry {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "memgate.io/v1alpha1", "kind": "MemoryProvider",
        "metadata": {"name": "repo-memory", "namespace": "agents", "generation": generation, "resourceVersion": "1"},
        "spec": {
            "dialect": {"builtin": "mem0-oss-rest-2026-08"},
            "endpoint": {"origin": "https://mem0.example.com"},
            "credentials": {"secretRef": {"name": "mem0-api", "key": "api-key"}},
            "scope": {"userId": "u", "agentId": "a"},
            "nexent": {"search": true},
            "access": {"anonymous": true}},
    }))
    .expect("object");
    let mut entry = ProviderEntry::from_dynamic(&object).expect("named");
    entry.status = status;
    entry
}

fn served() -> ProviderVerdict {
    ProviderVerdict {
        accepted: Ok(()),
        refs: Refs::Resolved,
        dialect: Some("mem0-oss-rest-2026-08".into()),
        preset: None,
        enabled: true,
    }
}

fn gateway(rollout: Rollout, available: i32) -> GatewayState {
    GatewayState { rollout, available, base_url: "http://memgate-gateway.agents.svc:8080".into(), replica_note: None }
}

fn ready(status: &MemoryProviderStatus) -> &Condition {
    status.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready")
}

#[test]
fn served_and_rolled_out_is_ready_with_both_endpoints() {
    let status =
        provider_status(&provider(1, Default::default()), &served(), Some(&gateway(Rollout::Complete, 2)), &at(0));
    assert_eq!(status.observed_generation, Some(1));
    let types: Vec<(&str, &str, &str)> =
        status.conditions.iter().map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str())).collect();
    assert_eq!(
        types,
        [
            ("Accepted", "True", "Accepted"),
            ("ResolvedRefs", "True", "ResolvedRefs"),
            ("Ready", "True", "Ready"),
            ("Reconciling", "False", "Ready"),
            ("Stalled", "False", "Ready"),
        ]
    );
    let endpoints = status.endpoints.expect("endpoints");
    assert_eq!(endpoints.mcp.as_deref(), Some("http://memgate-gateway.agents.svc:8080/mcp/repo-memory"));
    assert_eq!(endpoints.nexent.as_deref(), Some("http://memgate-gateway.agents.svc:8080/nexent/v1/repo-memory"));
    assert_eq!(status.dialect.as_deref(), Some("mem0-oss-rest-2026-08"));
}

#[test]
fn unchanged_world_computes_the_stored_status_and_keeps_transition_times() {
    let first =
        provider_status(&provider(1, Default::default()), &served(), Some(&gateway(Rollout::Complete, 2)), &at(0));
    let again = provider_status(&provider(1, first.clone()), &served(), Some(&gateway(Rollout::Complete, 2)), &at(600));
    assert_eq!(again, first, "nothing to write");
    assert!(transitions(&first.conditions, &again.conditions).is_empty(), "nothing to announce");
}

#[test]
fn transition_time_moves_only_when_the_status_changes() {
    let progressing = gateway(Rollout::Progressing("1 of 2".into()), 0);
    let first = provider_status(&provider(1, Default::default()), &served(), Some(&progressing), &at(0));
    assert_eq!(ready(&first).reason, "GatewayProgressing");
    let other_message = gateway(Rollout::Progressing("2 of 2 available soon".into()), 0);
    let second = provider_status(&provider(1, first.clone()), &served(), Some(&other_message), &at(10));
    assert_eq!(ready(&second).last_transition_time, at(0), "same status, new message");
    let done = provider_status(&provider(1, second.clone()), &served(), Some(&gateway(Rollout::Complete, 2)), &at(20));
    assert_eq!(ready(&done).last_transition_time, at(20));
    let changed = transitions(&second.conditions, &done.conditions);
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].reason, "Ready");
}

#[test]
fn ready_stays_true_while_another_providers_change_rolls_out_but_not_after_its_own() {
    let done =
        provider_status(&provider(1, Default::default()), &served(), Some(&gateway(Rollout::Complete, 2)), &at(0));
    let rolling = gateway(Rollout::Progressing("1 of 2".into()), 2);
    let kept = provider_status(&provider(1, done.clone()), &served(), Some(&rolling), &at(5));
    assert_eq!(ready(&kept), ready(&done), "unchanged provider, replicas still serving");
    let own_change = provider_status(&provider(2, done.clone()), &served(), Some(&rolling), &at(5));
    assert_eq!(ready(&own_change).reason, "GatewayProgressing", "its own edit waits for the rollout");
    let nothing_available =
        provider_status(&provider(1, done), &served(), Some(&gateway(Rollout::Progressing("x".into()), 0)), &at(5));
    assert_eq!(ready(&nothing_available).status, "False");
}

#[test]
fn refused_unresolved_disabled_and_stuck_providers_say_why_in_ready() {
    let mut verdict = served();
    verdict.refs = Refs::Unresolved(Problem::new(
        Reason::SecretNotPermitted,
        "spec.credentials.secretRef.name: Secret \"agents/x\" not found",
    ));
    let status = provider_status(&provider(1, Default::default()), &verdict, None, &at(0));
    assert_eq!((ready(&status).status.as_str(), ready(&status).reason.as_str()), ("False", "SecretNotPermitted"));
    assert!(ready(&status).message.contains("spec.credentials.secretRef.name"));
    assert!(status.endpoints.is_none(), "not served: no endpoints");

    let mut verdict = served();
    verdict.enabled = false;
    assert_eq!(ready(&provider_status(&provider(1, Default::default()), &verdict, None, &at(0))).reason, "Disabled");

    let mut verdict = served();
    verdict.accepted = Err(Problem::new(Reason::InvalidSpec, "spec.scope.appId: must be unset"));
    verdict.refs = Refs::NotChecked;
    let status = provider_status(&provider(1, Default::default()), &verdict, None, &at(0));
    let resolved = status.conditions.iter().find(|c| c.type_ == "ResolvedRefs").expect("ResolvedRefs");
    assert_eq!((resolved.status.as_str(), resolved.reason.as_str()), ("Unknown", "NotChecked"));
    assert_eq!(ready(&status).reason, "InvalidSpec");

    let failed = gateway(Rollout::Failed("deadline".into()), 0);
    assert_eq!(
        ready(&provider_status(&provider(1, Default::default()), &served(), Some(&failed), &at(0))).reason,
        "GatewayNotReady"
    );
}

#[test]
fn replica_limit_is_stated_in_ready() {
    let mut state = gateway(Rollout::Complete, 1);
    state.replica_note = Some("runs 1 gateway replica: a provider here ingests".into());
    let status = provider_status(&provider(1, Default::default()), &served(), Some(&state), &at(0));
    assert!(ready(&status).message.contains("runs 1 gateway replica"), "{}", ready(&status).message);
}

fn deployment(hash: &str, generation: i64, status: DeploymentStatus) -> Deployment {
    let mut d = Deployment::default();
    d.metadata.generation = Some(generation);
    d.spec.replicas = Some(2);
    d.spec.template.metadata = Some(kube::api::ObjectMeta {
        annotations: Some([(CONFIG_HASH_ANNOTATION.to_string(), hash.to_string())].into()),
        ..Default::default()
    });
    d.status = Some(status);
    d
}

#[test]
fn rollout_follows_kubectl_rollout_status() {
    let complete = DeploymentStatus {
        observed_generation: Some(3),
        replicas: Some(2),
        updated_replicas: Some(2),
        available_replicas: Some(2),
        ..Default::default()
    };
    assert_eq!(rollout(Some(&deployment("h", 3, complete.clone())), "h"), Rollout::Complete);
    assert!(matches!(rollout(None, "h"), Rollout::Progressing(_)));
    assert!(
        matches!(rollout(Some(&deployment("old", 3, complete.clone())), "h"), Rollout::Progressing(_)),
        "other config"
    );
    assert!(
        matches!(rollout(Some(&deployment("h", 4, complete.clone())), "h"), Rollout::Progressing(m) if m.contains("observe"))
    );
    let partly = DeploymentStatus { updated_replicas: Some(1), ..complete.clone() };
    assert!(matches!(rollout(Some(&deployment("h", 3, partly)), "h"), Rollout::Progressing(m) if m.contains("1 of 2")));
    let old_left = DeploymentStatus { replicas: Some(3), ..complete.clone() };
    assert!(matches!(rollout(Some(&deployment("h", 3, old_left)), "h"), Rollout::Progressing(m) if m.contains("old")));
    let unavailable = DeploymentStatus { available_replicas: Some(1), ..complete.clone() };
    assert!(
        matches!(rollout(Some(&deployment("h", 3, unavailable)), "h"), Rollout::Progressing(m) if m.contains("available"))
    );
    let stuck = DeploymentStatus {
        conditions: Some(vec![DeploymentCondition {
            type_: Some("Progressing".into()),
            status: Some("False".into()),
            reason: Some("ProgressDeadlineExceeded".into()),
            ..Default::default()
        }]),
        ..complete
    };
    assert!(matches!(rollout(Some(&deployment("h", 3, stuck)), "h"), Rollout::Failed(_)));
}

#[test]
fn preset_status_counts_users_and_judges_the_spec() {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "memgate.io/v1alpha1", "kind": "DialectPreset",
        "metadata": {"name": "team", "uid": "u", "generation": 1, "resourceVersion": "1"},
        "spec": {"dialectVersion": 1, "auth": "x-api-key",
            "search": {"method": "GET", "path": "/a/../search", "queryLocation": "query", "userIdLocation": "query",
                       "agentIdLocation": "omit", "appIdLocation": "omit", "limitField": "limit"},
            "response": {"collection": "results", "idField": "id", "contentField": "memory", "titleField": "omit",
                         "uriField": "omit", "scoreField": "score", "updatedAtField": "omit"}}}))
    .expect("object");
    let preset = PresetEntry::from_dynamic(&object).expect("named");
    let status = preset_status(&preset, 3, &at(0));
    assert_eq!(status.providers, Some(3));
    let accepted = &status.conditions[0];
    assert_eq!((accepted.status.as_str(), accepted.reason.as_str()), ("False", "InvalidSpec"));
    assert!(accepted.message.contains("spec.search.path"), "{}", accepted.message);
}

#[test]
fn long_messages_are_cut_on_a_character_boundary() {
    let text = "é".repeat(3000);
    let cut = truncate(&text, 1024);
    assert!(cut.len() <= 1024 && cut.ends_with("..."));
}

/// The kstatus convention: exactly the reasons that wait are `Reconciling=True`, exactly those a
/// person must fix are `Stalled=True`, and a disabled provider is done (`Ready=True`).
#[test]
fn reconciling_and_stalled_follow_the_reason_of_ready() {
    let triple = |status: &MemoryProviderStatus| {
        let of = |t: &str| status.conditions.iter().find(|c| c.type_ == t).map(|c| c.status.clone()).expect(t);
        (of("Ready"), of("Reconciling"), of("Stalled"))
    };
    let strings = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    let waiting = provider_status(
        &provider(1, Default::default()),
        &served(),
        Some(&gateway(Rollout::Progressing("x".into()), 0)),
        &at(0),
    );
    assert_eq!(triple(&waiting), strings("False", "True", "False"));
    let stuck = provider_status(
        &provider(1, Default::default()),
        &served(),
        Some(&gateway(Rollout::Failed("deadline".into()), 0)),
        &at(0),
    );
    assert_eq!(triple(&stuck), strings("False", "False", "True"));
    let stalled = stuck.conditions.iter().find(|c| c.type_ == "Stalled").expect("Stalled");
    assert_eq!(
        (stalled.reason.as_str(), stalled.message.as_str()),
        ("GatewayNotReady", ready(&stuck).message.as_str())
    );
    let retrying = provider_status(
        &provider(1, Default::default()),
        &served(),
        Some(&gateway(Rollout::ApplyFailed("quota".into()), 0)),
        &at(0),
    );
    assert_eq!(
        (triple(&retrying), ready(&retrying).reason.as_str()),
        (strings("False", "True", "False"), "GatewayApplyFailed")
    );
    let mut invalid = served();
    invalid.accepted = Err(Problem::new(Reason::InvalidSpec, "spec.scope.appId: must be unset"));
    let refused = provider_status(&provider(1, Default::default()), &invalid, None, &at(0));
    assert_eq!(triple(&refused), strings("False", "False", "True"));
    let mut missing = served();
    missing.refs = Refs::Unresolved(Problem::new(Reason::SecretNotPermitted, "not available"));
    assert_eq!(
        triple(&provider_status(&provider(1, Default::default()), &missing, None, &at(0))),
        strings("False", "True", "False")
    );
    let mut disabled = served();
    disabled.enabled = false;
    let off = provider_status(&provider(1, Default::default()), &disabled, None, &at(0));
    assert_eq!((triple(&off), ready(&off).reason.as_str()), (strings("True", "False", "False"), "Disabled"));
}
