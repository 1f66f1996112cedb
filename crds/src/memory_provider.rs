//! `MemoryProvider`: one upstream memory service served to agents.
//!
//! A provider binds exactly one endpoint, one dialect and one fixed scope, and names its
//! credential by Secret reference only. The gateway serves it as one Remote MCP server and,
//! when asked, as one Nexent provider.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::limits::ProviderLimits;
use crate::status::Condition;

/// Default upstream timeout in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u32 = 5000;
/// Largest upstream timeout in milliseconds.
pub const MAX_TIMEOUT_MS: u32 = 30000;
/// Plugin volume claim used when `spec.nexent.pluginClaim` is not set.
pub const DEFAULT_PLUGIN_CLAIM: &str = "nexent-memory-plugins";

fn default_true() -> bool {
    true
}

fn default_timeout_ms() -> u32 {
    DEFAULT_TIMEOUT_MS
}

/// Spec of a `MemoryProvider`.
// kube's printcolumn(...) lists repeat keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "memgate.io",
    version = "v1alpha1",
    kind = "MemoryProvider",
    namespaced,
    status = "MemoryProviderStatus",
    shortname = "mprov",
    category = "memgate",
    derive = "PartialEq",
    cel,
    doc = "One upstream memory service (endpoint + dialect + fixed scope + credential by Secret reference), served as one Remote MCP server and optionally one Nexent provider.",
    printcolumn(name = "Dialect", type_ = "string", json_path = ".status.dialect"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".status.endpoints.mcp"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = Rule::new("!has(self.dialect.presetRef) || !has(self.nexent) || !has(self.nexent.ingest) || !self.nexent.ingest").message("spec.nexent.ingest: a custom DialectPreset describes search only; ingest needs a built-in dialect with a verified write contract"))]
#[x_kube(validation = Rule::new("!has(self.access.bindUserIdToSubject) || !self.access.bindUserIdToSubject || !has(self.scope) || !has(self.scope.userId)").message("spec.scope.userId must be unset when spec.access.bindUserIdToSubject is true: the caller's identity supplies it"))]
#[x_kube(validation = Rule::new("!has(self.dialect.builtin) || !has(self.scope) || !has(self.scope.userId) || !self.scope.userId.matches('[\\\\s\\\\p{Z}\\\\x{85}]')").message("spec.scope.userId must not contain whitespace (spaces included, also at either end) with a built-in dialect: the Mem0 server refuses such ids with 400"))]
#[x_kube(validation = Rule::new("!has(self.dialect.builtin) || !has(self.scope) || !has(self.scope.agentId) || !self.scope.agentId.matches('[\\\\s\\\\p{Z}\\\\x{85}]')").message("spec.scope.agentId must not contain whitespace (spaces included, also at either end) with a built-in dialect: the Mem0 server refuses such ids with 400"))]
#[x_kube(validation = Rule::new("!has(self.dialect.builtin) || !has(self.scope) || !has(self.scope.appId) || !self.scope.appId.matches('[\\\\s\\\\p{Z}\\\\x{85}]')").message("spec.scope.appId must not contain whitespace (spaces included, also at either end) with a built-in dialect: the Mem0 server refuses such ids with 400"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryProviderSpec {
    /// Serve this provider at all (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Which dialect the upstream speaks.
    pub dialect: DialectSource,
    /// Where the upstream service is.
    pub endpoint: Endpoint,
    /// The upstream credential, by Secret reference.
    pub credentials: Credentials,
    /// Fixed routing ids sent with every call.
    #[serde(default)]
    pub scope: Scope,
    /// Upstream timeout in milliseconds, 1..30000 (default 5000).
    #[serde(default = "default_timeout_ms")]
    #[schemars(range(min = 1, max = 30000))]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 30000").message("spec.timeoutMs must be between 1 and 30000"))]
    pub timeout_ms: u32,
    /// Remote MCP surface.
    #[serde(default)]
    pub mcp: McpSpec,
    /// Nexent search/ingest surface (off by default).
    #[serde(default)]
    pub nexent: NexentSpec,
    /// Who may call this provider. Nothing is open unless stated here.
    pub access: AccessSpec,
    /// Per-caller and upstream limits (none by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ProviderLimits>,
}

/// Exactly one dialect source.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new("has(self.builtin) != has(self.presetRef)").message("spec.dialect: set exactly one of builtin or presetRef"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DialectSource {
    /// Id of a built-in dialect compiled into memgate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self in ['mem0-platform-v3', 'mem0-oss-rest-2026-08', 'aliyun-polardb-mysql-2026-08']").message("spec.dialect.builtin must be one of mem0-platform-v3, mem0-oss-rest-2026-08, aliyun-polardb-mysql-2026-08"))]
    #[schemars(length(max = 253))]
    pub builtin: Option<String>,
    /// Name of a cluster-scoped `DialectPreset`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() <= 253 && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')").message("spec.dialect.presetRef must be a DialectPreset name (lower-case DNS subdomain)"))]
    #[schemars(length(max = 253))]
    pub preset_ref: Option<String>,
}

/// Upstream location, validated as origin and base path separately.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!self.origin.startsWith('http://') || (has(self.allowInsecureHttp) && self.allowInsecureHttp)").message("spec.endpoint.origin: http is refused unless spec.endpoint.allowInsecureHttp is true; use https"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Endpoint {
    /// `scheme://host[:port]` only: no user info, path, query or fragment.
    #[x_kube(validation = Rule::new("self.matches('^https?://([A-Za-z0-9.-]+|\\\\[[0-9A-Fa-f:.]+\\\\])(:[0-9]{1,5})?/?$')").message("spec.endpoint.origin must be scheme://host[:port] with scheme http or https, and no user info, path, query or fragment"))]
    #[schemars(length(max = 300))]
    pub origin: String,
    /// Path prefix joined before the dialect's path (default empty).
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == '' || self.startsWith('/')").message("spec.endpoint.basePath must be empty or start with '/'"))]
    #[x_kube(validation = Rule::new("self.matches(\"^[A-Za-z0-9/._~!$&'()*+,;=:@-]*$\")").message("spec.endpoint.basePath may only contain unreserved URL characters: no '?', '#', '%', '\\', spaces or control characters"))]
    #[x_kube(validation = Rule::new("!self.contains('//')").message("spec.endpoint.basePath must not contain '//'"))]
    #[x_kube(validation = Rule::new("!self.matches('(^|/)[.][.]?(/|$)')").message("spec.endpoint.basePath must not contain '.' or '..' segments"))]
    #[x_kube(validation = Rule::new("self.size() <= 512").message("spec.endpoint.basePath must be at most 512 characters"))]
    #[schemars(length(max = 512))]
    pub base_path: String,
    /// Allow plain `http` (trusted private networks only; default false).
    #[serde(default)]
    pub allow_insecure_http: bool,
}

/// The upstream credential.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Credentials {
    /// Secret key in the provider's namespace holding the credential.
    pub secret_ref: SecretKeyRef,
}

/// A key of a Secret in the same namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// Secret name.
    #[x_kube(validation = Rule::new("self.size() <= 253 && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')").message("secretRef.name must be a Secret name (lower-case DNS subdomain)"))]
    #[schemars(length(max = 253))]
    pub name: String,
    /// Key inside the Secret's data.
    #[x_kube(validation = Rule::new("self.size() <= 253 && self.matches('^[-._a-zA-Z0-9]+$')").message("secretRef.key must be a Secret data key (letters, digits, '-', '_' and '.')"))]
    #[schemars(length(max = 253))]
    pub key: String,
}

/// Fixed routing ids; each must be set exactly when the dialect sends it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scope {
    /// Sent as `user_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.size() <= 256 && !self.matches('[\\\\x00-\\\\x1f\\\\x7f]')").message("spec.scope.userId must be 1 to 256 characters without control characters"))]
    #[schemars(length(max = 256))]
    pub user_id: Option<String>,
    /// Sent as `agent_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.size() <= 256 && !self.matches('[\\\\x00-\\\\x1f\\\\x7f]')").message("spec.scope.agentId must be 1 to 256 characters without control characters"))]
    #[schemars(length(max = 256))]
    pub agent_id: Option<String>,
    /// Sent as `app_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.size() <= 256 && !self.matches('[\\\\x00-\\\\x1f\\\\x7f]')").message("spec.scope.appId must be 1 to 256 characters without control characters"))]
    #[schemars(length(max = 256))]
    pub app_id: Option<String>,
}

/// Remote MCP surface of a provider.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpSpec {
    /// Serve `POST /mcp/<provider>` (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
}

impl Default for McpSpec {
    fn default() -> Self {
        McpSpec { enabled: true }
    }
}

/// Nexent surface of a provider.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NexentSpec {
    /// Serve Nexent search (default false).
    #[serde(default)]
    pub search: bool,
    /// Serve Nexent ingest; built-in dialects with a write contract only (default false).
    #[serde(default)]
    pub ingest: bool,
    /// PersistentVolumeClaim holding Nexent's plugin folder (default `nexent-memory-plugins`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() <= 253 && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')").message("spec.nexent.pluginClaim must be a PersistentVolumeClaim name (lower-case DNS subdomain)"))]
    #[schemars(length(max = 253))]
    pub plugin_claim: Option<String>,
}

impl NexentSpec {
    /// True when any Nexent operation is served.
    pub fn any(&self) -> bool {
        self.search || self.ingest
    }

    /// The plugin claim name, defaulted to [`DEFAULT_PLUGIN_CLAIM`].
    pub fn plugin_claim(&self) -> &str {
        self.plugin_claim_or(DEFAULT_PLUGIN_CLAIM)
    }

    /// The plugin claim name, defaulted to `default` (an operator's configured default claim).
    pub fn plugin_claim_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.plugin_claim.as_deref().unwrap_or(default)
    }
}

/// Who may call a provider. Every method is opt-in; with none set nobody can call.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new("(has(self.anonymous) && self.anonymous) || has(self.bearerToken) || has(self.serviceAccounts) || has(self.oidc)").message("spec.access: no caller could reach this provider; set anonymous: true, bearerToken, serviceAccounts or oidc"))]
#[x_kube(validation = Rule::new("!(has(self.bindUserIdToSubject) && self.bindUserIdToSubject) || has(self.serviceAccounts) || has(self.oidc)").message("spec.access.bindUserIdToSubject needs spec.access.serviceAccounts or spec.access.oidc: only those tokens name the caller"))]
#[x_kube(validation = Rule::new("!(has(self.anonymous) && self.anonymous && has(self.bindUserIdToSubject) && self.bindUserIdToSubject)").message("spec.access.bindUserIdToSubject needs an authenticated caller and cannot be combined with anonymous: true"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccessSpec {
    /// Allow unauthenticated calls (explicit opt-in; default false).
    #[serde(default)]
    pub anonymous: bool,
    /// A static bearer token kept in a Secret (what Nexent's backend uses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token: Option<BearerTokenAccess>,
    /// Kubernetes ServiceAccount tokens bound to an audience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<ServiceAccountAccess>,
    /// OAuth 2.0 access tokens (JWTs) from an OpenID provider: memgate as an MCP authorization
    /// resource server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcAccess>,
    /// Send the authenticated caller's subject as `user_id` instead of a fixed `scope.userId`.
    #[serde(default)]
    pub bind_user_id_to_subject: bool,
}

/// Most entries in each OIDC list (audiences, scopes, subjects, claim values).
pub const MAX_OIDC_LIST: usize = 32;

/// OAuth 2.0 bearer access tokens issued by one OpenID provider, verified by signature against the
/// provider's published keys (JWKS), never by calling it per request.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new("!self.issuer.startsWith('http://') || (has(self.allowInsecureHttp) && self.allowInsecureHttp)").message("spec.access.oidc.issuer: http is refused unless spec.access.oidc.allowInsecureHttp is true; use https"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcAccess {
    /// Issuer URL, exactly as the provider writes it in its discovery document and in `iss`
    /// (discovery: `<issuer>/.well-known/openid-configuration`). https unless `allowInsecureHttp`.
    #[x_kube(validation = Rule::new("self.size() <= 300 && self.matches('^https?://[A-Za-z0-9.:\\\\[\\\\]-]+(/[A-Za-z0-9._~!$&()*+,;=:@%/-]*)?$')").message("spec.access.oidc.issuer must be an http(s) URL with a host, at most 300 characters, without user info, query or fragment"))]
    #[schemars(length(max = 300))]
    pub issuer: String,
    /// Allow a plain `http` issuer (local development only; default false).
    #[serde(default)]
    pub allow_insecure_http: bool,
    /// Accepted `aud` values (any one suffices); default: the provider's canonical MCP resource URL
    /// (`<public URL>/mcp/<provider>`). At most 32, each 1 to 300 characters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(a, a.size() >= 1 && a.size() <= 300)").message("spec.access.oidc.audiences entries must be 1 to 300 characters"))]
    #[schemars(length(max = 32), inner(length(max = 300)))]
    pub audiences: Vec<String>,
    /// Scopes every token must carry (in `scope` or `scp`); advertised in the protected resource
    /// metadata and in `WWW-Authenticate`. At most 32 scope tokens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(s, s.size() >= 1 && s.size() <= 128 && s.matches('^[!#-\\\\[\\\\]-~]+$'))").message("spec.access.oidc.requiredScopes entries must be 1 to 128 visible ASCII characters other than double quote and backslash"))]
    #[schemars(length(max = 32), inner(length(max = 128)))]
    pub required_scopes: Vec<String>,
    /// Claim holding the caller's identity (default `sub`); its value must be a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() <= 64 && self.matches('^[A-Za-z0-9_.:-]+$')").message("spec.access.oidc.subjectClaim must be a claim name of 1 to 64 letters, digits, '_', '.', ':' or '-'"))]
    #[schemars(length(max = 64))]
    pub subject_claim: Option<String>,
    /// Only these subjects may call (exact match); unset: any subject with a valid token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(validation = Rule::new("self.all(s, s.size() >= 1 && s.size() <= 256)").message("spec.access.oidc.allowedSubjects entries must be 1 to 256 characters"))]
    #[schemars(length(max = 32), inner(length(max = 256)))]
    pub allowed_subjects: Vec<String>,
    /// Only callers whose group/role claim holds one of these values may call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_claim_values: Option<OidcClaimValues>,
}

impl OidcAccess {
    /// The subject claim, defaulted to `sub`.
    pub fn subject_claim(&self) -> &str {
        self.subject_claim.as_deref().unwrap_or("sub")
    }
}

/// A group or role claim and the values of it that are allowed (any one suffices).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcClaimValues {
    /// Claim name, e.g. `groups` or `roles`; its value is a string or a list of strings.
    #[x_kube(validation = Rule::new("self.size() <= 64 && self.matches('^[A-Za-z0-9_.:-]+$')").message("spec.access.oidc.allowedClaimValues.claim must be a claim name of 1 to 64 letters, digits, '_', '.', ':' or '-'"))]
    #[schemars(length(max = 64))]
    pub claim: String,
    /// Allowed values; 1 to 32 entries of 1 to 256 characters.
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.all(v, v.size() >= 1 && v.size() <= 256)").message("spec.access.oidc.allowedClaimValues.values must list 1 to 32 values of 1 to 256 characters"))]
    #[schemars(length(max = 32), inner(length(max = 256)))]
    pub values: Vec<String>,
}

/// Static bearer token access.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BearerTokenAccess {
    /// Secret key holding the token.
    pub secret_ref: SecretKeyRef,
}

/// ServiceAccount token access.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceAccountAccess {
    /// Audience the caller's projected token must be bound to. Default: the URL of the gateway
    /// that serves the provider (its MemoryGateway's `publicURL`, else
    /// `http://memgate-gateway.<namespace>.svc:<port>`), so that a token minted for one gateway is
    /// refused by every other. A shared word (`memgate`) works too, but then a token sent to any
    /// gateway, or to any other service accepting that word, can be replayed against this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.size() <= 253").message("spec.access.serviceAccounts.audience must be 1 to 253 characters"))]
    #[schemars(length(max = 253))]
    pub audience: Option<String>,
    /// ServiceAccounts allowed to call; 1 to 32 entries.
    #[x_kube(validation = Rule::new("self.size() >= 1").message("spec.access.serviceAccounts.allowed must list 1 to 32 ServiceAccounts"))]
    #[schemars(length(max = 32))]
    pub allowed: Vec<ServiceAccountRef>,
    /// How tokens are verified: `tokenReview` (default: the API server reviews each new token) or
    /// `jwks` (offline, by signature against the cluster's published keys; no API rights needed,
    /// but a token stays valid until it expires even after its pod or ServiceAccount is deleted).
    #[serde(default, skip_serializing_if = "ServiceAccountVerification::is_default")]
    pub verification: ServiceAccountVerification,
}

/// How ServiceAccount tokens are verified.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ServiceAccountVerification {
    /// A TokenReview per new token (cached briefly): revocation is seen within the cache TTL.
    #[default]
    TokenReview,
    /// Offline: signature, issuer, audience and expiry checked against the API server's OIDC
    /// discovery (`/.well-known/openid-configuration`, `/openid/v1/jwks`).
    Jwks,
}

impl ServiceAccountVerification {
    /// True for the default (`tokenReview`).
    pub fn is_default(&self) -> bool {
        *self == ServiceAccountVerification::TokenReview
    }
}

/// One allowed ServiceAccount, or every ServiceAccount of a namespace when `name` is unset.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceAccountRef {
    /// Namespace of the ServiceAccount.
    #[x_kube(validation = Rule::new("self.size() <= 63 && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')").message("serviceAccounts.allowed[].namespace must be a namespace name"))]
    #[schemars(length(max = 63))]
    pub namespace: String,
    /// Name of the ServiceAccount; unset allows every ServiceAccount of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() <= 253 && self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')").message("serviceAccounts.allowed[].name must be a ServiceAccount name"))]
    #[schemars(length(max = 253))]
    pub name: Option<String>,
}

/// Observed state of a `MemoryProvider`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryProviderStatus {
    /// Generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted`, `ResolvedRefs` and `Ready`, then `Reconciling` and `Stalled` (abnormal-true, the
    /// kstatus convention: at most one is True, restating `Ready`'s reason).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Resolved dialect id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
    /// URLs where the provider is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<ProviderEndpoints>,
    /// The DialectPreset a `presetRef` resolved to, pinned by uid and spec hash so that a preset
    /// deleted and re-created under the same name is noticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<PinnedPreset>,
}

/// The DialectPreset object a provider was last rendered with.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PinnedPreset {
    /// `metadata.name` of the DialectPreset (the dialect id).
    pub name: String,
    /// `metadata.uid` of the DialectPreset object.
    pub uid: String,
    /// SHA-256 (hex, first 16 characters) of its spec as JSON.
    pub spec_hash: String,
}

/// In-cluster URLs of a served provider.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProviderEndpoints {
    /// Remote MCP URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<String>,
    /// Nexent base URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nexent: Option<String>,
}
