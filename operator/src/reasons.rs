//! The vocabulary of condition reasons, as one table: each reason with the conditions it is
//! written on, what it means, who acts on it and what they do.
//!
//! Status messages take their remedy from this table ([`Reason::remedy`]); the README's table
//! ("Conditions and what to do about them") is this table, and a test fails when they differ. The
//! same strings become Event reasons. Owns the words; never decides which reason applies (that is
//! `validate` and `status`).

use std::fmt;

/// Why a condition has its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `Accepted=True`: the spec passed every rule.
    Accepted,
    /// `Accepted=False`: a rule refused the spec (the message names the field).
    InvalidSpec,
    /// `Accepted=False`: the origin or OIDC issuer is outside the platform team's allow-list.
    OriginNotAllowed,
    /// `ResolvedRefs=True`: the dialect, Secrets and plugin claim were found and usable.
    ResolvedRefs,
    /// `ResolvedRefs=False`: the named DialectPreset does not exist.
    DialectNotFound,
    /// `ResolvedRefs=False`: the named DialectPreset exists but is itself invalid.
    DialectNotAccepted,
    /// `ResolvedRefs=False`: a referenced Secret does not exist or lacks the credential label (one
    /// reason for both, so that Secret names cannot be probed).
    SecretNotPermitted,
    /// `ResolvedRefs=False`: a referenced Secret lacks the referenced key.
    SecretKeyMissing,
    /// `ResolvedRefs=False`: the referenced key holds an unusable value (blank, placeholder, …).
    SecretValueInvalid,
    /// `ResolvedRefs=False`: the Nexent plugin PersistentVolumeClaim does not exist.
    PluginClaimNotFound,
    /// `ResolvedRefs=Unknown`: references are checked once the spec is valid.
    NotChecked,
    /// `Ready=True`: `spec.enabled` is false, so its desired state (not served) is reached.
    Disabled,
    /// `Ready=False`: the gateway Deployment is rolling out the config that carries the provider.
    GatewayProgressing,
    /// `Ready=False`: the gateway Deployment exceeded its progress deadline.
    GatewayNotReady,
    /// `Ready=False`: writing a gateway object failed (an admission webhook, a quota, the API
    /// server); retried with backoff.
    GatewayApplyFailed,
    /// `Ready=True`: served by a gateway that rolled out its config.
    Ready,
    /// `Accepted=False`, `Ready=False` (MemoryGateway): an older MemoryGateway shapes the namespace's gateway.
    GatewayConflict,
    /// `Ready=True` (MemoryGateway): no provider in the namespace, so no gateway to shape yet.
    GatewayIdle,
}

/// Who acts on a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    /// Nobody: all is well.
    Nobody,
    /// Nobody yet: the operator or the cluster is still working.
    Wait,
    /// Whoever owns the MemoryProvider.
    ProviderAuthor,
    /// The platform team (DialectPresets, Secrets, claims, the gateways' settings).
    PlatformTeam,
}

impl Actor {
    /// As written in the README's table.
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Nobody => "nobody",
            Actor::Wait => "nobody (wait)",
            Actor::ProviderAuthor => "provider author",
            Actor::PlatformTeam => "platform team",
        }
    }
}

/// What the `Ready` condition's reason means to a GitOps tool: the (Ready, Reconciling, Stalled)
/// conditions it comes with (kstatus convention), hence kstatus's and Argo CD's verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Served as desired: `Ready=True`.
    Done,
    /// Not served, as desired (`spec.enabled: false`): `Ready=True`; Argo CD shows it suspended.
    Off,
    /// Still working, or waiting for something expected: `Ready=False`, `Reconciling=True`.
    Waiting,
    /// Cannot progress until a person acts: `Ready=False`, `Stalled=True`.
    Failed,
}

impl Progress {
    /// The status of `Ready`, `Reconciling` and `Stalled`.
    pub fn conditions(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Progress::Done | Progress::Off => ("True", "False", "False"),
            Progress::Waiting => ("False", "True", "False"),
            Progress::Failed => ("False", "False", "True"),
        }
    }

    /// What kstatus (Flux, kpt, `kubectl`-based pipelines) computes from those conditions.
    pub fn kstatus(self) -> &'static str {
        match self {
            Progress::Done | Progress::Off => "Current",
            Progress::Waiting => "InProgress",
            Progress::Failed => "Failed",
        }
    }

    /// What the Argo CD health check (`charts/memgate/files/argocd-health.lua`) answers.
    pub fn argocd(self) -> &'static str {
        match self {
            Progress::Done => "Healthy",
            Progress::Off => "Suspended",
            Progress::Waiting => "Progressing",
            Progress::Failed => "Degraded",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReasonInfo {
    /// The conditions the reason is written on, e.g. `ResolvedRefs=False, Ready=False`.
    pub conditions: &'static str,
    /// What it means.
    pub meaning: &'static str,
    /// Who acts on it.
    pub actor: Actor,
    /// What they do.
    pub remedy: &'static str,
    /// As the reason of `Ready`, what it means to a GitOps tool; `None` for reasons never on `Ready`.
    pub progress: Option<Progress>,
}

/// The conditions a reason that keeps a provider from being served is written on.
const REFS_NOT_SERVED: &str = "ResolvedRefs=False, Ready=False";

impl Reason {
    /// Every reason, in the order of the README's table.
    pub const ALL: [Reason; 18] = [
        Reason::Accepted,
        Reason::InvalidSpec,
        Reason::OriginNotAllowed,
        Reason::ResolvedRefs,
        Reason::DialectNotFound,
        Reason::DialectNotAccepted,
        Reason::SecretNotPermitted,
        Reason::SecretKeyMissing,
        Reason::SecretValueInvalid,
        Reason::PluginClaimNotFound,
        Reason::NotChecked,
        Reason::Disabled,
        Reason::GatewayProgressing,
        Reason::GatewayNotReady,
        Reason::GatewayApplyFailed,
        Reason::Ready,
        Reason::GatewayConflict,
        Reason::GatewayIdle,
    ];

    /// The reason as written in conditions and Events.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Accepted => "Accepted",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::OriginNotAllowed => "OriginNotAllowed",
            Reason::ResolvedRefs => "ResolvedRefs",
            Reason::DialectNotFound => "DialectNotFound",
            Reason::DialectNotAccepted => "DialectNotAccepted",
            Reason::SecretNotPermitted => "SecretNotPermitted",
            Reason::SecretKeyMissing => "SecretKeyMissing",
            Reason::SecretValueInvalid => "SecretValueInvalid",
            Reason::PluginClaimNotFound => "PluginClaimNotFound",
            Reason::NotChecked => "NotChecked",
            Reason::Disabled => "Disabled",
            Reason::GatewayProgressing => "GatewayProgressing",
            Reason::GatewayNotReady => "GatewayNotReady",
            Reason::GatewayApplyFailed => "GatewayApplyFailed",
            Reason::Ready => "Ready",
            Reason::GatewayConflict => "GatewayConflict",
            Reason::GatewayIdle => "GatewayIdle",
        }
    }

    /// The reason written as `text`, if it is one.
    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// Its row of the table.
    pub fn info(self) -> ReasonInfo {
        let row = |conditions, meaning, actor, remedy| ReasonInfo {
            conditions,
            meaning,
            actor,
            remedy,
            progress: Some(self.progress_of_ready()),
        };
        match self {
            Reason::Accepted => row("Accepted=True", "the spec passed every rule", Actor::Nobody, "nothing"),
            Reason::InvalidSpec => row(
                "Accepted=False, Ready=False",
                "a rule refused the spec, or this operator version cannot read it; the message names the field (a MemoryGateway refused leaves its gateway on the operator's defaults)",
                Actor::ProviderAuthor,
                "fix the field the message names (`memgate-operator validate` shows the same message)",
            ),
            Reason::ResolvedRefs => row(
                "ResolvedRefs=True",
                "the dialect, the referenced Secret keys and the plugin claim were found and are usable",
                Actor::Nobody,
                "nothing",
            ),
            Reason::DialectNotFound => row(
                REFS_NOT_SERVED,
                "the DialectPreset named in `spec.dialect.presetRef` does not exist",
                Actor::ProviderAuthor,
                "create the DialectPreset, or fix the name in `spec.dialect.presetRef`",
            ),
            Reason::DialectNotAccepted => row(
                REFS_NOT_SERVED,
                "the named DialectPreset exists but breaks its own rules",
                Actor::PlatformTeam,
                "fix the DialectPreset (its own `Accepted` condition says what is wrong)",
            ),
            Reason::OriginNotAllowed => row(
                "Accepted=False, Ready=False",
                "the origin or OIDC issuer is outside the destinations the platform team allows (`allowedOrigins`)",
                Actor::PlatformTeam,
                "point the provider at an allowed destination, or add its host to the operator's `allowedOrigins`",
            ),
            Reason::SecretNotPermitted => row(
                REFS_NOT_SERVED,
                "a referenced Secret does not exist in the provider's namespace, or lacks the label `memgate.io/credential: \"true\"` (the same reason for both, so names cannot be probed)",
                Actor::PlatformTeam,
                "if it is meant for memgate, create it there with the label, or label it: `kubectl label secret -n <namespace> <name> memgate.io/credential=true`; otherwise fix `secretRef.name`",
            ),
            Reason::SecretKeyMissing => row(
                REFS_NOT_SERVED,
                "a referenced Secret has no such key",
                Actor::PlatformTeam,
                "add the key to the Secret, or fix `secretRef.key`",
            ),
            Reason::SecretValueInvalid => row(
                REFS_NOT_SERVED,
                "the referenced key holds an unusable value (blank, a `${NAME}` placeholder, a documentation placeholder such as `REPLACE-ME-…`, `changeme` or `<…>`, control characters)",
                Actor::PlatformTeam,
                "store the real credential under that key",
            ),
            Reason::PluginClaimNotFound => row(
                REFS_NOT_SERVED,
                "the PersistentVolumeClaim Nexent mounts its plugins from does not exist",
                Actor::PlatformTeam,
                "create the claim (`spec.nexent.pluginClaim`, else the operator's default) in the provider's namespace, or turn `spec.nexent` off",
            ),
            Reason::NotChecked => row(
                "ResolvedRefs=Unknown",
                "references are checked once the spec is accepted",
                Actor::ProviderAuthor,
                "fix the spec first",
            ),
            Reason::Disabled => row(
                "Ready=True",
                "`spec.enabled` is false: the gateway does not serve the provider, as asked (done, for GitOps tools)",
                Actor::Nobody,
                "nothing; set `spec.enabled: true` to serve it",
            ),
            Reason::GatewayProgressing => row(
                "Ready=False",
                "the gateway is rolling out the config that carries the provider",
                Actor::Wait,
                "wait: pods with the new config are starting",
            ),
            Reason::GatewayNotReady => row(
                "Ready=False",
                "the gateway Deployment exceeded its progress deadline",
                Actor::PlatformTeam,
                "look at the `memgate-gateway` Deployment's pods (image, resources, probes)",
            ),
            Reason::GatewayApplyFailed => row(
                "Ready=False",
                "writing a gateway object failed (the message names the object and the API server's answer); retried with backoff",
                Actor::PlatformTeam,
                "look at what refused the write (an admission webhook, a ResourceQuota, the API server); it is retried on its own",
            ),
            Reason::Ready => row(
                "Ready=True",
                "served by a gateway that rolled out its config; the message names the URL and any replica limit (on a MemoryGateway: its gateway rolled out)",
                Actor::Nobody,
                "nothing",
            ),
            Reason::GatewayConflict => row(
                "Accepted=False, Ready=False",
                "MemoryGateway only: another, older MemoryGateway of the namespace shapes its gateway (at most one per namespace); this one is ignored",
                Actor::PlatformTeam,
                "delete one of the two, or merge them into the older one the message names",
            ),
            Reason::GatewayIdle => row(
                "Ready=True",
                "MemoryGateway only: the namespace has no MemoryProvider, so no gateway runs yet (done, for GitOps tools)",
                Actor::Nobody,
                "nothing; the gateway starts with the namespace's first provider",
            ),
        }
    }

    /// What a person does about it.
    pub fn remedy(self) -> &'static str {
        self.info().remedy
    }

    /// The GitOps meaning of this reason on `Ready`, `None` when it is never there.
    pub fn progress(self) -> Option<Progress> {
        self.info().progress.filter(|_| self.info().conditions.contains("Ready="))
    }

    /// The GitOps meaning the reason would have on `Ready` (see [`Reason::progress`]).
    fn progress_of_ready(self) -> Progress {
        match self {
            Reason::Ready | Reason::GatewayIdle => Progress::Done,
            Reason::Disabled => Progress::Off,
            // Expected to appear or to finish on their own: GitOps tools keep waiting.
            Reason::SecretNotPermitted
            | Reason::DialectNotFound
            | Reason::PluginClaimNotFound
            | Reason::GatewayProgressing
            | Reason::GatewayApplyFailed => Progress::Waiting,
            // A person must act: GitOps tools report a failure at once.
            Reason::InvalidSpec
            | Reason::OriginNotAllowed
            | Reason::DialectNotAccepted
            | Reason::SecretKeyMissing
            | Reason::SecretValueInvalid
            | Reason::GatewayNotReady
            | Reason::GatewayConflict => Progress::Failed,
            // Never the reason of Ready (only of Accepted / ResolvedRefs).
            Reason::Accepted | Reason::ResolvedRefs | Reason::NotChecked => Progress::Waiting,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The table as the README shows it.
pub fn markdown_table() -> String {
    let mut table = String::from(
        "| reason | condition | meaning | who acts | what to do | Ready / Reconciling / Stalled | kstatus | Argo CD |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for reason in Reason::ALL {
        let info = reason.info();
        let conditions: Vec<String> = info.conditions.split(", ").map(|c| format!("`{c}`")).collect();
        let (triple, kstatus, argocd) = match reason.progress() {
            Some(progress) => {
                let (ready, reconciling, stalled) = progress.conditions();
                (format!("{ready} / {reconciling} / {stalled}"), progress.kstatus(), progress.argocd())
            }
            None => ("-".to_string(), "-", "-"),
        };
        table.push_str(&format!(
            "| `{reason}` | {} | {} | {} | {} | {triple} | {kstatus} | {argocd} |\n",
            conditions.join(", "),
            info.meaning,
            info.actor.as_str(),
            info.remedy
        ));
    }
    table
}

/// A failed check: the reason and a message naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The reason.
    pub reason: Reason,
    /// What is wrong and where; never a credential.
    pub message: String,
}

impl Problem {
    /// A problem with `reason`.
    pub fn new(reason: Reason, message: impl Into<String>) -> Problem {
        Problem { reason, message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_in_the_table_once() {
        let mut names: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Reason::ALL.len());
    }

    #[test]
    fn only_the_good_reasons_need_nothing_done() {
        for reason in Reason::ALL {
            let info = reason.info();
            let good = info.conditions.ends_with("=True");
            assert_eq!(info.actor == Actor::Nobody, good, "{reason}");
            assert_eq!(info.remedy.starts_with("nothing"), good, "{reason}");
        }
    }

    #[test]
    fn every_reason_of_ready_has_one_gitops_meaning_and_the_others_none() {
        for reason in Reason::ALL {
            let on_ready = reason.info().conditions.contains("Ready=");
            assert_eq!(reason.progress().is_some(), on_ready, "{reason}");
        }
        assert_eq!(Reason::Disabled.progress(), Some(Progress::Off), "disabled is done, not in progress");
        assert_eq!(Reason::SecretNotPermitted.progress(), Some(Progress::Waiting), "a Secret may still be created");
        assert_eq!(Reason::InvalidSpec.progress(), Some(Progress::Failed), "a person must act at once");
        for progress in [Progress::Done, Progress::Off, Progress::Waiting, Progress::Failed] {
            let (_, reconciling, stalled) = progress.conditions();
            assert!(!(reconciling == "True" && stalled == "True"), "never both");
        }
    }

    /// The README's table is this table: edit the table in this file, then paste the printed one.
    #[test]
    fn the_readme_table_is_the_code_table() {
        let readme = include_str!("../../README.md");
        let heading = "### Conditions and what to do about them\n\n";
        let start = readme.find(heading).expect("the README's reason section") + heading.len();
        let end = readme[start..].find("\n\n").map_or(readme.len(), |i| start + i + 1);
        let expected = markdown_table();
        assert!(
            readme[start..end] == expected,
            "README.md's reason table differs from operator/src/reasons.rs; it should read:\n\n{expected}"
        );
    }
}
