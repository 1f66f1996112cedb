//! The memgate API (`memgate.io/v1alpha1`).
//!
//! - [`DialectPreset`]: a closed, versioned search dialect (cluster-scoped, immutable spec).
//! - [`MemoryProvider`]: one upstream endpoint + dialect + scope + credential reference.
//! - [`MemoryGateway`]: how one namespace's gateway runs (optional, at most one per namespace).
//!
//! Besides the types this crate owns every rule that makes them safe ([`validation`]), the
//! parsing of the YAML a person writes ([`manifest`]) and the CRD documents ([`crd`]). It performs
//! no I/O but the bounded reading of YAML source files ([`source_file`]): the operator, the gateway
//! and the `validate` command all call the same functions, so they can never disagree about what is
//! valid, about what a provider refers to ([`references`]), or about what input is too large or
//! not a file.

pub mod builtin_ids;
pub mod bundle;
pub mod crd;
pub mod dialect_preset;
pub mod limits;
pub mod manifest;
pub mod memory_gateway;
pub mod memory_provider;
pub mod references;
pub mod source_file;
pub mod status;
pub mod validation;

pub use dialect_preset::{
    AuthScheme, Collection, ContentField, DialectPreset, DialectPresetSpec, DialectPresetStatus, IdField, IdLocation,
    LimitField, QueryLocation, ResponseSpec, ScoreField, SearchMethod, SearchSpec, TitleField, UpdatedAtField,
    UriField,
};
pub use limits::{CallRate, ProviderLimits, UnitRate, UpstreamLimits};
pub use memory_gateway::{
    GatewayAutoscaling, GatewayDisruptionBudget, GatewayListener, GatewayNetworkPolicy, GatewayPodMetadata,
    GatewayPodSpec, GatewayPodTemplate, GatewayUrls, MemoryGateway, MemoryGatewaySpec, MemoryGatewayStatus,
};
pub use memory_provider::{
    AccessSpec, BearerTokenAccess, Credentials, DialectSource, Endpoint, McpSpec, MemoryProvider, MemoryProviderSpec,
    MemoryProviderStatus, NexentSpec, OidcAccess, OidcClaimValues, PinnedPreset, ProviderEndpoints, Scope,
    SecretKeyRef, ServiceAccountAccess, ServiceAccountRef, ServiceAccountVerification,
};

/// The label a platform team puts on a Secret to let MemoryProviders of its namespace use it
/// (credentials, callers' bearer tokens, the shared ledger URL). A provider can name any Secret;
/// only one carrying this label with the value [`CREDENTIAL_LABEL_VALUE`] is ever read, mounted or
/// sent. Argo CD's `argocd.argoproj.io/secret-type` label is the same idea.
pub const CREDENTIAL_LABEL: &str = "memgate.io/credential";
/// The value of [`CREDENTIAL_LABEL`] that opts a Secret in.
pub const CREDENTIAL_LABEL_VALUE: &str = "true";
/// [`CREDENTIAL_LABEL`]`=`[`CREDENTIAL_LABEL_VALUE`], as a label selector.
pub const CREDENTIAL_SELECTOR: &str = "memgate.io/credential=true";

/// True when `labels` opt a Secret in as a memgate credential.
pub fn is_credential(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels.and_then(|l| l.get(CREDENTIAL_LABEL)).is_some_and(|v| v == CREDENTIAL_LABEL_VALUE)
}

/// API group of both resources.
pub const GROUP: &str = "memgate.io";
/// API version of both resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` string of both resources.
pub const API_VERSION: &str = "memgate.io/v1alpha1";
