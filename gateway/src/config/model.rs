//! The resolved, ready-to-serve form of a provider.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use memgate_crds::validation::Credential;
use memgate_crds::{DialectPresetSpec, OidcAccess, ProviderLimits, ServiceAccountAccess};
use memgate_presets::{ContentEncoding, WriteContract};

use crate::engine::Target;
use crate::metrics::ProviderSeries;

pub use memgate_crds::manifest::{SECRET_MOUNT_API_VERSION, SECRET_MOUNT_KIND};

/// Everything served, keyed by provider name (the URL segment of `/mcp/<name>`).
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Enabled providers by name.
    pub providers: BTreeMap<String, Arc<Provider>>,
    /// Names of providers present but disabled (`spec.enabled: false`): not served.
    pub disabled: Vec<String>,
}

impl Snapshot {
    /// The enabled provider called `name`.
    pub fn provider(&self, name: &str) -> Option<&Arc<Provider>> {
        self.providers.get(name)
    }
}

/// One provider, validated and resolved: dialect, credential and access are all in hand.
#[derive(Debug)]
pub struct Provider {
    /// `metadata.name`: the URL segment and the metrics label.
    pub name: String,
    /// `metadata.namespace` (default `default`).
    pub namespace: String,
    /// Resolved dialect id (built-in id or DialectPreset name).
    pub dialect_id: String,
    /// The search grammar.
    pub dialect: DialectPresetSpec,
    /// How the content field is encoded (always plain for custom presets).
    pub encoding: ContentEncoding,
    /// Verified write contract (built-ins only).
    pub write: Option<WriteContract>,
    /// Where and as whom upstream is called.
    pub target: Target,
    /// Serve `POST /mcp/<name>`.
    pub mcp: bool,
    /// Serve Nexent search.
    pub nexent_search: bool,
    /// Serve Nexent ingest.
    pub nexent_ingest: bool,
    /// Who may call.
    pub access: Access,
    /// `spec.limits`, enforced by [`crate::limits`].
    pub limits: Option<ProviderLimits>,
    /// The metric series its successful calls count into (filled by the first of each).
    pub series: ProviderSeries,
    /// [`Provider::key`], formatted on its first use.
    pub key_text: KeyText,
}

/// Where [`Provider::key`] keeps its text: only [`Provider::key`] fills it (from the provider's
/// namespace and name), so it cannot disagree with them.
#[derive(Debug, Default)]
pub struct KeyText(OnceLock<String>);

impl Provider {
    /// `<namespace>/<name>`: how the engine's budgets and the audit trail name the provider;
    /// formatted once per provider, not per call.
    pub fn key(&self) -> &str {
        self.key_text.0.get_or_init(|| format!("{}/{}", self.namespace, self.name))
    }
}

/// Resolved access rules of a provider.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Unauthenticated calls allowed.
    pub anonymous: bool,
    /// Static bearer token callers must present.
    pub bearer_token: Option<Credential>,
    /// Name of the Secret holding [`Access::bearer_token`] (how the audit trail names such callers).
    pub bearer_token_secret: Option<String>,
    /// ServiceAccount tokens accepted (audience + allowed accounts).
    pub service_accounts: Option<ServiceAccountAccess>,
    /// OAuth access tokens from an OpenID provider.
    pub oidc: Option<OidcAccess>,
    /// Use the caller's subject as `user_id`.
    pub bind_user_id_to_subject: bool,
}
