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
/// UTF-8, a blank value, a literal `${NAME}` placeholder, and control characters inside the value
/// (which could split an HTTP header).
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
    if value.chars().any(char::is_control) {
        return Err(Violation::new(field, "the credential contains control characters"));
    }
    Ok(Credential(value.to_string()))
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
            (b"abc\r\nX-Injected: 1", "control"),
            (b"\xff\xfe", "UTF-8"),
        ] {
            let err = credential_value(F, raw).unwrap_err();
            assert!(err.message.contains(needle), "{err}");
            assert_eq!(err.field, F);
            assert!(!err.to_string().contains("MEM0_API_KEY"));
            assert!(!err.to_string().contains("Injected"));
        }
    }

    #[test]
    fn debug_is_redacted() {
        let c = credential_value(F, b"top-secret-value").expect("valid");
        assert!(!format!("{c:?}").contains("top-secret"));
    }
}
