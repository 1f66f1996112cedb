//! The vocabulary of condition reasons: each one names a cause a person can act on.
//!
//! The README's table of reasons ("what to do about it") is written from [`Reason::remedy`]; the
//! same strings become Event reasons and the `reason` label of error metrics.

use std::fmt;

/// Why a condition has its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `Accepted=True`: the spec passed every rule.
    Accepted,
    /// `Accepted=False`: a rule refused the spec (the message names the field).
    InvalidSpec,
    /// `ResolvedRefs=True`: the dialect, Secrets and plugin claim were found and usable.
    ResolvedRefs,
    /// `ResolvedRefs=False`: the named DialectPreset does not exist.
    DialectNotFound,
    /// `ResolvedRefs=False`: the named DialectPreset exists but is itself invalid.
    DialectNotAccepted,
    /// `ResolvedRefs=False`: a referenced Secret does not exist.
    SecretNotFound,
    /// `ResolvedRefs=False`: a referenced Secret lacks the referenced key.
    SecretKeyMissing,
    /// `ResolvedRefs=False`: the referenced key holds an unusable value (blank, placeholder, …).
    SecretValueInvalid,
    /// `ResolvedRefs=False`: the Nexent plugin PersistentVolumeClaim does not exist.
    PluginClaimNotFound,
    /// `ResolvedRefs=Unknown`: references are checked once the spec is valid.
    NotChecked,
    /// `Ready=False`: `spec.enabled` is false.
    Disabled,
    /// `Ready=False`: the gateway Deployment is rolling out the config that carries the provider.
    GatewayProgressing,
    /// `Ready=False`: the gateway Deployment exceeded its progress deadline.
    GatewayNotReady,
    /// `Ready=True`: served by a gateway that rolled out its config.
    Ready,
}

impl Reason {
    /// The reason as written in conditions and Events.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Accepted => "Accepted",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::ResolvedRefs => "ResolvedRefs",
            Reason::DialectNotFound => "DialectNotFound",
            Reason::DialectNotAccepted => "DialectNotAccepted",
            Reason::SecretNotFound => "SecretNotFound",
            Reason::SecretKeyMissing => "SecretKeyMissing",
            Reason::SecretValueInvalid => "SecretValueInvalid",
            Reason::PluginClaimNotFound => "PluginClaimNotFound",
            Reason::NotChecked => "NotChecked",
            Reason::Disabled => "Disabled",
            Reason::GatewayProgressing => "GatewayProgressing",
            Reason::GatewayNotReady => "GatewayNotReady",
            Reason::Ready => "Ready",
        }
    }

    /// What a person does about it.
    pub fn remedy(self) -> &'static str {
        match self {
            Reason::Accepted | Reason::ResolvedRefs | Reason::Ready => "nothing",
            Reason::InvalidSpec => {
                "fix the field the message names (`memgate-operator validate` shows the same message)"
            }
            Reason::DialectNotFound => "create the DialectPreset named in spec.dialect.presetRef, or fix the name",
            Reason::DialectNotAccepted => "fix the DialectPreset (its own Accepted condition says what is wrong)",
            Reason::SecretNotFound => "create the Secret in the provider's namespace",
            Reason::SecretKeyMissing => "add the key to the Secret, or fix secretRef.key",
            Reason::SecretValueInvalid => "store the real credential under that key (not blank, not ${NAME})",
            Reason::PluginClaimNotFound => {
                "create the PersistentVolumeClaim Nexent mounts (spec.nexent.pluginClaim) in the provider's namespace"
            }
            Reason::NotChecked => "fix the spec first",
            Reason::Disabled => "set spec.enabled: true to serve it",
            Reason::GatewayProgressing => "wait: pods with the new config are starting",
            Reason::GatewayNotReady => "look at the memgate-gateway Deployment's pods (image, resources, probes)",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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
