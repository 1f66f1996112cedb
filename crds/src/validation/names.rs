//! Kubernetes name shapes.

use super::Violation;

/// A lower-case RFC 1123 DNS subdomain (Secret, PVC, DialectPreset names).
pub(crate) fn check_dns_subdomain(field: &str, value: &str, what: &str) -> Option<Violation> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && value.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && value.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric);
    (!ok).then(|| Violation::new(field, format!("must be {what} (lower-case DNS subdomain)")))
}

/// A lower-case RFC 1123 DNS label (namespace names).
pub(crate) fn check_dns_label(field: &str, value: &str, what: &str) -> Option<Violation> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && value.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && value.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric);
    (!ok).then(|| Violation::new(field, format!("must be {what} (lower-case DNS label)")))
}

/// A Secret data key.
pub(crate) fn check_secret_key(field: &str, value: &str) -> Option<Violation> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    (!ok).then(|| Violation::new(field, "must be a Secret data key (letters, digits, '-', '_' and '.')"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_subdomain_rejects_upper_case_and_edges() {
        assert!(check_dns_subdomain("f", "mem0-api", "x").is_none());
        assert!(check_dns_subdomain("f", "Mem0", "x").is_some());
        assert!(check_dns_subdomain("f", "-a", "x").is_some());
        assert!(check_dns_subdomain("f", "", "x").is_some());
        assert!(check_dns_subdomain("f", &"a".repeat(254), "x").is_some());
    }

    #[test]
    fn dns_label_rejects_dots() {
        assert!(check_dns_label("f", "team-a", "x").is_none());
        assert!(check_dns_label("f", "team.a", "x").is_some());
    }

    #[test]
    fn secret_key_rejects_slash() {
        assert!(check_secret_key("f", "api-key.txt").is_none());
        assert!(check_secret_key("f", "../key").is_some());
        assert!(check_secret_key("f", "").is_some());
    }
}
