//! The opt-in `queryDigest` of audit events: HMAC-SHA256 (RFC 2104) of the normalised query under
//! a key the platform team keeps in a Secret. An investigator holding the key can tell whether a
//! known query was asked; the log alone reveals nothing (no dictionary attack without the key).
//!
//! Pure.

use sha2::{Digest, Sha256};

const BLOCK: usize = 64;

/// Shortest key accepted (bytes): a shorter one is guessable.
pub const MIN_KEY_BYTES: usize = 16;

/// An HMAC-SHA256 key. Its `Debug` never shows the key.
#[derive(Clone)]
pub struct DigestKey([u8; BLOCK]);

impl std::fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DigestKey(..)")
    }
}

/// Why a key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_BYTES`] bytes after trimming surrounding whitespace.
    #[error("the query digest key must be at least {MIN_KEY_BYTES} bytes")]
    TooShort,
}

impl DigestKey {
    /// The key from a Secret file's bytes (surrounding whitespace, e.g. a trailing newline, is not
    /// part of it). Keys longer than the block are hashed first, as RFC 2104 says.
    pub fn new(raw: &[u8]) -> Result<DigestKey, KeyError> {
        let raw = raw.trim_ascii();
        if raw.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort);
        }
        let mut block = [0u8; BLOCK];
        if raw.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(raw));
        } else {
            block[..raw.len()].copy_from_slice(raw);
        }
        Ok(DigestKey(block))
    }

    /// `hmac-sha256:<64 hex digits>` of `message`.
    pub fn digest(&self, message: &[u8]) -> String {
        let pad = |byte: u8| self.0.map(|k| k ^ byte);
        let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
        let outer = Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize();
        let mut text = String::with_capacity(12 + 64);
        text.push_str("hmac-sha256:");
        crate::hex::push_lower_hex(&mut text, &outer);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_rfc_4231_test_vectors() {
        // RFC 4231 test case 2 has a 4-byte key (below our minimum), so cases 6 and 7 (131-byte
        // keys, hashed first) and a 20-byte key of case 1 are used.
        let case1 = DigestKey::new(&[0x0b; 20]).expect("20 bytes");
        assert_eq!(
            case1.digest(b"Hi There"),
            "hmac-sha256:b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let long = DigestKey::new(&[0xaa; 131]).expect("131 bytes");
        assert_eq!(
            long.digest(b"Test Using Larger Than Block-Size Key - Hash Key First"),
            "hmac-sha256:60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        let message: &[u8] = b"This is a test using a larger than block-size key and a larger than block-size data. \
The key needs to be hashed before being used by the HMAC algorithm.";
        assert_eq!(
            long.digest(message),
            "hmac-sha256:9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
        );
    }

    #[test]
    fn short_keys_are_refused_and_the_key_is_never_shown() {
        assert_eq!(DigestKey::new(b"  short-key \n").err(), Some(KeyError::TooShort));
        let key = DigestKey::new(b"0123456789abcdef-secret\n").expect("long enough");
        assert_eq!(key.digest(b"q"), DigestKey::new(b"0123456789abcdef-secret").expect("same").digest(b"q"));
        assert!(!format!("{key:?}").contains("0123"));
    }
}
