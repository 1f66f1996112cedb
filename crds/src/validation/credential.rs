//! Credential values read from Secrets.
//!
//! A credential is only ever held as a [`Credential`], whose `Debug` never shows the value, and every
//! error about it names the Secret reference, never the value.

use std::fmt;

use super::Violation;

/// A credential value. `Debug` and `Display` are redacted; [`Credential::expose`] is the only way out.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    /// The raw value, for the one header that carries it upstream.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

/// Check a credential read from `field` (a Secret reference such as
/// `spec.credentials.secretRef (Secret mem0-api, key api-key)`).
///
/// Surrounding ASCII whitespace (a trailing newline from `--from-file`) is trimmed. Refused: invalid
/// UTF-8, a blank value, a literal `${NAME}` placeholder, a documentation placeholder left in place
/// (`REPLACE-ME…`, `changeme`, `<…>`: see [`is_documentation_placeholder`]), and control characters
/// inside the value (which could split an HTTP header).
pub fn credential_value(field: &str, raw: &[u8]) -> Result<Credential, Violation> {
    let text = std::str::from_utf8(raw).map_err(|_| Violation::new(field, "the credential is not valid UTF-8"))?;
    let value = text.trim_matches(|c: char| c.is_ascii_whitespace());
    if value.is_empty() {
        return Err(Violation::new(field, "the credential is blank"));
    }
    if value.starts_with("${") && value.ends_with('}') {
        return Err(Violation::new(
            field,
            "the credential is an unexpanded ${NAME} placeholder; store the real value in the Secret",
        ));
    }
    if is_documentation_placeholder(value) {
        return Err(Violation::new(
            field,
            "the credential is a documentation placeholder (REPLACE-ME..., changeme or <...>); store the real value in the Secret",
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(Violation::new(field, "the credential contains control characters"));
    }
    Ok(Credential(value.to_string()))
}

/// A value that documentation asks to replace: starts with `REPLACE-ME` or `REPLACE_ME`, is
/// `changeme` (or `change-me`, `change_me`), any letter case, or is wrapped in `<` and `>`.
pub fn is_documentation_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    lower.starts_with("replace-me")
        || lower.starts_with("replace_me")
        || matches!(lower.as_str(), "changeme" | "change-me" | "change_me")
        || (value.len() > 2 && value.starts_with('<') && value.ends_with('>'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "spec.credentials.secretRef";

    #[test]
    fn trailing_newline_is_trimmed() {
        assert_eq!(credential_value(F, b"s3cret\n").map(|c| c.expose().to_string()), Ok("s3cret".to_string()));
    }

    #[test]
    fn blank_placeholder_and_control_characters_are_refused_without_echo() {
        for (raw, needle) in [
            (&b"  \n"[..], "blank"),
            (b"${MEM0_API_KEY}", "placeholder"),
            (b"REPLACE-ME-mem0-oss-api-key", "documentation placeholder"),
            (b"replace_me", "documentation placeholder"),
            (b"ChangeMe\n", "documentation placeholder"),
            (b"<your Mem0 API key>", "documentation placeholder"),
            (b"abc\r\nX-Injected: 1", "control"),
            (b"\xff\xfe", "UTF-8"),
        ] {
            let err = credential_value(F, raw).unwrap_err();
            assert!(err.message.contains(needle), "{err}");
            assert_eq!(err.field, F);
            assert!(!err.to_string().contains("MEM0_API_KEY"));
            assert!(!err.to_string().contains("Injected"));
            assert!(!err.to_string().contains("mem0-oss-api-key") && !err.to_string().contains("your Mem0"));
        }
        // Real keys that merely contain such words stay usable.
        for raw in [&b"m0-changeme-4f9a"[..], b"sk-replace-me-not", b"a<b>"] {
            assert!(credential_value(F, raw).is_ok(), "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn debug_is_redacted() {
        let c = credential_value(F, b"top-secret-value").expect("valid");
        assert!(!format!("{c:?}").contains("top-secret"));
    }
}
