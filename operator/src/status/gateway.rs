//! The status of a `MemoryGateway`: whether it counts (the oldest of its namespace, valid), and
//! how the gateway it shapes stands. Pure, like the rest of `status`.
//!
//! | condition | True | False |
//! |---|---|---|
//! | `Accepted` | `Accepted` | `InvalidSpec`, `GatewayConflict` |
//! | `Ready` | `Ready`, `GatewayIdle` | `InvalidSpec`, `GatewayConflict`, `GatewayProgressing`, `GatewayNotReady`, `GatewayApplyFailed` |
//!
//! plus `Reconciling` and `Stalled` restating `Ready` for GitOps tools, as on the other kinds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use memgate_crds::memory_gateway::{GatewayUrls, MemoryGatewayStatus};
use memgate_crds::status::condition_type;

use super::{GatewayState, Rollout, condition, progress_conditions};
use crate::index::GatewayEntry;
use crate::reasons::{Progress, Reason};

/// What the operator made of one MemoryGateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayVerdict {
    /// The oldest of its namespace and valid: it shapes the gateway.
    Shaping,
    /// The oldest of its namespace, but its spec breaks a rule (the operator's defaults apply).
    Invalid(String),
    /// Another, older MemoryGateway of the namespace shapes the gateway (its name).
    Conflict(String),
}

/// Where the gateway it shapes stands.
#[derive(Debug, Clone)]
pub enum Shaped<'a> {
    /// The namespace has no MemoryProvider: no gateway runs.
    Idle,
    /// The gateway's rollout (the same state its providers see).
    Running(&'a GatewayState),
}

/// The status a MemoryGateway should have; `urls` are the public and the in-cluster base URLs.
pub fn gateway_status(
    entry: &GatewayEntry,
    verdict: &GatewayVerdict,
    shaped: &Shaped<'_>,
    urls: GatewayUrls,
    now: &Time,
) -> MemoryGatewayStatus {
    let (previous, generation) = (&entry.status.conditions, entry.generation);
    let make = |type_: &str, status: &str, reason: Reason, message: &str| {
        condition(previous, type_, status, reason, message, generation, now)
    };
    let refused = |reason: Reason, message: &str| {
        (
            make(condition_type::ACCEPTED, "False", reason, message),
            make(condition_type::READY, "False", reason, message),
        )
    };
    let (accepted, ready) = match verdict {
        GatewayVerdict::Invalid(why) => {
            refused(Reason::InvalidSpec, &format!("{why}; the gateway runs with the operator's defaults meanwhile"))
        }
        GatewayVerdict::Conflict(winner) => refused(
            Reason::GatewayConflict,
            &format!(
                "MemoryGateway \"{winner}\" is older and shapes this namespace's gateway (at most one per namespace); this one is ignored"
            ),
        ),
        GatewayVerdict::Shaping => {
            let accepted = make(condition_type::ACCEPTED, "True", Reason::Accepted, "the spec passed every rule");
            let public = urls.public.as_deref().unwrap_or_default();
            let ready = match shaped {
                Shaped::Idle => make(
                    condition_type::READY,
                    "True",
                    Reason::GatewayIdle,
                    "no MemoryProvider in this namespace, so no gateway runs; one starts with the first provider",
                ),
                Shaped::Running(state) => match &state.rollout {
                    Rollout::Complete => make(
                        condition_type::READY,
                        "True",
                        Reason::Ready,
                        &format!("{} gateway replicas available at {public}", state.available),
                    ),
                    Rollout::Progressing(why) => make(condition_type::READY, "False", Reason::GatewayProgressing, why),
                    Rollout::Failed(why) => make(condition_type::READY, "False", Reason::GatewayNotReady, why),
                    Rollout::ApplyFailed(why) => make(condition_type::READY, "False", Reason::GatewayApplyFailed, why),
                },
            };
            (accepted, ready)
        }
    };
    let progress = Reason::parse(&ready.reason).and_then(Reason::progress).unwrap_or(Progress::Waiting);
    let [reconciling, stalled] = progress_conditions(previous, &ready, progress, generation, now);
    MemoryGatewayStatus {
        observed_generation: Some(generation),
        conditions: vec![accepted, ready, reconciling, stalled],
        urls: (*verdict == GatewayVerdict::Shaping).then_some(urls),
    }
}

/// The verdict on each MemoryGateway of a namespace (oldest first): the first counts when valid,
/// every other is a conflict. `problems` checks a spec (empty: valid).
pub fn gateway_verdicts(
    gateways: &[GatewayEntry],
    problems: impl Fn(&GatewayEntry) -> Option<String>,
) -> Vec<GatewayVerdict> {
    let Some(first) = gateways.first() else { return Vec::new() };
    let mut verdicts = vec![problems(first).map_or(GatewayVerdict::Shaping, GatewayVerdict::Invalid)];
    verdicts.extend(gateways[1..].iter().map(|_| GatewayVerdict::Conflict(first.name.clone())));
    verdicts
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;

    fn entry(name: &str, spec: serde_json::Value) -> GatewayEntry {
        GatewayEntry {
            name: name.into(),
            namespace: "agents".into(),
            uid: format!("uid-{name}"),
            generation: 2,
            resource_version: "1".into(),
            created: Some(Timestamp::UNIX_EPOCH),
            spec: serde_json::from_value(spec).map_err(|e| e.to_string()),
            status: MemoryGatewayStatus::default(),
        }
    }

    fn urls() -> GatewayUrls {
        GatewayUrls {
            public: Some("https://memory.example.com/team".into()),
            in_cluster: Some("http://memgate-gateway.agents.svc:8080".into()),
        }
    }

    fn state(rollout: Rollout) -> GatewayState {
        GatewayState { rollout, available: 3, base_url: "https://memory.example.com/team".into(), replica_note: None }
    }

    fn reasons(status: &MemoryGatewayStatus) -> Vec<(String, String, String)> {
        status.conditions.iter().map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone())).collect()
    }

    fn row(type_: &str, status: &str, reason: &str) -> (String, String, String) {
        (type_.into(), status.into(), reason.into())
    }

    #[test]
    fn the_oldest_counts_and_every_other_is_a_conflict_naming_it() {
        let gateways = [entry("team", json!({})), entry("late", json!({}))];
        let verdicts = gateway_verdicts(&gateways, |_| None);
        assert_eq!(verdicts, [GatewayVerdict::Shaping, GatewayVerdict::Conflict("team".into())]);
        let invalid = gateway_verdicts(&gateways[..1], |_| Some("spec.replicas: must be between 1 and 20".into()));
        assert_eq!(invalid, [GatewayVerdict::Invalid("spec.replicas: must be between 1 and 20".into())]);
        assert!(gateway_verdicts(&[], |_| None).is_empty());
    }

    #[test]
    fn a_shaping_gateway_is_ready_with_its_urls_once_the_rollout_completes() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let team = entry("team", json!({}));
        let running = state(Rollout::Complete);
        let status = gateway_status(&team, &GatewayVerdict::Shaping, &Shaped::Running(&running), urls(), &now);
        assert_eq!(
            reasons(&status),
            [
                row("Accepted", "True", "Accepted"),
                row("Ready", "True", "Ready"),
                row("Reconciling", "False", "Ready"),
                row("Stalled", "False", "Ready"),
            ]
        );
        assert_eq!(status.urls, Some(urls()));
        assert_eq!(status.observed_generation, Some(2));
        assert!(status.conditions[1].message.contains("https://memory.example.com/team"));

        let rolling = state(Rollout::Progressing("1 of 3 gateway replicas run the current config".into()));
        let status = gateway_status(&team, &GatewayVerdict::Shaping, &Shaped::Running(&rolling), urls(), &now);
        assert_eq!(
            reasons(&status)[1..3],
            [row("Ready", "False", "GatewayProgressing"), row("Reconciling", "True", "GatewayProgressing")]
        );

        let idle = gateway_status(&team, &GatewayVerdict::Shaping, &Shaped::Idle, urls(), &now);
        assert_eq!(reasons(&idle)[1], row("Ready", "True", "GatewayIdle"));
    }

    #[test]
    fn conflicts_and_invalid_specs_stall_without_urls() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let late = entry("late", json!({}));
        let running = state(Rollout::Complete);
        let conflict = GatewayVerdict::Conflict("team".into());
        let status = gateway_status(&late, &conflict, &Shaped::Running(&running), urls(), &now);
        assert_eq!(
            reasons(&status)[..2],
            [row("Accepted", "False", "GatewayConflict"), row("Ready", "False", "GatewayConflict")]
        );
        assert_eq!(reasons(&status)[3], row("Stalled", "True", "GatewayConflict"));
        assert!(status.conditions[0].message.contains("\"team\" is older"), "{}", status.conditions[0].message);
        assert_eq!(status.urls, None);

        let invalid = GatewayVerdict::Invalid("spec.logLevel: must be a log filter".into());
        let status = gateway_status(&late, &invalid, &Shaped::Running(&running), urls(), &now);
        assert_eq!(reasons(&status)[3], row("Stalled", "True", "InvalidSpec"));
        assert!(status.conditions[0].message.contains("spec.logLevel"));
        assert!(status.conditions[0].message.contains("operator's defaults"));
    }
}
