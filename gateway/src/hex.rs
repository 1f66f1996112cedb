//! Lower-case hexadecimal text of digests (ledger and limit keys, audit digests, bound user ids):
//! the one encoder, so every key and digest memgate writes is spelled the same way. Pure.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends two lower-case hex digits per byte of `bytes` to `out`.
pub fn push_lower_hex(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

/// `bytes` as lower-case hex text.
pub fn lower_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_lower_hex(&mut out, bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_two_lower_case_digits_as_format_writes_them() {
        let bytes: Vec<u8> = (0..=255).collect();
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower_hex(&bytes), expected);
        let mut out = "prefix:".to_string();
        push_lower_hex(&mut out, &[0x00, 0x0f, 0xa0, 0xff]);
        assert_eq!(out, "prefix:000fa0ff");
        assert_eq!(lower_hex(&[]), "");
    }
}
