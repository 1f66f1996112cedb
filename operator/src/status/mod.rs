//! Status: the conditions of MemoryProviders and DialectPresets, computed from the verdicts and the
//! gateway's rollout.
//!
//! Pure (the clock is a parameter). A condition keeps its `lastTransitionTime` unless its status
//! changes, so an unchanged world computes a status equal to the one stored and nothing is written.
//! [`write`] holds the one status patch per object.
//!
//! | condition | True | False / Unknown |
//! |---|---|---|
//! | `Accepted` | `Accepted` | `InvalidSpec`, `OriginNotAllowed` |
//! | `ResolvedRefs` | `ResolvedRefs` | `DialectNotFound`, `DialectNotAccepted`, `SecretNotPermitted`, `SecretKeyMissing`, `SecretValueInvalid`, `PluginClaimNotFound`; Unknown `NotChecked` |
//! | `Ready` | `Ready` | `Disabled`, the Accepted/ResolvedRefs reason, `GatewayProgressing`, `GatewayNotReady` |

pub mod gateway;
pub mod write;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use memgate_crds::status::{Condition, condition_type};
use memgate_crds::validation::dialect_preset;
use memgate_crds::{DialectPresetStatus, MemoryProviderStatus, ProviderEndpoints};

use crate::index::{PresetEntry, ProviderEntry};
use crate::reasons::{Problem, Progress, Reason};
use crate::render::CONFIG_HASH_ANNOTATION;
use crate::validate::{ProviderVerdict, Refs};

/// Longest condition message written (the API allows 32 KiB; a person reads far less).
const MAX_MESSAGE: usize = 4096;

/// Where the gateway Deployment's rollout of the desired config stands (the checks of
/// `kubectl rollout status`, kubernetes/kubernetes
/// `staging/src/k8s.io/kubectl/pkg/polymorphichelpers/rollout_status.go`, plus "is the desired
/// config in the pod template at all").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// Every replica runs the desired pod template and is available.
    Complete,
    /// Still rolling out; why.
    Progressing(String),
    /// The Deployment exceeded its progress deadline.
    Failed(String),
    /// Writing a gateway object failed this time (retried with backoff); what failed.
    ApplyFailed(String),
}

/// The rollout of the pod template whose config hash is `desired_hash`.
pub fn rollout(deployment: Option<&Deployment>, desired_hash: &str) -> Rollout {
    let Some(deployment) = deployment else {
        return Rollout::Progressing("the gateway Deployment does not exist yet".into());
    };
    let spec = &deployment.spec;
    let template_hash = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION));
    if template_hash.map(String::as_str) != Some(desired_hash) {
        return Rollout::Progressing("the gateway Deployment is being updated to the current config".into());
    }
    let status = deployment.status.clone().unwrap_or_default();
    let generation = deployment.metadata.generation.unwrap_or_default();
    if status.observed_generation.unwrap_or_default() < generation {
        return Rollout::Progressing("waiting for the Deployment controller to observe the new pod template".into());
    }
    let deadline =
        status.conditions.iter().flatten().any(|c| {
            c.type_.as_deref() == Some("Progressing") && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        });
    if deadline {
        return Rollout::Failed("the gateway Deployment exceeded its progress deadline; look at its pods".into());
    }
    let wanted = spec.replicas.unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or_default();
    let replicas = status.replicas.unwrap_or_default();
    let available = status.available_replicas.unwrap_or_default();
    if updated < wanted {
        return Rollout::Progressing(format!("{updated} of {wanted} gateway replicas run the current config"));
    }
    if replicas > updated {
        return Rollout::Progressing(format!("{} old gateway replicas are pending termination", replicas - updated));
    }
    if available < updated {
        return Rollout::Progressing(format!("{available} of {updated} updated gateway replicas are available"));
    }
    Rollout::Complete
}

/// The gateway as seen by one served provider.
#[derive(Debug, Clone)]
pub struct GatewayState {
    /// The rollout of the desired config.
    pub rollout: Rollout,
    /// Gateway replicas currently available (old or new template).
    pub available: i32,
    /// `http://memgate-gateway.<ns>.svc:<port>`.
    pub base_url: String,
    /// Why replicas were limited, if they were.
    pub replica_note: Option<String>,
}

/// The status writes of a namespace: each provider (with its verdict, in the same order) whose
/// desired status differs from the one stored. An unchanged world writes nothing.
pub fn provider_writes<'a>(
    providers: &'a [ProviderEntry],
    verdicts: &[ProviderVerdict],
    gateway: &GatewayState,
    now: &Time,
) -> Vec<(&'a ProviderEntry, MemoryProviderStatus)> {
    providers
        .iter()
        .zip(verdicts)
        .map(|(provider, verdict)| {
            (provider, provider_status(provider, verdict, verdict.served().then_some(gateway), now))
        })
        .filter(|(provider, desired)| *desired != provider.status)
        .collect()
}

/// The status a MemoryProvider should have. `gateway` is `None` when it is not served.
pub fn provider_status(
    provider: &ProviderEntry,
    verdict: &ProviderVerdict,
    gateway: Option<&GatewayState>,
    now: &Time,
) -> MemoryProviderStatus {
    let (previous, generation) = (&provider.status, provider.generation);
    let make = |type_: &str, status: &str, reason: Reason, message: &str| {
        condition(&previous.conditions, type_, status, reason, message, generation, now)
    };
    let accepted = match &verdict.accepted {
        Ok(()) => make(condition_type::ACCEPTED, "True", Reason::Accepted, "the spec passed every rule"),
        Err(p) => make(condition_type::ACCEPTED, "False", p.reason, &p.message),
    };
    let resolved = match &verdict.refs {
        Refs::Resolved => make(
            condition_type::RESOLVED_REFS,
            "True",
            Reason::ResolvedRefs,
            "the dialect, the referenced Secret keys and the plugin claim were found and are usable",
        ),
        Refs::Unresolved(p) => make(condition_type::RESOLVED_REFS, "False", p.reason, &p.message),
        Refs::NotChecked => make(
            condition_type::RESOLVED_REFS,
            "Unknown",
            Reason::NotChecked,
            "references are checked once the spec is accepted",
        ),
    };
    let endpoints = gateway.zip(provider.spec()).map(|(g, spec)| ProviderEndpoints {
        mcp: spec.mcp.enabled.then(|| format!("{}/mcp/{}", g.base_url, provider.name)),
        nexent: spec.nexent.any().then(|| format!("{}/nexent/v1/{}", g.base_url, provider.name)),
    });
    let ready = ready_condition(previous, verdict, gateway, generation, now, endpoints.as_ref());
    let progress = Reason::parse(&ready.reason).and_then(Reason::progress).unwrap_or(Progress::Waiting);
    let [reconciling, stalled] = progress_conditions(&previous.conditions, &ready, progress, generation, now);
    MemoryProviderStatus {
        observed_generation: Some(generation),
        conditions: vec![accepted, resolved, ready, reconciling, stalled],
        dialect: verdict.dialect.clone(),
        endpoints: endpoints.filter(|e| e.mcp.is_some() || e.nexent.is_some()),
        preset: verdict.preset.clone(),
    }
}

fn ready_condition(
    previous: &MemoryProviderStatus,
    verdict: &ProviderVerdict,
    gateway: Option<&GatewayState>,
    generation: i64,
    now: &Time,
    endpoints: Option<&ProviderEndpoints>,
) -> Condition {
    let make = |status: &str, reason: Reason, message: &str| {
        condition(&previous.conditions, condition_type::READY, status, reason, message, generation, now)
    };
    let not_served = |p: &Problem| make("False", p.reason, &format!("not served: {}", p.message));
    if !verdict.enabled && verdict.accepted.is_ok() {
        return make(
            "True",
            Reason::Disabled,
            "spec.enabled is false: the gateway does not serve this provider, as asked",
        );
    }
    if let Err(p) = &verdict.accepted {
        return not_served(p);
    }
    if let Refs::Unresolved(p) = &verdict.refs {
        return not_served(p);
    }
    let Some(gateway) = gateway else {
        return make("False", Reason::GatewayProgressing, "waiting for the gateway");
    };
    match &gateway.rollout {
        Rollout::Complete => {
            let mut message = match endpoints.and_then(|e| e.mcp.as_deref().or(e.nexent.as_deref())) {
                Some(url) => format!("served by the gateway at {url}"),
                None => "served by the gateway".to_string(),
            };
            if let Some(note) = &gateway.replica_note {
                message.push_str("; this namespace ");
                message.push_str(note);
            }
            make("True", Reason::Ready, &message)
        }
        Rollout::Failed(why) => make("False", Reason::GatewayNotReady, why),
        Rollout::ApplyFailed(why) => make("False", Reason::GatewayApplyFailed, why),
        Rollout::Progressing(why) => {
            // A provider already served, unchanged since, stays Ready while the gateway rolls out
            // a change made for another provider: the available replicas still serve it.
            let kept = previous.conditions.iter().find(|c| c.type_ == condition_type::READY).filter(|c| {
                c.status == "True"
                    && c.observed_generation == Some(generation)
                    && previous.preset == verdict.preset
                    && gateway.available > 0
            });
            match kept {
                Some(condition) => condition.clone(),
                None => make("False", Reason::GatewayProgressing, why),
            }
        }
    }
}

/// `Reconciling` and `Stalled` (kstatus's abnormal-true conditions) of `progress`: at most one of
/// them is True, with `ready`'s reason and message; both False when done.
fn progress_conditions(
    previous: &[Condition],
    ready: &Condition,
    progress: Progress,
    generation: i64,
    now: &Time,
) -> [Condition; 2] {
    let (_, reconciling, stalled) = progress.conditions();
    let make = |type_: &str, status: &str, idle: &str| Condition {
        type_: type_.into(),
        status: status.into(),
        reason: ready.reason.clone(),
        // `ready`'s message already ends with the remedy.
        message: if status == "True" { ready.message.clone() } else { idle.to_string() },
        observed_generation: Some(generation),
        last_transition_time: transition_time(previous, type_, status, now),
    };
    [
        make(condition_type::RECONCILING, reconciling, "not waiting for anything"),
        make(condition_type::STALLED, stalled, "nothing keeps it from progressing"),
    ]
}

/// The status a DialectPreset should have.
pub fn preset_status(preset: &PresetEntry, users: u32, now: &Time) -> DialectPresetStatus {
    let (previous, generation) = (&preset.status.conditions, preset.generation);
    let problems = match &preset.spec {
        Err(error) => Some(format!("the object cannot be read: {error}")),
        Ok(spec) => {
            let found = dialect_preset(&preset.name, spec);
            (!found.is_empty()).then(|| found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
        }
    };
    // Ready says the same as Accepted, so that kstatus and `kubectl wait --for=condition=Ready`
    // work on presets too; an invalid preset only changes when its owner replaces it: Stalled.
    let (status, reason, message, progress) = match &problems {
        None => ("True", Reason::Accepted, "a valid dialect (grammar version 1)", Progress::Done),
        Some(message) => ("False", Reason::InvalidSpec, message.as_str(), Progress::Failed),
    };
    let accepted = condition(previous, condition_type::ACCEPTED, status, reason, message, generation, now);
    let ready = condition(previous, condition_type::READY, status, reason, message, generation, now);
    let [reconciling, stalled] = progress_conditions(previous, &ready, progress, generation, now);
    DialectPresetStatus {
        observed_generation: Some(generation),
        conditions: vec![accepted, ready, reconciling, stalled],
        providers: Some(users),
    }
}

/// One condition; its `lastTransitionTime` is carried over unless its status changes. The message
/// of a condition that is not True ends with its reason's remedy.
fn condition(
    previous: &[Condition],
    type_: &str,
    status: &str,
    reason: Reason,
    message: &str,
    generation: i64,
    now: &Time,
) -> Condition {
    let last_transition_time = transition_time(previous, type_, status, now);
    // A condition that is not True says what to do about it (the reason table's remedy).
    let message = if status == "True" {
        truncate(message, MAX_MESSAGE)
    } else {
        let remedy = format!(". What to do: {}", reason.remedy());
        format!("{}{remedy}", truncate(message, MAX_MESSAGE - remedy.len()))
    };
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.as_str().into(),
        message,
        observed_generation: Some(generation),
        last_transition_time,
    }
}

/// When condition `type_` took `status`: as before if it already had it, else `now`.
fn transition_time(previous: &[Condition], type_: &str, status: &str, now: &Time) -> Time {
    previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone())
}

/// Cut `text` to at most `max` bytes on a character boundary.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Conditions whose status or reason differ from before (new ones included): what Events announce.
/// `Reconciling` and `Stalled` only restate `Ready` for GitOps tools: no Events of their own.
pub fn transitions<'a>(previous: &[Condition], current: &'a [Condition]) -> Vec<&'a Condition> {
    current
        .iter()
        .filter(|c| c.type_ != condition_type::RECONCILING && c.type_ != condition_type::STALLED)
        .filter(|c| !previous.iter().any(|p| p.type_ == c.type_ && p.status == c.status && p.reason == c.reason))
        .collect()
}

#[cfg(test)]
mod tests;
