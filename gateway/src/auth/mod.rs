//! Who may call a provider: the caller's credentials checked against the provider's [`Access`].
//!
//! Owns the decision (allowed as whom, or refused as unauthenticated / forbidden) for both
//! surfaces. It never stores, logs or formats a presented token: static tokens are compared as
//! SHA-256 digests in constant time, ServiceAccount tokens are reviewed by the API server
//! ([`TokenReviewer`]) and cached under a digest only.
//!
//! Rules, in order:
//! 1. No `Authorization` header: allowed (as nobody) only when `anonymous: true` and the provider
//!    does not bind `userId` to the caller; otherwise unauthenticated.
//! 2. Anything but exactly one `Authorization: Bearer <token>`: unauthenticated (a bad credential
//!    never falls back to anonymous access).
//! 3. The provider's static bearer token: allowed as nobody (a shared token names no one, so a
//!    provider binding `userId` to the caller refuses it as forbidden).
//! 4. A ServiceAccount token, when `serviceAccounts` is set: reviewed for the provider's audience;
//!    a token the API server does not accept for that audience is unauthenticated; an accepted
//!    token whose subject `system:serviceaccount:<ns>:<name>` is not in `allowed` is forbidden.
//! 5. Anything else: unauthenticated.

mod review;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::Access;
pub use review::{REVIEW_CACHE_CAPACITY, REVIEW_CACHE_TTL, REVIEW_TIMEOUT, Review, TokenReviewer};

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
    /// The Kubernetes API could not review the token now (not configured, unreachable or
    /// refusing the review) (HTTP 503).
    #[error("caller identity cannot be verified now")]
    Unavailable,
}

/// Checks callers against a provider's access rules.
#[derive(Debug, Default)]
pub struct Authenticator {
    reviewer: Option<TokenReviewer>,
}

impl Authenticator {
    /// An authenticator that reviews ServiceAccount tokens with `reviewer`; without one,
    /// ServiceAccount callers are refused as [`AuthError::Unavailable`].
    pub fn new(reviewer: Option<TokenReviewer>) -> Authenticator {
        Authenticator { reviewer }
    }

    /// Decide whether the request with `headers` may call a provider with `access`.
    pub async fn authenticate(&self, access: &Access, headers: &HeaderMap) -> Result<Caller, AuthError> {
        let token = match presented_token(headers) {
            Presented::Nothing if access.anonymous && !access.bind_user_id_to_subject => return Ok(Caller::default()),
            Presented::Nothing | Presented::Malformed => return Err(AuthError::Unauthenticated),
            Presented::Bearer(token) => token,
        };
        if let Some(expected) = &access.bearer_token
            && tokens_equal(token, expected.expose())
        {
            return if access.bind_user_id_to_subject { Err(AuthError::Forbidden) } else { Ok(Caller::default()) };
        }
        let Some(accounts) = &access.service_accounts else {
            return Err(AuthError::Unauthenticated);
        };
        if !looks_like_jwt(token) {
            return Err(AuthError::Unauthenticated);
        }
        let reviewer = self.reviewer.as_ref().ok_or(AuthError::Unavailable)?;
        match reviewer.review(token, &accounts.audience).await? {
            Review::Rejected => Err(AuthError::Unauthenticated),
            Review::Authenticated { username } => {
                let allowed = service_account(&username).is_some_and(|(namespace, name)| {
                    accounts
                        .allowed
                        .iter()
                        .any(|a| a.namespace == namespace && a.name.as_deref().is_none_or(|n| n == name))
                });
                if allowed { Ok(Caller { subject: Some(username) }) } else { Err(AuthError::Forbidden) }
            }
        }
    }
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
        Access { bearer_token: credential_value("test", token.as_bytes()).ok(), ..Access::default() }
    }

    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("runtime").block_on(future)
    }

    #[test]
    fn anonymous_is_allowed_only_when_opted_in() {
        let auth = Authenticator::default();
        let open = Access { anonymous: true, ..Access::default() };
        assert_eq!(block_on(auth.authenticate(&open, &headers(&[]))), Ok(Caller::default()));
        assert_eq!(
            block_on(auth.authenticate(&bearer_access("t0k3n"), &headers(&[]))),
            Err(AuthError::Unauthenticated)
        );
        let bound = Access { anonymous: true, bind_user_id_to_subject: true, ..Access::default() };
        assert_eq!(block_on(auth.authenticate(&bound, &headers(&[]))), Err(AuthError::Unauthenticated));
    }

    #[test]
    fn a_bad_credential_never_falls_back_to_anonymous() {
        let auth = Authenticator::default();
        let open = Access { anonymous: true, ..Access::default() };
        for value in ["Bearer wrong", "Basic dXNlcjpwdw==", "Bearer", "Bearer  ", "bearer a b"] {
            assert_eq!(
                block_on(auth.authenticate(&open, &headers(&[value]))),
                Err(AuthError::Unauthenticated),
                "{value}"
            );
        }
    }

    #[test]
    fn static_bearer_token_must_match_exactly() {
        let auth = Authenticator::default();
        let access = bearer_access("s3cret-token");
        assert_eq!(block_on(auth.authenticate(&access, &headers(&["Bearer s3cret-token"]))), Ok(Caller::default()));
        assert_eq!(block_on(auth.authenticate(&access, &headers(&["bearer s3cret-token"]))), Ok(Caller::default()));
        for value in ["Bearer s3cret-toke", "Bearer s3cret-token2", "Token s3cret-token", "s3cret-token"] {
            assert_eq!(
                block_on(auth.authenticate(&access, &headers(&[value]))),
                Err(AuthError::Unauthenticated),
                "{value}"
            );
        }
        let twice = headers(&["Bearer s3cret-token", "Bearer s3cret-token"]);
        assert_eq!(block_on(auth.authenticate(&access, &twice)), Err(AuthError::Unauthenticated));
        let bound = Access { bind_user_id_to_subject: true, ..bearer_access("s3cret-token") };
        assert_eq!(block_on(auth.authenticate(&bound, &headers(&["Bearer s3cret-token"]))), Err(AuthError::Forbidden));
    }

    #[test]
    fn service_account_tokens_need_a_reviewer() {
        let auth = Authenticator::default();
        let access = Access {
            service_accounts: Some(ServiceAccountAccess {
                audience: "memgate".into(),
                allowed: vec![ServiceAccountRef { namespace: "agents".into(), name: None }],
                verification: Default::default(),
            }),
            ..Access::default()
        };
        assert_eq!(block_on(auth.authenticate(&access, &headers(&["Bearer a.b.c"]))), Err(AuthError::Unavailable));
        assert_eq!(
            block_on(auth.authenticate(&access, &headers(&["Bearer not-a-jwt"]))),
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
