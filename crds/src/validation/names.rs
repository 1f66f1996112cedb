//! Kubernetes name and value shapes: the one definition of each, used by the CRD rules, the
//! operator's flags, MemoryGateway validation and every other check of a name.

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

/// A Kubernetes resource quantity as the operator writes them: a decimal number with an optional
/// binary or decimal suffix (`100m`, `1`, `64Mi`, `1.5Gi`), never an exponent or a sign.
pub fn is_quantity(value: &str) -> bool {
    const SUFFIXES: [&str; 16] = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    let (number, suffix) = value.split_at(split);
    let digits = number.chars().filter(char::is_ascii_digit).count();
    digits > 0 && number.matches('.').count() <= 1 && SUFFIXES.contains(&suffix)
}

/// A log filter (`RUST_LOG`): `info`, `warn,memgate_gateway=debug`; letters, digits and `_=,:.-`.
pub fn is_log_filter(value: &str) -> bool {
    !value.is_empty() && value.len() <= 256 && value.chars().all(|c| c.is_ascii_alphanumeric() || "_=,:.-".contains(c))
}

/// A label or annotation key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric).
pub fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(is_dns_subdomain) && is_label_value(name) && !name.is_empty()
}

/// A label value: at most 63 characters, alphanumerics, `-`, `_`, `.`, starting and ending
/// alphanumeric (or empty).
pub fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && value.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && value.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric))
}

/// An environment variable name as Kubernetes accepts it: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
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
    fn quantities_labels_and_env_names() {
        for ok in ["100m", "1", "64Mi", "1.5Gi", "512Mi", "2"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["1.34217728e+08", "-1", "lots", "64XB", "", "1.2.3"] {
            assert!(!is_quantity(bad), "{bad}");
        }
        assert!(
            is_label_key("example.com/team") && is_label_key("tier") && !is_label_key("a/b/c") && !is_label_key("-x")
        );
        assert!(is_label_value("") && is_label_value("v1.2") && !is_label_value("a b"));
        assert!(is_env_name("SSL_CERT_FILE") && !is_env_name("1X") && !is_env_name("A=B"));
        assert!(is_log_filter("warn,memgate_gateway=debug") && !is_log_filter("info\nX"));
    }

    #[test]
    fn secret_key_rejects_slash() {
        assert!(check_secret_key("f", "api-key.txt").is_none());
        assert!(check_secret_key("f", "../key").is_some());
        assert!(check_secret_key("f", "").is_some());
    }
}
