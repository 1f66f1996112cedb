//! The `query` argument: length rule and whitespace folding.

/// Longest accepted query, in Unicode code points (counted before folding).
pub const MAX_QUERY_CHARS: usize = 2000;

/// Why a query was refused. Messages never repeat the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// Longer than [`MAX_QUERY_CHARS`] code points.
    #[error("query must be at most 2000 characters")]
    TooLong,
    /// Empty, or only whitespace.
    #[error("query must contain at least one non-whitespace character")]
    Blank,
}

/// Check `raw` (1 to 2000 code points, at least one non-whitespace character) and return it with
/// every run of whitespace folded into one space and both ends trimmed.
///
/// Whitespace is what the reference implementation's JavaScript `\s` matches: Unicode `White_Space`
/// ([`char::is_whitespace`]) without U+0085, plus U+FEFF (zero-width no-break space / BOM).
pub fn normalize_query(raw: &str) -> Result<String, QueryError> {
    if raw.chars().nth(MAX_QUERY_CHARS).is_some() {
        return Err(QueryError::TooLong);
    }
    let mut folded = String::with_capacity(raw.len());
    for word in raw.split(is_query_whitespace).filter(|word| !word.is_empty()) {
        if !folded.is_empty() {
            folded.push(' ');
        }
        folded.push_str(word);
    }
    if folded.is_empty() {
        return Err(QueryError::Blank);
    }
    Ok(folded)
}

/// JavaScript's `\s`: the reference normalises queries with it.
fn is_query_whitespace(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{FEFF}'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_runs_fold_into_one_space_and_ends_are_trimmed() {
        let cases = [
            ("policy", "policy"),
            ("  policy  ", "policy"),
            ("refund \t\n policy", "refund policy"),
            ("a\r\nb\u{000B}c\u{000C}d", "a b c d"),
            ("a\u{00A0}\u{3000}b\u{2028}c\u{2029}d\u{FEFF}e", "a b c d e"),
            ("\u{2003}x\u{2009}\u{200A}y\u{202F}", "x y"),
            ("keep-punctuation: <b> & \"q\"", "keep-punctuation: <b> & \"q\""),
        ];
        for (raw, expected) in cases {
            assert_eq!(normalize_query(raw).as_deref(), Ok(expected), "{raw:?}");
        }
    }

    #[test]
    fn empty_and_blank_queries_are_refused() {
        for raw in ["", " ", " \t\n", "\u{3000}\u{00A0}", "\r\n\r\n"] {
            assert_eq!(normalize_query(raw), Err(QueryError::Blank), "{raw:?}");
        }
    }

    #[test]
    fn whitespace_is_javascript_whitespace() {
        // As JavaScript's `\s`: U+FEFF is whitespace, U+0085 and U+200B are not.
        assert_eq!(normalize_query("\u{FEFF}"), Err(QueryError::Blank));
        assert_eq!(normalize_query("\u{FEFF}a\u{FEFF}b").as_deref(), Ok("a b"));
        assert_eq!(normalize_query("a\u{85}b").as_deref(), Ok("a\u{85}b"));
        assert_eq!(normalize_query("\u{200B}").as_deref(), Ok("\u{200B}"));
    }

    #[test]
    fn length_is_counted_in_code_points_before_folding() {
        let ascii = "q".repeat(MAX_QUERY_CHARS);
        assert_eq!(normalize_query(&ascii).as_deref(), Ok(ascii.as_str()));
        assert_eq!(normalize_query(&"q".repeat(MAX_QUERY_CHARS + 1)), Err(QueryError::TooLong));

        // 2000 emoji are 4000 UTF-16 units and 8000 bytes, but 2000 code points.
        let emoji = "😀".repeat(MAX_QUERY_CHARS);
        assert_eq!(normalize_query(&emoji).as_deref(), Ok(emoji.as_str()));
        assert_eq!(normalize_query(&format!("{emoji}😀")), Err(QueryError::TooLong));

        // Whitespace counts toward the limit even though folding would shorten it.
        let padded = format!("{}a", " ".repeat(MAX_QUERY_CHARS));
        assert_eq!(normalize_query(&padded), Err(QueryError::TooLong));
        let padded = format!("{}a", " ".repeat(MAX_QUERY_CHARS - 1));
        assert_eq!(normalize_query(&padded).as_deref(), Ok("a"));
    }
}
