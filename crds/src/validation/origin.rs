//! `spec.endpoint.origin`: scheme + host (+ port), nothing else (reference §3).

use super::Violation;

/// Parse and check an origin. Returns the normalised origin without a trailing `/`.
///
/// Refused: any scheme but `https` (and `http` when `allow_insecure_http`), user info, a path other
/// than empty or `/`, a query, a fragment, and any character outside host syntax (so a `\` that URL
/// parsers would silently turn into `/` never reaches one).
pub fn parse_origin(field: &str, origin: &str, allow_insecure_http: bool) -> Result<String, Violation> {
    let shape = || {
        Violation::new(
            field,
            "must be scheme://host[:port] with scheme http or https, and no user info, path, query or fragment",
        )
    };
    if origin.len() > 300 {
        return Err(Violation::new(field, "must be at most 300 characters"));
    }
    let rest = if let Some(rest) = origin.strip_prefix("https://") {
        rest
    } else if let Some(rest) = origin.strip_prefix("http://") {
        if !allow_insecure_http {
            return Err(Violation::new(
                field,
                "http is refused unless spec.endpoint.allowInsecureHttp is true; use https",
            ));
        }
        rest
    } else {
        return Err(shape());
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    let host_chars_only = !authority.is_empty()
        && authority.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !host_chars_only {
        return Err(shape());
    }
    let parsed = url::Url::parse(origin).map_err(|_| shape())?;
    let clean = parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.query().is_none()
        && parsed.fragment().is_none()
        && matches!(parsed.path(), "" | "/")
        && parsed.host_str().is_some_and(|h| !h.is_empty());
    if !clean {
        return Err(shape());
    }
    Ok(parsed.as_str().trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "spec.endpoint.origin";

    #[test]
    fn https_origins_are_accepted_and_normalised() {
        assert_eq!(parse_origin(F, "https://memory.example.com", false).as_deref(), Ok("https://memory.example.com"));
        assert_eq!(
            parse_origin(F, "https://Memory.Example.com:8443/", false).as_deref(),
            Ok("https://memory.example.com:8443")
        );
        assert_eq!(parse_origin(F, "https://[::1]:9000", false).as_deref(), Ok("https://[::1]:9000"));
    }

    #[test]
    fn http_needs_the_explicit_opt_in() {
        let err = parse_origin(F, "http://mem0.memory.svc:8888", false).unwrap_err();
        assert_eq!(err.field, F);
        assert!(err.message.contains("allowInsecureHttp"));
        assert!(parse_origin(F, "http://mem0.memory.svc:8888", true).is_ok());
    }

    #[test]
    fn other_schemes_are_refused() {
        for bad in ["ftp://h", "file:///etc/passwd", "h:80", "//h", "HTTPS://h"] {
            assert!(parse_origin(F, bad, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn user_info_path_query_fragment_are_refused() {
        for bad in [
            "https://user:pw@h",
            "https://user@h",
            "https://h/api",
            "https://h?x=1",
            "https://h#f",
            "https://h\\@evil",
            "https://h/..",
            "https://",
            "https:// h",
            "https://h%2e",
        ] {
            assert!(parse_origin(F, bad, true).is_err(), "{bad}");
        }
    }

    #[test]
    fn overlong_origin_is_refused() {
        let long = format!("https://{}.example.com", "a".repeat(300));
        assert!(parse_origin(F, &long, false).unwrap_err().message.contains("300"));
    }

    #[test]
    fn bad_port_is_refused() {
        assert!(parse_origin(F, "https://h:99999", false).is_err());
        assert!(parse_origin(F, "https://h:x", false).is_err());
    }
}
