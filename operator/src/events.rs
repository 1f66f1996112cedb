//! Events (`events.k8s.io`) announcing condition transitions of providers and presets.
//!
//! Only a condition whose status or reason changed is announced, so a steady state publishes
//! nothing. A failure to publish is logged and counted, never fails a reconcile. Notes carry the
//! condition message (which never holds a credential), cut to the API's 1 KiB.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use memgate_crds::API_VERSION;
use memgate_crds::status::Condition;

use crate::metrics::Metrics;
use crate::status::truncate;
use memgate_crds::PinnedPreset;

/// Longest Event note accepted by the API server.
const MAX_NOTE: usize = 1024;

/// Publishes Events as `memgate-operator`.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events").finish_non_exhaustive()
    }
}

/// The object an Event is about.
#[derive(Debug, Clone)]
pub struct Regarding<'a> {
    /// `MemoryProvider` or `DialectPreset`.
    pub kind: &'static str,
    /// Name.
    pub name: &'a str,
    /// Namespace (none for a DialectPreset: its Events go to `default`).
    pub namespace: Option<&'a str>,
    /// uid.
    pub uid: &'a str,
}

impl Events {
    /// A publisher; `instance` names this operator process.
    pub fn new(client: Client, instance: Option<String>) -> Events {
        let reporter = Reporter { controller: "memgate-operator".into(), instance };
        Events { recorder: Recorder::new(client, reporter) }
    }

    /// Announce each transition of `regarding`'s conditions.
    pub async fn transitions(&self, regarding: &Regarding<'_>, changed: &[&Condition], metrics: &Metrics) {
        for condition in changed {
            let type_ = if condition.status == "True" { EventType::Normal } else { EventType::Warning };
            let note = format!("{} is {}: {}", condition.type_, condition.status, condition.message);
            self.publish(regarding, type_, &condition.reason, note, metrics).await;
        }
    }

    /// Announce that the DialectPreset a provider uses was replaced by another object of the
    /// same name (deleted and re-created, possibly with another spec).
    pub async fn preset_replaced(
        &self,
        regarding: &Regarding<'_>,
        before: &PinnedPreset,
        now: &PinnedPreset,
        metrics: &Metrics,
    ) {
        let note = format!(
            "DialectPreset \"{}\" was replaced (uid {} -> {}, spec {} -> {}); the gateway now serves this provider with the new dialect",
            now.name, before.uid, now.uid, before.spec_hash, now.spec_hash
        );
        self.publish(regarding, EventType::Warning, "DialectPresetReplaced", note, metrics).await;
    }

    async fn publish(
        &self,
        regarding: &Regarding<'_>,
        type_: EventType,
        reason: &str,
        note: String,
        metrics: &Metrics,
    ) {
        let reference = ObjectReference {
            api_version: Some(API_VERSION.into()),
            kind: Some(regarding.kind.into()),
            name: Some(regarding.name.into()),
            namespace: regarding.namespace.map(Into::into),
            uid: Some(regarding.uid.into()),
            ..ObjectReference::default()
        };
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(truncate(&note, MAX_NOTE)),
            action: "Reconcile".into(),
            secondary: None,
        };
        match self.recorder.publish(&event, &reference).await {
            Ok(()) => metrics.event(true),
            Err(error) => {
                metrics.event(false);
                tracing::warn!(kind = regarding.kind, name = regarding.name, reason, error = %error, "event not published");
            }
        }
    }
}
