//! JSON text exactly as JavaScript's `JSON.stringify` writes it, for the two value kinds the
//! profile result holds: strings and finite numbers.
//!
//! Why: Qwen Code turns an MCP tool result into model input by prepending
//! `JSON.stringify(structuredContent)` unless one text block is exactly that string
//! (QwenLM/qwen-code `packages/core/src/tools/mcp-tool.ts`, `transformMcpContentToParts`). The text
//! block is therefore written the way JavaScript would re-serialize the `structuredContent` it
//! parsed, so the model reads the result once.
//!
//! - Strings follow ECMA-262 `QuoteJSONString`: `"` and `\` escaped, `\b \t \n \f \r` short
//!   escapes, other code points below U+0020 as `\u00xx` (lowercase hex), everything else as is
//!   (Rust strings hold no lone surrogates, the only other case JavaScript escapes). The profile's
//!   `<` / `>` escaping is the caller's choice ([`push_string`]'s `escape_angle_brackets`).
//! - Numbers follow ECMA-262 `Number::toString`: the shortest digits that round-trip (Rust's
//!   float formatting yields the same digits), integer notation up to 21 digits, `0.000001`
//!   style down to 1e-6, otherwise `1e+21` / `1.5e-7` style; `-0` is `0`.
//!
//! Pure functions, no I/O.

use std::fmt::Write as _;

/// Append `text` to `out` as a JSON string literal, escaped as `JSON.stringify` does; with
/// `escape_angle_brackets`, `<` and `>` are written `\u003c` and `\u003e` (same value, different
/// bytes).
pub(crate) fn push_string(out: &mut String, text: &str, escape_angle_brackets: bool) {
    out.reserve(text.len() + 2);
    out.push('"');
    // Every character that is escaped is ASCII, and no byte of a multi-byte UTF-8 sequence is: so
    // runs of bytes between escapes are copied whole, split only at ASCII (char) boundaries.
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(found) = next_escaped(bytes, start, escape_angle_brackets) {
        let byte = bytes[found];
        out.push_str(&text[start..found]);
        match byte {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            b'<' => out.push_str("\\u003c"),
            b'>' => out.push_str("\\u003e"),
            _ => push_control_escape(out, byte),
        }
        start = found + 1;
    }
    out.push_str(&text[start..]);
    out.push('"');
}

/// The first byte at or after `from` that [`push_string`] escapes. A block of [`BLOCK`] bytes a
/// step while none of them is (the common case: long runs of plain text; the compiler turns the
/// block test into vector compares), then eight bytes, then byte by byte.
fn next_escaped(bytes: &[u8], from: usize, escape_angle_brackets: bool) -> Option<usize> {
    let mut at = from;
    while let Some(block) = bytes.get(at..at + BLOCK) {
        let plain = if escape_angle_brackets { block_is_plain::<true>(block) } else { block_is_plain::<false>(block) };
        if !plain {
            break;
        }
        at += BLOCK;
    }
    while let Some(eight) = bytes.get(at..at + 8) {
        if word_may_escape(word(eight), escape_angle_brackets) {
            break;
        }
        at += 8;
    }
    bytes[at..].iter().position(|&byte| is_escaped(byte, escape_angle_brackets)).map(|offset| at + offset)
}

/// Bytes [`next_escaped`] tests at once.
const BLOCK: usize = 32;

/// Whether none of the bytes of `block` is escaped: every byte tested, no early exit and no
/// short-circuit, so that the loop is one the compiler vectorises (with `||` it is not, and costs
/// three times the eight-byte word test).
fn block_is_plain<const ANGLE: bool>(block: &[u8]) -> bool {
    let mut escaped = false;
    for &byte in block {
        escaped |= (byte < 0x20) | (byte == b'"') | (byte == b'\\') | (ANGLE & ((byte == b'<') | (byte == b'>')));
    }
    !escaped
}

/// Eight bytes as a little-endian word (`bytes` is eight long).
fn word(bytes: &[u8]) -> u64 {
    let mut eight = [0u8; 8];
    eight.copy_from_slice(bytes);
    u64::from_le_bytes(eight)
}

/// Whether [`push_string`] escapes `byte`.
fn is_escaped(byte: u8, escape_angle_brackets: bool) -> bool {
    matches!(byte, 0x00..=0x1f | b'"' | b'\\') || (escape_angle_brackets && matches!(byte, b'<' | b'>'))
}

/// Whether any of the eight bytes of `word` is one [`is_escaped`] accepts (exact: no byte is
/// reported that is not escaped, none is missed). The standard word tests: a byte below `n` (`n`
/// at most 0x80) sets its high bit in `(w - n*ONES) & !w & HIGHS`; a byte equal to `c` is a zero
/// byte of `w ^ c*ONES`. They are joined before the one mask (`&` distributes over `|`).
fn word_may_escape(word: u64, escape_angle_brackets: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let below = |word: u64, limit: u8| word.wrapping_sub(ONES * u64::from(limit)) & !word;
    let has = |byte: u8| below(word ^ (ONES * u64::from(byte)), 1);
    let mut bits = below(word, 0x20) | has(b'"') | has(b'\\');
    if escape_angle_brackets {
        bits |= has(b'<') | has(b'>');
    }
    bits & HIGHS != 0
}

/// `\u00XX` for a control character without a short escape.
fn push_control_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push_str("\\u00");
    out.push(char::from(HEX[usize::from(byte >> 4)]));
    out.push(char::from(HEX[usize::from(byte & 0xf)]));
}

/// Append [`number`]'s text to `out`. Between 1e-6 and 1e21 in magnitude JavaScript writes the
/// shortest round-trip digits in plain decimal notation, which is what Rust's `Display` writes:
/// those (every score a provider sends in practice) go straight into `out`.
pub(crate) fn push_number(out: &mut String, value: f64) {
    if (1e-6..1e21).contains(&value.abs()) {
        let _ = write!(out, "{value}");
    } else {
        out.push_str(&number(value));
    }
}

/// `number` as JavaScript writes it in JSON; non-finite numbers are `null`, as in JavaScript.
pub(crate) fn number(number: f64) -> String {
    if !number.is_finite() {
        return "null".to_string();
    }
    if number == 0.0 {
        return "0".to_string();
    }
    let sign = if number < 0.0 { "-" } else { "" };
    // Shortest round-trip digits: "d[.ddd]e<exp>", no trailing zeros in the mantissa.
    let scientific = format!("{:e}", number.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    // ECMA-262 names: k digits, the value is 0.<digits> x 10^n.
    let k = i32::try_from(digits.len()).unwrap_or(i32::MAX);
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat(usize::try_from(n - k).unwrap_or(0)))
    } else if 0 < n && n <= 21 {
        let (whole, fraction) = digits.split_at(usize::try_from(n).unwrap_or(0));
        format!("{whole}.{fraction}")
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat(usize::try_from(-n).unwrap_or(0)))
    } else {
        let exponent = n - 1;
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        format!("{first}{fraction}e{exponent_sign}{}", exponent.unsigned_abs())
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(text: &str, escape: bool) -> String {
        let mut out = String::new();
        push_string(&mut out, text, escape);
        out
    }

    #[test]
    fn numbers_are_written_as_javascript_writes_them() {
        // Each right-hand side is what node prints for `JSON.stringify(x)`.
        let cases: [(f64, &str); 22] = [
            (1.0, "1"),
            (-1.0, "-1"),
            (0.0, "0"),
            (-0.0, "0"),
            (0.91, "0.91"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (123_456_789_012_345_680_000.0, "123456789012345680000"),
            (1e-7, "1e-7"),
            (1e-6, "0.000001"),
            (1.5e-7, "1.5e-7"),
            (0.000_123, "0.000123"),
            (-2.5e-9, "-2.5e-9"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (2f64.powi(60), "1152921504606847000"),
            (9_007_199_254_740_993.0, "9007199254740992"),
            (100.0, "100"),
            (1.5, "1.5"),
            (123.456, "123.456"),
            (1.2345e25, "1.2345e+25"),
        ];
        for (value, expected) in cases {
            assert_eq!(number(value), expected, "{value:e}");
        }
        assert_eq!(number(f64::NAN), "null");
        assert_eq!(number(f64::INFINITY), "null");
    }

    #[test]
    fn pushed_numbers_are_the_javascript_text() {
        let mut values = vec![1e-6, 1e-6_f64.next_down(), 1e21, 1e21_f64.next_down(), 0.91, -0.5, 1.0, 100.0];
        // Bit patterns from a fixed linear congruential sequence (every exponent), and decimal-ish
        // scores such as providers send.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for n in 0..20_000u32 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            values.push(f64::from_bits(state));
            values.push(f64::from(n) / 997.0 - 10.0);
        }
        for value in values.into_iter().filter(|value| value.is_finite()) {
            let mut pushed = String::from("x");
            push_number(&mut pushed, value);
            assert_eq!(pushed, format!("x{}", number(value)), "{value:e}");
        }
    }

    /// The escaping as first written, character by character: the oracle of the byte-run version.
    fn quoted_char_by_char(text: &str, escape_angle_brackets: bool) -> String {
        let mut out = String::from('"');
        for ch in text.chars() {
            match ch {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\u{8}' => out.push_str("\\b"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\u{c}' => out.push_str("\\f"),
                '\r' => out.push_str("\\r"),
                '<' if escape_angle_brackets => out.push_str("\\u003c"),
                '>' if escape_angle_brackets => out.push_str("\\u003e"),
                ch if u32::from(ch) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(ch))),
                ch => out.push(ch),
            }
        }
        out.push('"');
        out
    }

    #[test]
    fn strings_are_escaped_as_the_character_by_character_oracle_escapes_them() {
        // Pieces covering every escape, ASCII, 2/3/4-byte UTF-8 and boundaries between them,
        // combined in many orders (a fixed linear congruential sequence: the same every run).
        let pieces = [
            "a",
            "\"",
            "\\",
            "\u{8}",
            "\t",
            "\n",
            "\u{c}",
            "\r",
            "<",
            ">",
            "\u{0}",
            "\u{1}",
            "\u{1f}",
            "\u{7f}",
            "é",
            "中",
            "😀",
            "\u{2028}",
            "/",
            " ",
            "plain text",
            "a longer run of plain text, past a few eight-byte words",
            "a run of plain text long enough to fill two of the thirty-two byte blocks, and then some",
            "",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5000 {
            let mut text = String::new();
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            for _ in 0..(state >> 59) {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                text.push_str(pieces[usize::try_from(state >> 33).unwrap_or(0) % pieces.len()]);
            }
            // Without the angle brackets, serde_json's escaping exactly (`super::push_json_string`).
            assert_eq!(quoted(&text, false), serde_json::to_string(&text).expect("serializes"), "{text:?}");
            for escape in [false, true] {
                assert_eq!(quoted(&text, escape), quoted_char_by_char(&text, escape), "{text:?}");
            }
        }
        for byte in 0u8..0x80 {
            let text = char::from(byte).to_string();
            assert_eq!(quoted(&text, true), quoted_char_by_char(&text, true), "{byte:#x}");
        }
    }

    /// The eight-byte test agrees with the byte test on every byte at every position (among
    /// fillers that borrow and that do not) and on every pair of neighbouring bytes.
    #[test]
    fn the_word_test_finds_exactly_the_escaped_bytes() {
        let word_of = |bytes: [u8; 8]| u64::from_le_bytes(bytes);
        for angle in [false, true] {
            for filler in [b'a', b' ', b'!', 0x7f, 0x80, 0xc3, 0xff] {
                for position in 0..8 {
                    for byte in 0..=u8::MAX {
                        let mut bytes = [filler; 8];
                        bytes[position] = byte;
                        let expected = bytes.iter().any(|&b| is_escaped(b, angle));
                        assert_eq!(word_may_escape(word_of(bytes), angle), expected, "{bytes:?} {angle}");
                    }
                }
            }
            for low in 0..=u8::MAX {
                for high in 0..=u8::MAX {
                    let mut bytes = [b'x'; 8];
                    (bytes[3], bytes[4]) = (low, high);
                    let expected = is_escaped(low, angle) || is_escaped(high, angle);
                    assert_eq!(word_may_escape(word_of(bytes), angle), expected, "{bytes:?} {angle}");
                }
            }
        }
    }

    /// The block test agrees with the byte test on every byte at every position of a block.
    #[test]
    fn the_block_test_finds_exactly_the_escaped_bytes() {
        for filler in [b'a', b' ', 0x7f, 0x80, 0xff] {
            for position in 0..BLOCK {
                for byte in 0..=u8::MAX {
                    let mut block = [filler; BLOCK];
                    block[position] = byte;
                    for angle in [false, true] {
                        let plain = !block.iter().any(|&b| is_escaped(b, angle));
                        let tested =
                            if angle { block_is_plain::<true>(&block) } else { block_is_plain::<false>(&block) };
                        assert_eq!(tested, plain, "{block:?} {angle}");
                    }
                }
            }
        }
    }

    #[test]
    fn strings_are_escaped_as_javascript_escapes_them() {
        assert_eq!(quoted("a\"b\\c", false), r#""a\"b\\c""#);
        assert_eq!(quoted("\u{8}\t\n\u{c}\r", false), r#""\b\t\n\f\r""#);
        assert_eq!(quoted("\u{0}\u{1f}\u{7f}", false), "\"\\u0000\\u001f\u{7f}\"");
        assert_eq!(quoted("é中😀\u{2028}/", false), "\"é中😀\u{2028}/\"");
        assert_eq!(quoted("<a>", false), "\"<a>\"");
        assert_eq!(quoted("<a>", true), r#""\u003ca\u003e""#);
    }
}
