//! Who may call a provider: the caller's credentials checked against the provider's [`Access`].
//!
//! Owns the decision (allowed as whom, or refused as unauthenticated / forbidden / lacking a scope)
//! for both surfaces. It never stores, logs or formats a presented token: static tokens are
//! compared as SHA-256 digests in constant time, ServiceAccount tokens are reviewed by the API
//! server ([`TokenReviewer`], cached under a digest only) or verified offline against the cluster's
//! keys, OIDC access tokens are verified against their issuer's keys ([`verify`], [`keys`]).
//!
//! Rules, in order:
//! 1. No `Authorization` header: allowed (as nobody) only when `anonymous: true` and the provider
//!    does not bind `userId` to the caller; otherwise unauthenticated.
//! 2. Anything but exactly one `Authorization: Bearer <token>`: unauthenticated (a bad credential
//!    never falls back to anonymous access).
//! 3. The provider's static bearer token: allowed as nobody (a shared token names no one, so a
//!    provider binding `userId` to the caller refuses it as forbidden).
//! 4. A JWT whose (not yet verified) `iss` is the provider's `oidc.issuer`, when `oidc` is set: it
//!    is verified by [`verify::verify`] (signature, exact issuer, audience, expiry, scopes,
//!    allow-lists); a missing scope is [`AuthError::InsufficientScope`], a subject or claim value
//!    outside the allow-lists forbidden, anything else unauthenticated. The caller's subject is
//!    [`subject::oidc_user_id`] of issuer and subject claim.
//! 5. Otherwise a ServiceAccount token, when `serviceAccounts` is set: reviewed for the provider's
//!    audience (`verification: tokenReview`), or verified offline against the API server's keys
//!    (`verification: jwks`); a token not valid for that audience is unauthenticated; a valid
//!    token whose subject `system:serviceaccount:<ns>:<name>` is not in `allowed` is forbidden.
//! 6. Anything else: unauthenticated.
//!
//! Every decision is counted in `memgate_gateway_auth_checks_total` by provider, method and
//! outcome (a fixed reason word): never a token, a subject or a claim.

pub mod keys;
mod review;
pub mod subject;
pub mod verify;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::Access;
use crate::metrics::AuthChecks;
use keys::{KeySource, KeyStore};
use memgate_crds::{OidcAccess, ServiceAccountAccess, ServiceAccountVerification};
pub use review::{REVIEW_CACHE_CAPACITY, REVIEW_CACHE_TTL, REVIEW_TIMEOUT, Review, TokenReviewer};
use verify::{Refusal, TokenRules};

/// Longest bearer token looked at; longer ones are refused without a review.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Prefix of a ServiceAccount's username in Kubernetes.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The authenticated caller of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// `system:serviceaccount:<ns>:<name>` for a ServiceAccount; `None` for anonymous and
    /// static-token callers.
    pub subject: Option<String>,
    /// Who the caller was verified as (the audit trail's `caller`).
    pub identity: CallerIdentity,
    /// The connection's peer address, when known: how anonymous callers are told apart for limits.
    pub client: Option<std::net::IpAddr>,
}

/// The identity a caller was verified as, by kind. Its [`std::fmt::Display`] is the audit form:
/// `serviceaccount:<namespace>:<name>`, `oidc:<issuer>#<subject>`, `bearer:<Secret name>` or
/// `anonymous`. Never a token: a static bearer token is named by the Secret that holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CallerIdentity {
    /// No credential (the provider allows anonymous calls).
    #[default]
    Anonymous,
    /// The provider's static bearer token, from the Secret named here.
    Bearer {
        /// Name of the Secret holding the token (`spec.access.bearerToken.secretRef.name`).
        secret: String,
    },
    /// A reviewed or verified ServiceAccount token.
    ServiceAccount {
        /// The account's namespace.
        namespace: String,
        /// The account's name.
        name: String,
    },
    /// A verified OIDC access token.
    Oidc {
        /// The exact issuer.
        issuer: String,
        /// The subject claim the provider reads (`sub` unless `subjectClaim` says otherwise).
        subject: String,
    },
}

impl CallerIdentity {
    /// The kind word: `anonymous`, `bearer`, `serviceaccount` or `oidc`.
    pub fn kind(&self) -> &'static str {
        match self {
            CallerIdentity::Anonymous => "anonymous",
            CallerIdentity::Bearer { .. } => "bearer",
            CallerIdentity::ServiceAccount { .. } => "serviceaccount",
            CallerIdentity::Oidc { .. } => "oidc",
        }
    }
}

impl std::fmt::Display for CallerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallerIdentity::Anonymous => f.write_str("anonymous"),
            CallerIdentity::Bearer { secret } => write!(f, "bearer:{secret}"),
            CallerIdentity::ServiceAccount { namespace, name } => write!(f, "serviceaccount:{namespace}:{name}"),
            CallerIdentity::Oidc { issuer, subject } => write!(f, "oidc:{issuer}#{subject}"),
        }
    }
}

/// Why a call was refused. Carries no detail about the presented credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credential, or one that is not valid for this provider (HTTP 401).
    #[error("authentication required")]
    Unauthenticated,
    /// A valid credential of a caller this provider does not allow (HTTP 403).
    #[error("caller not allowed")]
    Forbidden,
    /// A valid OAuth access token without a scope the provider requires (HTTP 403,
    /// `error="insufficient_scope"`).
    #[error("insufficient scope")]
    InsufficientScope,
    /// The token cannot be verified now: the Kubernetes API or the token issuer's keys are not
    /// configured or not reachable (HTTP 503).
    #[error("caller identity cannot be verified now")]
    Unavailable,
}

/// Checks callers against a provider's access rules.
#[derive(Debug, Default)]
pub struct Authenticator {
    reviewer: Option<TokenReviewer>,
    keys: Option<KeyStore>,
    public_url: Option<String>,
    checks: Option<AuthChecks>,
}

/// The canonical MCP resource URL of `provider` behind `public_url` (`<public URL>/mcp/<provider>`):
/// the default accepted audience of its OIDC tokens and the `resource` of its metadata.
pub fn mcp_resource_url(public_url: &str, provider: &str) -> String {
    format!("{}/mcp/{provider}", public_url.trim_end_matches('/'))
}

impl Authenticator {
    /// An authenticator that reviews ServiceAccount tokens with `reviewer`; without one,
    /// ServiceAccount callers of `tokenReview` providers are refused as [`AuthError::Unavailable`].
    pub fn new(reviewer: Option<TokenReviewer>) -> Authenticator {
        Authenticator { reviewer, ..Authenticator::default() }
    }

    /// Verify OIDC and offline ServiceAccount tokens with keys from `keys`; without it such
    /// callers are refused as [`AuthError::Unavailable`].
    pub fn with_keys(mut self, keys: KeyStore) -> Authenticator {
        self.keys = Some(keys);
        self
    }

    /// The URL tenants use to reach this gateway (`--public-url`): the default OIDC audience of a
    /// provider is [`mcp_resource_url`] of it. Without it, OIDC providers must list `audiences`.
    pub fn with_public_url(mut self, public_url: Option<String>) -> Authenticator {
        self.public_url = public_url.map(|u| u.trim_end_matches('/').to_string());
        self
    }

    /// Count decisions (and the reviewer's verdicts) in `checks`.
    pub fn with_checks(mut self, checks: AuthChecks) -> Authenticator {
        if let Some(reviewer) = self.reviewer.as_mut() {
            reviewer.count_in(checks.clone());
        }
        self.checks = Some(checks);
        self
    }

    /// The public URL, if configured.
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref()
    }

    /// The accepted audiences of `provider`'s OIDC tokens: the configured ones, else its resource URL.
    pub fn oidc_audiences(&self, provider: &str, oidc: &OidcAccess) -> Vec<String> {
        if !oidc.audiences.is_empty() {
            return oidc.audiences.clone();
        }
        self.public_url.iter().map(|public| mcp_resource_url(public, provider)).collect()
    }

    fn count(&self, provider: &str, method: &'static str, outcome: &'static str) {
        if let Some(checks) = &self.checks {
            checks.record(provider, method, outcome);
        }
    }

    /// Decide whether the request with `headers` may call `provider` with `access`.
    pub async fn authenticate(
        &self,
        provider: &str,
        access: &Access,
        headers: &HeaderMap,
    ) -> Result<Caller, AuthError> {
        let token = match presented_token(headers) {
            Presented::Nothing if access.anonymous && !access.bind_user_id_to_subject => {
                self.count(provider, "anonymous", "accepted");
                return Ok(Caller::default());
            }
            Presented::Nothing => {
                self.count(provider, "none", "missing");
                return Err(AuthError::Unauthenticated);
            }
            Presented::Malformed => {
                self.count(provider, "none", "malformed");
                return Err(AuthError::Unauthenticated);
            }
            Presented::Bearer(token) => token,
        };
        if let Some(expected) = &access.bearer_token
            && tokens_equal(token, expected.expose())
        {
            if access.bind_user_id_to_subject {
                self.count(provider, "bearer_token", "not_allowed");
                return Err(AuthError::Forbidden);
            }
            self.count(provider, "bearer_token", "accepted");
            let secret = access.bearer_token_secret.clone().unwrap_or_default();
            return Ok(Caller { subject: None, identity: CallerIdentity::Bearer { secret }, client: None });
        }
        if !looks_like_jwt(token) {
            self.count(provider, "none", "unknown_token");
            return Err(AuthError::Unauthenticated);
        }
        if let Some(oidc) = &access.oidc
            && unverified_issuer(token).as_deref() == Some(oidc.issuer.as_str())
        {
            let verdict = self.oidc(provider, oidc, token).await;
            self.count(provider, "oidc", verdict.as_ref().map_or_else(|reason| *reason, |_| "accepted"));
            return verdict.map_err(auth_error_of);
        }
        let Some(accounts) = &access.service_accounts else {
            self.count(provider, "none", "unknown_token");
            return Err(AuthError::Unauthenticated);
        };
        let verdict = match accounts.verification {
            ServiceAccountVerification::TokenReview => self.reviewed(accounts, token).await,
            ServiceAccountVerification::Jwks => self.service_account_offline(accounts, token).await,
        };
        self.count(provider, "service_account", verdict.as_ref().map_or_else(|reason| *reason, |_| "accepted"));
        verdict.map_err(auth_error_of)
    }

    async fn oidc(&self, provider: &str, oidc: &OidcAccess, token: &str) -> Result<Caller, &'static str> {
        let store = self.keys.as_ref().ok_or(UNAVAILABLE)?;
        let kid = verify::header_kid(token).map_err(Refusal::as_str)?;
        let audiences = self.oidc_audiences(provider, oidc);
        if audiences.is_empty() {
            tracing::warn!(
                provider,
                "OIDC provider has no audiences and the gateway has no --public-url: tokens refused"
            );
            return Err(Refusal::Audience.as_str());
        }
        let source = KeySource::Issuer { issuer: oidc.issuer.clone(), allow_http: oidc.allow_insecure_http };
        let issuer_keys = store.keys(&source, kid.as_deref()).await.map_err(|_| UNAVAILABLE)?;
        let values = oidc.allowed_claim_values.as_ref().map(|v| (v.claim.as_str(), v.values.as_slice()));
        let rules = TokenRules {
            issuer: &oidc.issuer,
            audiences: &audiences,
            required_scopes: &oidc.required_scopes,
            subject_claim: oidc.subject_claim(),
            allowed_subjects: &oidc.allowed_subjects,
            allowed_claim_values: values,
        };
        let verified = verify::verify(token, &issuer_keys.keys, &rules).map_err(Refusal::as_str)?;
        Ok(Caller {
            subject: Some(subject::oidc_user_id(&oidc.issuer, &verified.subject)),
            identity: CallerIdentity::Oidc { issuer: oidc.issuer.clone(), subject: verified.subject },
            client: None,
        })
    }

    /// The audience ServiceAccount tokens must be bound to: the configured one, else this
    /// gateway's own URL (`--public-url`), so that a token minted for another gateway is refused.
    pub fn service_account_audience<'a>(&'a self, accounts: &'a ServiceAccountAccess) -> Option<&'a str> {
        accounts.audience.as_deref().or(self.public_url.as_deref())
    }

    fn audience_of<'a>(&'a self, accounts: &'a ServiceAccountAccess) -> Result<&'a str, &'static str> {
        self.service_account_audience(accounts).ok_or_else(|| {
            tracing::warn!("ServiceAccount access has no audience and the gateway has no --public-url: tokens refused");
            Refusal::Audience.as_str()
        })
    }

    async fn reviewed(&self, accounts: &ServiceAccountAccess, token: &str) -> Result<Caller, &'static str> {
        let reviewer = self.reviewer.as_ref().ok_or(UNAVAILABLE)?;
        let audience = self.audience_of(accounts)?;
        match reviewer.review(token, audience).await {
            Err(_) => Err(UNAVAILABLE),
            Ok(Review::Rejected) => Err("rejected"),
            Ok(Review::Authenticated { username }) => allowed_service_account(accounts, username),
        }
    }

    async fn service_account_offline(
        &self,
        accounts: &ServiceAccountAccess,
        token: &str,
    ) -> Result<Caller, &'static str> {
        let store = self.keys.as_ref().ok_or(UNAVAILABLE)?;
        let kid = verify::header_kid(token).map_err(Refusal::as_str)?;
        let cluster = store.keys(&KeySource::KubernetesApi, kid.as_deref()).await.map_err(|_| UNAVAILABLE)?;
        let audiences = [self.audience_of(accounts)?.to_string()];
        let rules = TokenRules {
            issuer: &cluster.issuer,
            audiences: &audiences,
            required_scopes: &[],
            subject_claim: "sub",
            allowed_subjects: &[],
            allowed_claim_values: None,
        };
        let verified = verify::verify(token, &cluster.keys, &rules).map_err(Refusal::as_str)?;
        allowed_service_account(accounts, verified.subject)
    }
}

/// Outcome word of a verdict that could not be reached (keys or API server unavailable).
const UNAVAILABLE: &str = "unavailable";

fn auth_error_of(reason: &'static str) -> AuthError {
    match reason {
        UNAVAILABLE => AuthError::Unavailable,
        "insufficient_scope" => AuthError::InsufficientScope,
        "not_allowed" => AuthError::Forbidden,
        _ => AuthError::Unauthenticated,
    }
}

fn allowed_service_account(accounts: &ServiceAccountAccess, username: String) -> Result<Caller, &'static str> {
    let Some((namespace, name)) = service_account(&username) else { return Err("not_allowed") };
    let allowed =
        accounts.allowed.iter().any(|a| a.namespace == namespace && a.name.as_deref().is_none_or(|n| n == name));
    if !allowed {
        return Err("not_allowed");
    }
    let identity = CallerIdentity::ServiceAccount { namespace: namespace.to_string(), name: name.to_string() };
    Ok(Caller { subject: Some(username), identity, client: None })
}

/// The `iss` claim of a JWT, read without verifying anything: only to choose which verifier runs.
fn unverified_issuer(token: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct IssuerOnly {
        iss: Option<String>,
    }
    jsonwebtoken::dangerous::insecure_decode_claims::<IssuerOnly>(token).ok()?.iss
}

enum Presented<'a> {
    Nothing,
    Malformed,
    Bearer(&'a str),
}

/// The bearer token of the request, if it carries exactly one well-formed `Authorization` header.
fn presented_token(headers: &HeaderMap) -> Presented<'_> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return if headers.contains_key(AUTHORIZATION) { Presented::Malformed } else { Presented::Nothing };
    };
    let Ok(value) = value.to_str() else {
        return Presented::Malformed;
    };
    let Some((scheme, token)) = value.split_once(' ') else {
        return Presented::Malformed;
    };
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer")
        || token.is_empty()
        || token.len() > MAX_TOKEN_BYTES
        || token.contains(' ')
    {
        return Presented::Malformed;
    }
    Presented::Bearer(token)
}

/// Constant-time equality that also hides the expected token's length (digests are compared).
fn tokens_equal(presented: &str, expected: &str) -> bool {
    let presented = Sha256::digest(presented.as_bytes());
    let expected = Sha256::digest(expected.as_bytes());
    bool::from(presented.as_slice().ct_eq(expected.as_slice()))
}

/// Three non-empty dot-separated parts: anything else is not sent to the API server.
fn looks_like_jwt(token: &str) -> bool {
    let mut parts = token.split('.');
    parts.by_ref().take(3).filter(|p| !p.is_empty()).count() == 3 && parts.next().is_none()
}

/// `(namespace, name)` of a `system:serviceaccount:<ns>:<name>` username.
fn service_account(username: &str) -> Option<(&str, &str)> {
    let (namespace, name) = username.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use memgate_crds::validation::credential_value;
    use memgate_crds::{ServiceAccountAccess, ServiceAccountRef};

    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(AUTHORIZATION, HeaderValue::from_str(value).expect("header"));
        }
        map
    }

    fn bearer_access(token: &str) -> Access {
        Access {
            bearer_token: credential_value("test", token.as_bytes()).ok(),
            bearer_token_secret: Some("callers".into()),
            ..Access::default()
        }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(future)
    }

    #[test]
    fn anonymous_is_allowed_only_when_opted_in() {
        let auth = Authenticator::default();
        let open = Access { anonymous: true, ..Access::default() };
        assert_eq!(block_on(auth.authenticate("p", &open, &headers(&[]))), Ok(Caller::default()));
        assert_eq!(
            block_on(auth.authenticate("p", &bearer_access("t0k3n"), &headers(&[]))),
            Err(AuthError::Unauthenticated)
        );
        let bound = Access { anonymous: true, bind_user_id_to_subject: true, ..Access::default() };
        assert_eq!(block_on(auth.authenticate("p", &bound, &headers(&[]))), Err(AuthError::Unauthenticated));
    }

    #[test]
    fn a_bad_credential_never_falls_back_to_anonymous() {
        let auth = Authenticator::default();
        let open = Access { anonymous: true, ..Access::default() };
        for value in ["Bearer wrong", "Basic dXNlcjpwdw==", "Bearer", "Bearer  ", "bearer a b"] {
            assert_eq!(
                block_on(auth.authenticate("p", &open, &headers(&[value]))),
                Err(AuthError::Unauthenticated),
                "{value}"
            );
        }
    }

    #[test]
    fn callers_are_named_by_kind_for_the_audit_trail() {
        let accounts: ServiceAccountAccess =
            serde_json::from_value(serde_json::json!({"allowed": [{"namespace": "team-a"}]})).expect("access");
        let caller = allowed_service_account(&accounts, "system:serviceaccount:team-a:agent".into()).expect("allowed");
        assert_eq!(caller.identity.to_string(), "serviceaccount:team-a:agent");
        assert_eq!(caller.subject.as_deref(), Some("system:serviceaccount:team-a:agent"));
        assert!(allowed_service_account(&accounts, "system:serviceaccount:team-b:agent".into()).is_err());
        let oidc = CallerIdentity::Oidc { issuer: "https://login.example.com/".into(), subject: "alice".into() };
        assert_eq!((oidc.to_string().as_str(), oidc.kind()), ("oidc:https://login.example.com/#alice", "oidc"));
        assert_eq!(CallerIdentity::default().to_string(), "anonymous");
    }

    #[test]
    fn static_bearer_token_must_match_exactly() {
        let auth = Authenticator::default();
        let access = bearer_access("s3cret-token");
        // The caller is named by the Secret holding the token, never by the token.
        let named =
            Caller { subject: None, identity: CallerIdentity::Bearer { secret: "callers".into() }, client: None };
        assert_eq!(named.identity.to_string(), "bearer:callers");
        assert_eq!(block_on(auth.authenticate("p", &access, &headers(&["Bearer s3cret-token"]))), Ok(named.clone()));
        assert_eq!(block_on(auth.authenticate("p", &access, &headers(&["bearer s3cret-token"]))), Ok(named));
        for value in ["Bearer s3cret-toke", "Bearer s3cret-token2", "Token s3cret-token", "s3cret-token"] {
            assert_eq!(
                block_on(auth.authenticate("p", &access, &headers(&[value]))),
                Err(AuthError::Unauthenticated),
                "{value}"
            );
        }
        let twice = headers(&["Bearer s3cret-token", "Bearer s3cret-token"]);
        assert_eq!(block_on(auth.authenticate("p", &access, &twice)), Err(AuthError::Unauthenticated));
        let bound = Access { bind_user_id_to_subject: true, ..bearer_access("s3cret-token") };
        assert_eq!(
            block_on(auth.authenticate("p", &bound, &headers(&["Bearer s3cret-token"]))),
            Err(AuthError::Forbidden)
        );
    }

    #[test]
    fn service_account_tokens_need_a_reviewer() {
        let auth = Authenticator::default();
        let access = Access {
            service_accounts: Some(ServiceAccountAccess {
                audience: Some("memgate".into()),
                allowed: vec![ServiceAccountRef { namespace: "agents".into(), name: None }],
                verification: Default::default(),
            }),
            ..Access::default()
        };
        assert_eq!(block_on(auth.authenticate("p", &access, &headers(&["Bearer a.b.c"]))), Err(AuthError::Unavailable));
        assert_eq!(
            block_on(auth.authenticate("p", &access, &headers(&["Bearer not-a-jwt"]))),
            Err(AuthError::Unauthenticated)
        );
    }

    #[test]
    fn service_account_usernames_are_parsed_strictly() {
        assert_eq!(service_account("system:serviceaccount:agents:robot"), Some(("agents", "robot")));
        for bad in
            ["system:serviceaccount:agents", "system:serviceaccount::robot", "system:serviceaccount:a:b:c", "admin"]
        {
            assert_eq!(service_account(bad), None, "{bad}");
        }
        assert!(
            looks_like_jwt("a.b.c") && !looks_like_jwt("a.b") && !looks_like_jwt("a..c") && !looks_like_jwt("a.b.c.d")
        );
    }
}
