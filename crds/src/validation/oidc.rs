//! `spec.access.oidc`: the OpenID provider a MemoryProvider trusts, and what its tokens must carry.
//!
//! Pure checks mirroring the CRD's CEL rules, plus the URL parse CEL cannot do. Nothing here
//! fetches the issuer: the gateway does that.

use super::Violation;
use crate::memory_provider::{MAX_OIDC_LIST, OidcAccess};

/// Longest issuer URL and audience.
pub const MAX_OIDC_URL: usize = 300;

/// Parse and check an issuer URL: `https` (or `http` when `allow_insecure_http`), a host, no user
/// info, query or fragment, at most [`MAX_OIDC_URL`] characters. Returns it unchanged (an issuer is
/// compared as an exact string, so it is never normalised).
pub fn parse_issuer(field: &str, issuer: &str, allow_insecure_http: bool) -> Result<String, Violation> {
    let shape = || Violation::new(field, "must be an http(s) URL with a host and no user info, query or fragment");
    if issuer.len() > MAX_OIDC_URL {
        return Err(Violation::new(field, format!("must be at most {MAX_OIDC_URL} characters")));
    }
    if issuer.starts_with("http://") && !allow_insecure_http {
        return Err(Violation::new(
            field,
            "http is refused unless spec.access.oidc.allowInsecureHttp is true; use https",
        ));
    }
    if !(issuer.starts_with("https://") || issuer.starts_with("http://"))
        || issuer.chars().any(|c| c.is_control() || c.is_whitespace() || c == '\\')
    {
        return Err(shape());
    }
    let parsed = url::Url::parse(issuer).map_err(|_| shape())?;
    let clean = parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.query().is_none()
        && parsed.fragment().is_none()
        && !issuer.contains('?')
        && !issuer.contains('#')
        && !issuer.contains('@')
        && parsed.host_str().is_some_and(|h| !h.is_empty());
    if !clean {
        return Err(shape());
    }
    Ok(issuer.to_string())
}

/// True for an OAuth scope token (RFC 6749 §3.3): visible ASCII except `"` and `\`.
pub fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= 128
        && scope.bytes().all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// True for a claim name memgate reads: 1 to 64 of `A-Z a-z 0-9 _ . : -`.
pub fn is_claim_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

fn text_ok(value: &str, max: usize) -> bool {
    !value.trim().is_empty() && value.chars().count() <= max && !value.chars().any(char::is_control)
}

/// Every rule of one `spec.access.oidc`.
pub fn check_oidc(oidc: &OidcAccess, found: &mut Vec<Violation>) {
    const F: &str = "spec.access.oidc";
    if let Err(v) = parse_issuer(&format!("{F}.issuer"), &oidc.issuer, oidc.allow_insecure_http) {
        found.push(v);
    }
    let too_many = |list: usize| list > MAX_OIDC_LIST;
    if too_many(oidc.audiences.len()) || !oidc.audiences.iter().all(|a| text_ok(a, MAX_OIDC_URL)) {
        found.push(Violation::new(
            format!("{F}.audiences"),
            format!("must list at most {MAX_OIDC_LIST} audiences of 1 to {MAX_OIDC_URL} characters without control characters"),
        ));
    }
    if too_many(oidc.required_scopes.len()) || !oidc.required_scopes.iter().all(|s| is_scope_token(s)) {
        found.push(Violation::new(
            format!("{F}.requiredScopes"),
            format!(
                "must list at most {MAX_OIDC_LIST} scopes of 1 to 128 visible ASCII characters other than double quote and backslash"
            ),
        ));
    }
    if let Some(claim) = &oidc.subject_claim
        && !is_claim_name(claim)
    {
        found.push(Violation::new(
            format!("{F}.subjectClaim"),
            "must be a claim name of 1 to 64 letters, digits, '_', '.', ':' or '-'",
        ));
    }
    if too_many(oidc.allowed_subjects.len()) || !oidc.allowed_subjects.iter().all(|s| text_ok(s, 256)) {
        found.push(Violation::new(
            format!("{F}.allowedSubjects"),
            format!("must list at most {MAX_OIDC_LIST} subjects of 1 to 256 characters without control characters"),
        ));
    }
    if let Some(values) = &oidc.allowed_claim_values {
        if !is_claim_name(&values.claim) {
            found.push(Violation::new(
                format!("{F}.allowedClaimValues.claim"),
                "must be a claim name of 1 to 64 letters, digits, '_', '.', ':' or '-'",
            ));
        }
        if values.values.is_empty() || too_many(values.values.len()) || !values.values.iter().all(|v| text_ok(v, 256)) {
            found.push(Violation::new(
                format!("{F}.allowedClaimValues.values"),
                format!("must list 1 to {MAX_OIDC_LIST} values of 1 to 256 characters without control characters"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_provider::OidcClaimValues;

    const F: &str = "spec.access.oidc.issuer";

    fn oidc() -> OidcAccess {
        OidcAccess {
            issuer: "https://login.example.com/".into(),
            allow_insecure_http: false,
            audiences: vec![],
            required_scopes: vec!["memory.read".into()],
            subject_claim: None,
            allowed_subjects: vec![],
            allowed_claim_values: None,
        }
    }

    fn fields(oidc: &OidcAccess) -> Vec<String> {
        let mut found = Vec::new();
        check_oidc(oidc, &mut found);
        found.into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn issuers_are_kept_exactly_and_need_https() {
        assert_eq!(parse_issuer(F, "https://login.example.com/", false).as_deref(), Ok("https://login.example.com/"));
        assert_eq!(
            parse_issuer(F, "https://login.example.com/realms/team", false).as_deref(),
            Ok("https://login.example.com/realms/team")
        );
        assert!(parse_issuer(F, "http://127.0.0.1:4444/", false).unwrap_err().message.contains("allowInsecureHttp"));
        assert!(parse_issuer(F, "http://127.0.0.1:4444/", true).is_ok());
    }

    #[test]
    fn issuers_with_user_info_query_fragment_or_other_schemes_are_refused() {
        for bad in [
            "https://user@login.example.com",
            "https://login.example.com/?tenant=a",
            "https://login.example.com/#x",
            "ftp://login.example.com",
            "https://",
            "https://login example.com",
            "https://login.example.com\\@evil",
            "login.example.com",
        ] {
            assert!(parse_issuer(F, bad, true).is_err(), "{bad}");
        }
        assert!(parse_issuer(F, &format!("https://{}.example.com", "a".repeat(300)), false).is_err());
    }

    #[test]
    fn a_valid_oidc_block_passes() {
        assert!(fields(&oidc()).is_empty());
    }

    #[test]
    fn scopes_must_be_scope_tokens() {
        for bad in ["", "memory read", "a\"b", "a\\b", "é"] {
            let mut o = oidc();
            o.required_scopes = vec![bad.into()];
            assert_eq!(fields(&o), ["spec.access.oidc.requiredScopes"], "{bad}");
        }
        assert!(is_scope_token("mcp:tools") && is_scope_token("https://api.example.com/memory.read"));
    }

    #[test]
    fn lists_are_bounded() {
        let mut o = oidc();
        o.audiences = vec!["a".into(); 33];
        o.allowed_subjects = vec!["s".into(); 33];
        o.required_scopes = vec!["s".into(); 33];
        assert_eq!(
            fields(&o),
            ["spec.access.oidc.audiences", "spec.access.oidc.requiredScopes", "spec.access.oidc.allowedSubjects"]
        );
    }

    #[test]
    fn claim_names_and_values_are_checked() {
        let mut o = oidc();
        o.subject_claim = Some("email address".into());
        o.allowed_claim_values = Some(OidcClaimValues { claim: "".into(), values: vec![] });
        assert_eq!(
            fields(&o),
            [
                "spec.access.oidc.subjectClaim",
                "spec.access.oidc.allowedClaimValues.claim",
                "spec.access.oidc.allowedClaimValues.values"
            ]
        );
        o.subject_claim = Some("preferred_username".into());
        o.allowed_claim_values = Some(OidcClaimValues { claim: "groups".into(), values: vec!["memory-users".into()] });
        assert!(fields(&o).is_empty());
    }

    #[test]
    fn blank_audiences_and_subjects_are_refused() {
        let mut o = oidc();
        o.audiences = vec![" ".into()];
        o.allowed_subjects = vec!["a\nb".into()];
        assert_eq!(fields(&o), ["spec.access.oidc.audiences", "spec.access.oidc.allowedSubjects"]);
    }
}
