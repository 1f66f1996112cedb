//! Pure verification of one JWT access token against a key set and a provider's rules.
//!
//! Owns the decision "is this token, signed by one of these keys, good for this provider" and the
//! reason when it is not. Parsing, signature checks and the registered claims (`iss`, `aud`, `exp`,
//! `nbf`) are done by the `jsonwebtoken` crate (RustCrypto backend); this module only chooses what
//! to ask of it and reads memgate's own claims (scopes, subject, group/role values). It performs no
//! I/O, never logs, and never returns any part of the token.
//!
//! Rules:
//! - algorithms: asymmetric only ([`ALLOWED_ALGORITHMS`]); `none`, HMAC and anything else are refused
//!   before any key is looked at, and a key is only used with an algorithm of its own family (and
//!   its `alg`, when the JWK names one), so an RSA public key can never verify an HS256 token;
//! - `kid`: selects the key; without one the set must hold exactly one usable key;
//! - `iss` must equal the configured issuer exactly; `aud` must contain an accepted audience;
//!   `exp` is required; `exp` and `nbf` are checked with [`LEEWAY_SECONDS`] of clock skew;
//! - scopes: the union of `scope` (space-separated string, RFC 9068) and `scp` (string or list)
//!   must contain every required scope;
//! - subject: the configured claim must be a non-empty string of at most 1024 bytes without
//!   control characters; then the optional subject and claim-value allow-lists apply.

use std::collections::BTreeSet;

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};

/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECONDS: u64 = 30;
/// Most keys of one JWKS that are kept.
pub const MAX_KEYS: usize = 32;
/// Longest subject claim value accepted.
pub const MAX_SUBJECT_BYTES: usize = 1024;

/// The only signature algorithms accepted.
pub const ALLOWED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a token was refused; also the `outcome` label of the auth metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Not a parsable JWT, or a claim of the wrong type.
    Malformed,
    /// `alg` not in [`ALLOWED_ALGORITHMS`], or not the key's algorithm.
    Algorithm,
    /// No key with the token's `kid` (or no single key when it has none).
    UnknownKey,
    /// The signature does not verify.
    Signature,
    /// `iss` is not the configured issuer.
    Issuer,
    /// `aud` names no accepted audience.
    Audience,
    /// `exp` has passed (beyond the leeway), or is missing.
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    NotYetValid,
    /// The subject claim is missing or unusable.
    Subject,
    /// A required scope is missing.
    Scope,
    /// Subject or group/role value not in the allow-list.
    NotAllowed,
}

impl Refusal {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Malformed => "malformed",
            Refusal::Algorithm => "algorithm",
            Refusal::UnknownKey => "unknown_key",
            Refusal::Signature => "signature",
            Refusal::Issuer => "issuer",
            Refusal::Audience => "audience",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
            Refusal::Subject => "subject",
            Refusal::Scope => "insufficient_scope",
            Refusal::NotAllowed => "not_allowed",
        }
    }
}

/// One usable public key of a JWKS.
#[derive(Clone)]
pub struct PublicKey {
    kid: Option<String>,
    family: AlgorithmFamily,
    alg: Option<Algorithm>,
    key: DecodingKey,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublicKey").field("kid", &self.kid).field("family", &self.family).finish_non_exhaustive()
    }
}

/// The usable signing keys of one issuer.
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<PublicKey>,
}

impl KeySet {
    /// Keep the asymmetric signing keys of `set` (at most [`MAX_KEYS`]): symmetric (`oct`) keys,
    /// encryption keys (`use: enc`) and keys the crate cannot read are left out.
    pub fn from_jwks(set: &JwkSet) -> KeySet {
        let keys = set.keys.iter().filter_map(public_key).take(MAX_KEYS).collect();
        KeySet { keys }
    }

    /// Number of usable keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key is usable.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// True when a key has this `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }

    fn select(&self, kid: Option<&str>) -> Option<&PublicKey> {
        match kid {
            Some(kid) => self.keys.iter().find(|k| k.kid.as_deref() == Some(kid)),
            None if self.keys.len() == 1 => self.keys.first(),
            None => None,
        }
    }
}

fn public_key(jwk: &Jwk) -> Option<PublicKey> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
        AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
        AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
        _ => return None,
    };
    let alg = match jwk.common.key_algorithm {
        None => None,
        Some(named) => Some(signing_algorithm(named)?),
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(PublicKey { kid: jwk.common.key_id.clone(), family, alg, key })
}

/// The signing algorithm a JWK's `alg` names, if it is one memgate accepts.
fn signing_algorithm(named: KeyAlgorithm) -> Option<Algorithm> {
    let alg = match named {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    };
    Some(alg)
}

/// What a token must satisfy.
#[derive(Debug, Clone)]
pub struct TokenRules<'a> {
    /// Exact `iss`.
    pub issuer: &'a str,
    /// Accepted `aud` values (at least one; an empty list refuses every token).
    pub audiences: &'a [String],
    /// Scopes that must all be granted.
    pub required_scopes: &'a [String],
    /// Claim holding the subject.
    pub subject_claim: &'a str,
    /// When non-empty, the subject must be one of these.
    pub allowed_subjects: &'a [String],
    /// When set, the claim must hold one of the values.
    pub allowed_claim_values: Option<(&'a str, &'a [String])>,
}

/// A verified token: its subject and the scopes it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Value of the subject claim.
    pub subject: String,
    /// Granted scopes.
    pub scopes: BTreeSet<String>,
}

/// The token's `kid` and whether its algorithm is acceptable at all; `None` when the header
/// cannot be read (that includes `alg: none`, which the crate does not know).
pub fn header_kid(token: &str) -> Result<Option<String>, Refusal> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
    if !ALLOWED_ALGORITHMS.contains(&header.alg) {
        return Err(Refusal::Algorithm);
    }
    Ok(header.kid)
}

/// Verify `token` with `keys` against `rules`.
pub fn verify(token: &str, keys: &KeySet, rules: &TokenRules<'_>) -> Result<Verified, Refusal> {
    let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
    if !ALLOWED_ALGORITHMS.contains(&header.alg) {
        return Err(Refusal::Algorithm);
    }
    let key = keys.select(header.kid.as_deref()).ok_or(Refusal::UnknownKey)?;
    if key.family != header.alg.family() || key.alg.is_some_and(|alg| alg != header.alg) {
        return Err(Refusal::Algorithm);
    }
    if rules.audiences.is_empty() {
        return Err(Refusal::Audience);
    }
    let mut validation = Validation::new(header.alg);
    validation.leeway = LEEWAY_SECONDS;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&[rules.issuer]);
    validation.set_audience(rules.audiences);
    let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
        .map_err(|err| refusal_of(err.kind()))?
        .claims;
    // The crate compares `iss` by set membership; say "exactly" once more, cheaply.
    if claims.get("iss").and_then(Value::as_str) != Some(rules.issuer) {
        return Err(Refusal::Issuer);
    }
    let scopes = granted_scopes(&claims)?;
    if !rules.required_scopes.iter().all(|s| scopes.contains(s)) {
        return Err(Refusal::Scope);
    }
    let subject = match claims.get(rules.subject_claim) {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_SUBJECT_BYTES && !s.chars().any(char::is_control) => {
            s.clone()
        }
        _ => return Err(Refusal::Subject),
    };
    if !rules.allowed_subjects.is_empty() && !rules.allowed_subjects.contains(&subject) {
        return Err(Refusal::NotAllowed);
    }
    if let Some((claim, values)) = rules.allowed_claim_values {
        let held: Vec<&str> = match claims.get(claim) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !held.iter().any(|h| values.iter().any(|v| v == h)) {
            return Err(Refusal::NotAllowed);
        }
    }
    Ok(Verified { subject, scopes })
}

fn refusal_of(kind: &jsonwebtoken::errors::ErrorKind) -> Refusal {
    use jsonwebtoken::errors::ErrorKind as K;
    match kind {
        K::InvalidSignature => Refusal::Signature,
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::InvalidKeyFormat => Refusal::Algorithm,
        K::ExpiredSignature => Refusal::Expired,
        K::ImmatureSignature => Refusal::NotYetValid,
        K::InvalidIssuer => Refusal::Issuer,
        K::InvalidAudience => Refusal::Audience,
        K::MissingRequiredClaim(claim) if claim == "exp" => Refusal::Expired,
        K::MissingRequiredClaim(claim) if claim == "iss" => Refusal::Issuer,
        K::MissingRequiredClaim(claim) if claim == "aud" => Refusal::Audience,
        _ => Refusal::Malformed,
    }
}

/// Scopes granted by `scope` (space-separated) and `scp` (string or list of strings).
fn granted_scopes(claims: &Map<String, Value>) -> Result<BTreeSet<String>, Refusal> {
    let mut scopes = BTreeSet::new();
    for name in ["scope", "scp"] {
        match claims.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => scopes.extend(s.split(' ').filter(|s| !s.is_empty()).map(str::to_string)),
            Some(Value::Array(items)) => {
                for item in items {
                    scopes.insert(item.as_str().ok_or(Refusal::Malformed)?.to_string());
                }
            }
            Some(_) => return Err(Refusal::Malformed),
        }
    }
    Ok(scopes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_algorithms_are_allowed() {
        for alg in ALLOWED_ALGORITHMS {
            assert_ne!(alg.family(), AlgorithmFamily::Hmac, "{alg:?}");
        }
    }

    #[test]
    fn scopes_come_from_scope_and_scp() {
        let claims: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"scope": "a  b", "scp": ["c"]})).expect("claims");
        let scopes = granted_scopes(&claims).expect("scopes");
        assert_eq!(scopes.into_iter().collect::<Vec<_>>(), ["a", "b", "c"]);
        let claims: Map<String, Value> = serde_json::from_value(serde_json::json!({"scp": "a b"})).expect("claims");
        assert_eq!(granted_scopes(&claims).expect("scopes").len(), 2);
        let bad: Map<String, Value> = serde_json::from_value(serde_json::json!({"scp": [1]})).expect("claims");
        assert_eq!(granted_scopes(&bad), Err(Refusal::Malformed));
    }

    #[test]
    fn symmetric_and_encryption_keys_are_never_used() {
        let set: JwkSet = serde_json::from_value(serde_json::json!({"keys": [
            {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQ"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": "sXch", "e": "AQAB"}
        ]}))
        .expect("jwks");
        assert!(KeySet::from_jwks(&set).is_empty());
    }

    #[test]
    fn none_and_hmac_headers_are_refused_before_any_key() {
        // {"alg":"none","typ":"JWT"} / {"alg":"HS256","typ":"JWT"}
        let none = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJ4In0.";
        let hs256 = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2ln";
        assert_eq!(header_kid(none), Err(Refusal::Malformed));
        assert_eq!(header_kid(hs256), Err(Refusal::Algorithm));
        let rules = TokenRules {
            issuer: "https://issuer",
            audiences: &["a".to_string()],
            required_scopes: &[],
            subject_claim: "sub",
            allowed_subjects: &[],
            allowed_claim_values: None,
        };
        assert_eq!(verify(hs256, &KeySet::default(), &rules), Err(Refusal::Algorithm));
    }
}
