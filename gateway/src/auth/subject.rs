//! The `user_id` an OIDC caller is bound to when a provider sets `bindUserIdToSubject`.
//!
//! Pure. The id is a stable function of issuer and subject only (never of anything in a request),
//! at most [`MAX_USER_ID_CHARS`] characters, and contains no whitespace or control characters, so
//! it satisfies every rule a configured `scope.userId` must satisfy. Two issuers can never map
//! their subjects onto one id: the issuer is part of it (as a SHA-256 prefix, so a long issuer URL
//! cannot push the subject out of the bound).

use sha2::{Digest, Sha256};

use crate::hex::lower_hex as hex;

/// Longest id produced (the limit of `spec.scope.userId`).
pub const MAX_USER_ID_CHARS: usize = 256;
/// Longest subject kept readable; longer or unusual subjects are hashed.
const MAX_READABLE_SUBJECT: usize = 200;

/// `oidc:<issuer hash>:s:<subject>` for a subject of 1 to 200 visible ASCII characters, otherwise
/// `oidc:<issuer hash>:h:<SHA-256 of the subject>` (the `s`/`h` marker keeps the two forms apart).
/// The issuer hash is the first 16 hex digits of SHA-256 of the exact issuer string.
pub fn oidc_user_id(issuer: &str, subject: &str) -> String {
    let issuer_hash = hex(&Sha256::digest(issuer.as_bytes()))[..16].to_string();
    let readable =
        !subject.is_empty() && subject.len() <= MAX_READABLE_SUBJECT && subject.bytes().all(|b| b.is_ascii_graphic());
    if readable {
        format!("oidc:{issuer_hash}:s:{subject}")
    } else {
        format!("oidc:{issuer_hash}:h:{}", hex(&Sha256::digest(subject.as_bytes())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "https://login.example.com/";

    #[test]
    fn the_id_is_stable_and_names_issuer_and_subject() {
        let id = oidc_user_id(ISSUER, "alice");
        assert_eq!(id, oidc_user_id(ISSUER, "alice"));
        assert!(id.starts_with("oidc:") && id.ends_with(":s:alice"), "{id}");
        assert_ne!(id, oidc_user_id(ISSUER, "bob"));
        assert_ne!(id, oidc_user_id("https://login.example.com", "alice"), "the issuer is compared exactly");
    }

    #[test]
    fn unusual_or_long_subjects_are_hashed_and_never_collide_with_readable_ones() {
        for subject in ["alice smith", "ünïcode", "tab\there", &"x".repeat(201), ""] {
            let id = oidc_user_id(ISSUER, subject);
            assert!(id.contains(":h:"), "{id}");
            assert!(!id.chars().any(|c| c.is_whitespace() || c.is_control()), "{id}");
            assert!(id.chars().count() <= MAX_USER_ID_CHARS);
        }
        let hashed = oidc_user_id(ISSUER, "alice smith");
        let spoof = hashed.rsplit(':').next().map(|h| format!("h:{h}")).unwrap_or_default();
        assert_ne!(oidc_user_id(ISSUER, &spoof), hashed);
    }

    #[test]
    fn the_longest_readable_subject_fits_the_scope_limit() {
        let id = oidc_user_id(ISSUER, &"x".repeat(200));
        assert!(id.contains(":s:") && id.chars().count() <= MAX_USER_ID_CHARS);
    }
}
