//! Status vocabulary shared by both resources.

/// The standard Kubernetes condition (`type`, `status`, `reason`, `message`, `lastTransitionTime`,
/// `observedGeneration`).
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Condition types memgate writes.
pub mod condition_type {
    /// The spec passed validation.
    pub const ACCEPTED: &str = "Accepted";
    /// Everything the spec refers to (dialect, Secret, plugin claim) was found and usable.
    pub const RESOLVED_REFS: &str = "ResolvedRefs";
    /// The provider is served by a gateway (for a DialectPreset: it is valid).
    pub const READY: &str = "Ready";
    /// Abnormal-true (kstatus convention): the operator is still working toward Ready, or waits
    /// for something expected to appear (a rollout, a Secret, a DialectPreset, a retried write).
    pub const RECONCILING: &str = "Reconciling";
    /// Abnormal-true (kstatus convention): the operator cannot make progress until a person acts.
    pub const STALLED: &str = "Stalled";
}
