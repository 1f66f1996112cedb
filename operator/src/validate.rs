//! Validate: the verdict on each provider of a namespace, from the index and the Secret verdicts.
//!
//! Pure. Every rule is the shared one of `memgate-crds` (the same functions `memgate-operator
//! validate` and the gateway call), and what a provider refers to is answered by
//! `memgate_crds::references`, so the operator never renders what the gateway would refuse. The
//! checks run in the order a person fixes things: the spec on its own, then its dialect, then the
//! spec against the dialect, then the Secrets and the plugin claim. Never performs I/O.

use std::collections::{BTreeMap, BTreeSet};

use memgate_crds::references::{DialectProblem, KeyVerdict, resolve_dialect, secret_uses};
use memgate_crds::validation::destination::{AllowedDestinations, Placement, provider_destinations};
use memgate_crds::validation::{Violation, memory_provider, provider_against_dialect, provider_identity};
use memgate_crds::{MemoryProviderSpec, PinnedPreset};
use sha2::{Digest, Sha256};

use crate::index::{PresetEntry, ProviderEntry};
use crate::reasons::{Problem, Reason};
use crate::resolve::SecretVerdicts;

/// The state of a provider's references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refs {
    /// Dialect, Secrets and plugin claim found and usable.
    Resolved,
    /// Something referenced is missing or unusable.
    Unresolved(Problem),
    /// Not checked: the spec itself is invalid.
    NotChecked,
}

/// What the operator concluded about one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderVerdict {
    /// `Ok` when every rule accepts the spec.
    pub accepted: Result<(), Problem>,
    /// The references.
    pub refs: Refs,
    /// The resolved dialect id.
    pub dialect: Option<String>,
    /// The DialectPreset object used, for a `presetRef`.
    pub preset: Option<PinnedPreset>,
    /// `spec.enabled` (false for an unreadable spec).
    pub enabled: bool,
}

impl ProviderVerdict {
    /// Rendered into the gateway: enabled, accepted and resolved.
    pub fn served(&self) -> bool {
        self.enabled && self.accepted.is_ok() && self.refs == Refs::Resolved
    }
}

/// The PersistentVolumeClaims of a namespace, and the claim a Nexent provider naming none uses
/// (`--gateway-default-plugin-claim`).
#[derive(Debug, Clone, Copy)]
pub struct Claims<'a> {
    /// Claims present, by name.
    pub present: &'a BTreeSet<String>,
    /// The default claim.
    pub default: &'a str,
}

/// The verdict on one provider. `allowed` is the platform team's allow-list of destinations.
pub fn verdict(
    provider: &ProviderEntry,
    presets: &BTreeMap<String, PresetEntry>,
    secrets: &SecretVerdicts,
    claims: Claims<'_>,
    allowed: &AllowedDestinations,
) -> ProviderVerdict {
    let spec = match &provider.spec {
        Ok(spec) => spec,
        Err(error) => {
            return ProviderVerdict {
                accepted: Err(Problem::new(Reason::InvalidSpec, format!("the object cannot be read: {error}"))),
                refs: Refs::NotChecked,
                dialect: None,
                preset: None,
                enabled: false,
            };
        }
    };
    let mut result = ProviderVerdict {
        accepted: Ok(()),
        refs: Refs::NotChecked,
        dialect: None,
        preset: None,
        enabled: spec.enabled,
    };
    let mut found = provider_identity(&provider.name, &provider.namespace);
    found.extend(memory_provider(spec));
    // In a cluster, loopback and the API server are refused destinations too.
    found.extend(
        provider_destinations(spec, Placement::Cluster).into_iter().filter(|v| !found.contains(v)).collect::<Vec<_>>(),
    );
    if !found.is_empty() {
        result.accepted = Err(invalid(&found));
        return result;
    }
    let outside = allowed.outside(spec);
    if !outside.is_empty() {
        let lines: Vec<String> = outside.iter().map(ToString::to_string).collect();
        result.accepted = Err(Problem::new(Reason::OriginNotAllowed, lines.join("; ")));
        return result;
    }
    let lookup = |name: &str| presets.get(name).map(|entry| entry.spec.as_ref().map_err(Clone::clone));
    let dialect = match resolve_dialect(&spec.dialect, memgate_presets::view, lookup) {
        Ok(dialect) => dialect,
        Err(problem) => {
            result.refs = Refs::Unresolved(dialect_problem(&problem));
            return result;
        }
    };
    result.dialect = Some(dialect.id.to_string());
    result.preset = presets.get(dialect.id).filter(|_| dialect.is_preset).map(|entry| PinnedPreset {
        name: dialect.id.to_string(),
        uid: entry.uid.clone(),
        spec_hash: spec_hash(dialect.view.spec),
    });
    let against = provider_against_dialect(spec, dialect.view);
    if !against.is_empty() {
        result.accepted = Err(invalid(&against));
        return result;
    }
    result.refs = match secret_problem(&provider.namespace, spec, secrets).or_else(|| claim_problem(spec, claims)) {
        Some(problem) => Refs::Unresolved(problem),
        None => Refs::Resolved,
    };
    result
}

fn invalid(found: &[Violation]) -> Problem {
    let lines: Vec<String> = found.iter().map(ToString::to_string).collect();
    Problem::new(Reason::InvalidSpec, lines.join("; "))
}

/// The reason of a dialect that could not be resolved.
fn dialect_problem(problem: &DialectProblem) -> Problem {
    let reason = match problem {
        // `memory_provider` already refused unknown and reserved ids: a bug if it happens.
        DialectProblem::UnknownBuiltin(_) => Reason::InvalidSpec,
        DialectProblem::PresetNotFound(_) => Reason::DialectNotFound,
        DialectProblem::PresetInvalid { .. } => Reason::DialectNotAccepted,
    };
    Problem::new(reason, problem.violation().to_string())
}

/// SHA-256 of a spec's JSON, first 16 hex characters.
pub fn spec_hash<T: serde::Serialize>(spec: &T) -> String {
    let json = serde_json::to_vec(spec).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The Secret problems of a provider: the reason of the first, the messages of all.
fn secret_problem(namespace: &str, spec: &MemoryProviderSpec, secrets: &SecretVerdicts) -> Option<Problem> {
    let mut worst: Option<Problem> = None;
    for secret_use in secret_uses(spec) {
        let (name, key) = (&secret_use.secret_ref.name, &secret_use.secret_ref.key);
        let verdict = secrets.get(&(name.clone(), key.clone())).unwrap_or(&KeyVerdict::NotPermitted);
        let Some(violation) = verdict.violation(secret_use, namespace) else { continue };
        let reason = match verdict {
            KeyVerdict::Usable | KeyVerdict::NotPermitted | KeyVerdict::SecretNotFound => Reason::SecretNotPermitted,
            KeyVerdict::KeyMissing => Reason::SecretKeyMissing,
            KeyVerdict::Unusable(_) => Reason::SecretValueInvalid,
        };
        let problem = Problem::new(reason, violation.to_string());
        worst = Some(match worst {
            None => problem,
            Some(first) => Problem::new(first.reason, format!("{}; {}", first.message, problem.message)),
        });
    }
    worst
}

fn claim_problem(spec: &MemoryProviderSpec, claims: Claims<'_>) -> Option<Problem> {
    let claim = spec.nexent.plugin_claim_or(claims.default);
    (spec.nexent.any() && !claims.present.contains(claim)).then(|| {
        Problem::new(
            Reason::PluginClaimNotFound,
            format!("spec.nexent.pluginClaim: PersistentVolumeClaim \"{claim}\" not found in this namespace"),
        )
    })
}

#[cfg(test)]
mod tests {
    use kube::api::DynamicObject;
    use serde_json::{Value, json};

    use super::*;

    fn entry(spec: Value) -> ProviderEntry {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "memgate.io/v1alpha1", "kind": "MemoryProvider",
            "metadata": {"name": "repo-memory", "namespace": "agents", "generation": 1, "resourceVersion": "1"},
            "spec": spec,
        }))
        .expect("object");
        ProviderEntry::from_dynamic(&object).expect("named")
    }

    fn valid() -> Value {
        json!({
            "dialect": {"builtin": "mem0-oss-rest-2026-08"},
            "endpoint": {"origin": "http://mem0.memory.svc:8888", "allowInsecureHttp": true},
            "credentials": {"secretRef": {"name": "mem0-api", "key": "api-key"}},
            "scope": {"userId": "repository-memory", "agentId": "qwen-code"},
            "access": {"anonymous": true},
        })
    }

    fn usable() -> SecretVerdicts {
        [(("mem0-api".to_string(), "api-key".to_string()), KeyVerdict::Usable)].into_iter().collect()
    }

    const DEFAULT_CLAIM: &str = "nexent-memory-plugins";

    fn no_claims() -> Claims<'static> {
        static NONE: BTreeSet<String> = BTreeSet::new();
        Claims { present: &NONE, default: DEFAULT_CLAIM }
    }

    fn judge(spec: Value, secrets: &SecretVerdicts) -> ProviderVerdict {
        verdict(&entry(spec), &BTreeMap::new(), secrets, no_claims(), &AllowedDestinations::default())
    }

    #[test]
    fn valid_provider_with_its_secret_is_served() {
        let v = judge(valid(), &usable());
        assert!(v.served(), "{v:?}");
        assert_eq!(v.dialect.as_deref(), Some("mem0-oss-rest-2026-08"));
    }

    #[test]
    fn scope_that_does_not_fit_the_dialect_is_invalid_spec_naming_the_field() {
        let mut spec = valid();
        spec["scope"]["appId"] = json!("unused");
        let v = judge(spec, &usable());
        let problem = v.accepted.clone().expect_err("refused");
        assert_eq!(problem.reason, Reason::InvalidSpec);
        assert!(problem.message.starts_with("spec.scope.appId:"), "{}", problem.message);
        assert!(!v.served());
    }

    #[test]
    fn missing_secret_key_and_unusable_value_have_their_own_reasons() {
        let none = SecretVerdicts::new();
        assert!(matches!(
            judge(valid(), &none).refs,
            Refs::Unresolved(Problem { reason: Reason::SecretNotPermitted, .. })
        ));
        let mut missing = usable();
        missing.insert(("mem0-api".into(), "api-key".into()), KeyVerdict::KeyMissing);
        let Refs::Unresolved(problem) = judge(valid(), &missing).refs else { panic!("unresolved") };
        assert_eq!(problem.reason, Reason::SecretKeyMissing);
        assert!(
            problem.message.contains("spec.credentials.secretRef.key") && problem.message.contains("agents/mem0-api")
        );
        missing.insert(("mem0-api".into(), "api-key".into()), KeyVerdict::Unusable("the credential is blank".into()));
        let Refs::Unresolved(problem) = judge(valid(), &missing).refs else { panic!("unresolved") };
        assert_eq!(problem.reason, Reason::SecretValueInvalid);
    }

    #[test]
    fn nexent_without_its_claim_is_not_served_but_mcp_only_needs_none() {
        let mut spec = valid();
        spec["nexent"] = json!({"search": true});
        let v = judge(spec.clone(), &usable());
        assert!(
            matches!(&v.refs, Refs::Unresolved(p) if p.reason == Reason::PluginClaimNotFound && p.message.contains("nexent-memory-plugins"))
        );
        let claims: BTreeSet<String> = ["nexent-memory-plugins".to_string()].into();
        let present = Claims { present: &claims, default: DEFAULT_CLAIM };
        assert!(verdict(&entry(spec), &BTreeMap::new(), &usable(), present, &AllowedDestinations::default()).served());
    }

    #[test]
    fn an_unnamed_claim_is_the_configured_default_and_a_named_one_wins() {
        let mut spec = valid();
        spec["nexent"] = json!({"search": true});
        let claims: BTreeSet<String> = ["nexent-memory-plugins".to_string(), "own-plugins".to_string()].into();
        let team_default = Claims { present: &claims, default: "team-plugins" };
        let v =
            verdict(&entry(spec.clone()), &BTreeMap::new(), &usable(), team_default, &AllowedDestinations::default());
        assert!(
            matches!(&v.refs, Refs::Unresolved(p) if p.reason == Reason::PluginClaimNotFound && p.message.contains("\"team-plugins\"")),
            "the configured default, not the built-in one: {v:?}"
        );
        spec["nexent"]["pluginClaim"] = json!("own-plugins");
        assert!(
            verdict(&entry(spec), &BTreeMap::new(), &usable(), team_default, &AllowedDestinations::default()).served()
        );
    }

    #[test]
    fn preset_reference_is_resolved_pinned_or_reported() {
        let mut spec = valid();
        spec["dialect"] = json!({"presetRef": "team-search"});
        spec["scope"] = json!({"userId": "u"});
        let v = judge(spec.clone(), &usable());
        assert!(matches!(&v.refs, Refs::Unresolved(p) if p.reason == Reason::DialectNotFound));
        let preset: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "memgate.io/v1alpha1", "kind": "DialectPreset",
            "metadata": {"name": "team-search", "uid": "uid-1", "resourceVersion": "1"},
            "spec": {"dialectVersion": 1, "auth": "x-api-key",
                "search": {"method": "GET", "path": "/search", "queryLocation": "query", "userIdLocation": "query",
                           "agentIdLocation": "omit", "appIdLocation": "omit", "limitField": "limit"},
                "response": {"collection": "results", "idField": "id", "contentField": "memory", "titleField": "omit",
                             "uriField": "omit", "scoreField": "score", "updatedAtField": "omit"}}}))
        .expect("object");
        let entry_of = PresetEntry::from_dynamic(&preset).expect("named");
        let presets: BTreeMap<String, PresetEntry> = [("team-search".to_string(), entry_of.clone())].into();
        let v = verdict(&entry(spec.clone()), &presets, &usable(), no_claims(), &AllowedDestinations::default());
        assert!(v.served(), "{v:?}");
        let pinned = v.preset.expect("pinned");
        assert_eq!((pinned.uid.as_str(), pinned.spec_hash.len()), ("uid-1", 16));

        let mut broken = entry_of;
        if let Ok(s) = broken.spec.as_mut() {
            s.search.path = "/a/../search".into();
        }
        let presets: BTreeMap<String, PresetEntry> = [("team-search".to_string(), broken)].into();
        let v = verdict(&entry(spec), &presets, &usable(), no_claims(), &AllowedDestinations::default());
        assert!(
            matches!(&v.refs, Refs::Unresolved(p) if p.reason == Reason::DialectNotAccepted && p.message.contains("spec.search.path"))
        );
    }

    #[test]
    fn unreadable_object_is_invalid_and_never_served() {
        let mut spec = valid();
        spec["unknownField"] = json!(1);
        let v = judge(spec, &usable());
        assert!(matches!(&v.accepted, Err(p) if p.reason == Reason::InvalidSpec && p.message.contains("unknownField")));
        assert_eq!(v.refs, Refs::NotChecked);
        assert!(!v.served());
    }

    #[test]
    fn disabled_provider_is_judged_but_not_served() {
        let mut spec = valid();
        spec["enabled"] = json!(false);
        let v = judge(spec, &usable());
        assert!(v.accepted.is_ok() && v.refs == Refs::Resolved && !v.served());
    }
}
