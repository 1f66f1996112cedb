//! The memgate API (`memgate.io/v1alpha1`).
//!
//! - [`DialectPreset`]: a closed, versioned search dialect (cluster-scoped, immutable spec).
//! - [`MemoryProvider`]: one upstream endpoint + dialect + scope + credential reference.
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
pub mod manifest;
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
pub use memory_provider::{
    AccessSpec, BearerTokenAccess, Credentials, DialectSource, Endpoint, McpSpec, MemoryProvider, MemoryProviderSpec,
    MemoryProviderStatus, NexentSpec, OidcAccess, OidcClaimValues, PinnedPreset, ProviderEndpoints, Scope,
    SecretKeyRef, ServiceAccountAccess, ServiceAccountRef, ServiceAccountVerification,
};

/// API group of both resources.
pub const GROUP: &str = "memgate.io";
/// API version of both resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` string of both resources.
pub const API_VERSION: &str = "memgate.io/v1alpha1";
