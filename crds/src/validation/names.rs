//! Kubernetes name shapes: the one definition of each, used by the CRD rules, the operator's flags
//! and every other check of a name.

use super::Violation;

/// A lower-case RFC 1123 DNS label (namespace names): `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63
/// characters.
pub fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && value.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && value.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric)
}

/// A lower-case RFC 1123 DNS subdomain (most object names): dot-separated DNS labels, at most 253
/// characters, as the API server checks them (`a..b` and `a.-b` are refused).
pub fn is_dns_subdomain(value: &str) -> bool {
    !value.is_empty() && value.len() <= 253 && value.split('.').all(is_dns_label)
}

/// A Secret data key: letters, digits, `-`, `_` and `.`, at most 253 characters.
pub fn is_secret_key(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 253
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// [`is_dns_subdomain`] as a violation of `field`.
pub(crate) fn check_dns_subdomain(field: &str, value: &str, what: &str) -> Option<Violation> {
    (!is_dns_subdomain(value)).then(|| Violation::new(field, format!("must be {what} (lower-case DNS subdomain)")))
}

/// [`is_dns_label`] as a violation of `field`.
pub(crate) fn check_dns_label(field: &str, value: &str, what: &str) -> Option<Violation> {
    (!is_dns_label(value)).then(|| Violation::new(field, format!("must be {what} (lower-case DNS label)")))
}

/// [`is_secret_key`] as a violation of `field`.
pub(crate) fn check_secret_key(field: &str, value: &str) -> Option<Violation> {
    (!is_secret_key(value))
        .then(|| Violation::new(field, "must be a Secret data key (letters, digits, '-', '_' and '.')"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_subdomain_rejects_upper_case_edges_and_empty_labels() {
        assert!(check_dns_subdomain("f", "mem0-api", "x").is_none());
        assert!(check_dns_subdomain("f", "mirror.creds", "x").is_none());
        for bad in ["Mem0", "-a", "", "a..b", "a.-b", "a-.b", ".a", "a."] {
            assert!(check_dns_subdomain("f", bad, "x").is_some(), "{bad}");
        }
        assert!(check_dns_subdomain("f", &"a".repeat(254), "x").is_some());
    }

    #[test]
    fn dns_label_rejects_dots() {
        assert!(check_dns_label("f", "team-a", "x").is_none());
        assert!(check_dns_label("f", "team.a", "x").is_some());
        assert!(check_dns_label("f", &"a".repeat(64), "x").is_some());
    }

    #[test]
    fn secret_key_rejects_slash() {
        assert!(check_secret_key("f", "api-key.txt").is_none());
        assert!(check_secret_key("f", "../key").is_some());
        assert!(check_secret_key("f", "").is_some());
    }
}
