//! Every rule that makes a memgate object safe to serve (reference §2-§3), as pure functions.
//!
//! The operator, the gateway's standalone mode and `memgate-operator validate` call these same
//! functions. Single-object rules mirror the CRD's CEL rules (so `kubectl apply` refuses what it
//! can); cross-object rules (scope against dialect, write contract, Secret values) live only here.
//! Every message names the field at fault and never contains a credential value.

mod credential;
pub mod destination;
mod dialect;
mod gateway;
mod limits;
pub mod names;
mod oidc;
mod origin;
mod path;
mod provider;
mod scope;

pub use credential::{Credential, credential_value};
pub use dialect::{dialect_preset, dialect_spec};
pub use gateway::{RESERVED_ENV, RESERVED_PATHS, memory_gateway};
pub use limits::provider_limits;
pub use oidc::{MAX_OIDC_URL, is_claim_name, is_scope_token, parse_issuer};
pub use origin::parse_origin;
pub use path::{check_path, join_url};
pub use provider::{DialectView, memory_provider, provider_against_dialect, provider_identity};
pub use scope::{MAX_SCOPE_ID_CHARS, scope_id_problem};

use std::fmt;

/// One problem in an object: the field at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Field path such as `spec.endpoint.origin`.
    pub field: String,
    /// What is wrong and how to fix it; never contains a credential.
    pub message: String,
}

impl Violation {
    /// A violation of `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Violation { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Several violations, for `Result` returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    /// `Ok(())` when empty.
    pub fn into_result(self) -> Result<(), Violations> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}
