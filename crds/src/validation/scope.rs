//! Scope ids (`user_id`, `agent_id`, `app_id`): what any upstream accepts, and what the Mem0 servers
//! behind the built-in dialects accept.
//!
//! Owns the rule for a configured id (`spec.scope.*`) and for an id memgate derives at request time
//! (the caller's subject with `bindUserIdToSubject`), so both follow exactly one rule. Pure; never
//! echoes the value in a message.
//!
//! The Mem0 rule comes from the Mem0 memory layer the self-hosted REST server calls
//! (mem0ai/mem0 `mem0/memory/main.py`, `_validate_and_trim_entity_id`, used by `add`, `search`,
//! `get_all` and `delete_all`; `server/main.py` turns its `ValueError` into HTTP 400): an id is
//! stripped of leading and trailing whitespace, then refused when empty ("cannot be empty or
//! whitespace-only") or when any character is whitespace (`str.isspace`: "cannot contain
//! whitespace"). memgate refuses every whitespace character instead of trimming, so the id it
//! shows and the id the upstream stores are the same. Python's `isspace` is Rust's
//! [`char::is_whitespace`] plus the separators U+001C..U+001F, which are control characters and
//! refused by the general rule already.

use super::Violation;

/// Longest scope id, in Unicode code points.
pub const MAX_SCOPE_ID_CHARS: usize = 256;

/// Why `value` cannot be a scope id, or `None` when it can. `builtin` applies the Mem0 rule of the
/// built-in dialects on top of the general one (1 to 256 characters, not blank, no control
/// characters).
pub fn scope_id_problem(value: &str, builtin: bool) -> Option<&'static str> {
    if value.trim().is_empty() || value.chars().count() > MAX_SCOPE_ID_CHARS || value.chars().any(char::is_control) {
        return Some("must be 1 to 256 characters, not blank, without control characters");
    }
    if builtin && value.chars().any(char::is_whitespace) {
        return Some(
            "must not contain whitespace (spaces included, also at either end) with a built-in dialect: \
             the Mem0 server refuses such ids with 400",
        );
    }
    None
}

/// The violation of scope field `field` holding `value`, if any.
pub(crate) fn check_scope_id(field: &str, value: &str, builtin: bool) -> Option<Violation> {
    scope_id_problem(value, builtin).map(|message| Violation::new(field, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_rule_applies_to_every_dialect() {
        for bad in ["", "  ", "a\nb", "a\u{7f}", "a\u{85}b", &"x".repeat(257)] {
            assert!(scope_id_problem(bad, false).is_some(), "{bad:?}");
            assert!(scope_id_problem(bad, true).is_some(), "{bad:?}");
        }
        assert!(scope_id_problem("repository memory", false).is_none(), "custom dialects may use spaces");
        assert!(scope_id_problem(&"x".repeat(256), true).is_none());
    }

    /// Every character Python's `str.isspace` reports (what the Mem0 server refuses) is refused
    /// for built-in dialects; the list is Python's own answer for U+0000..U+FFFF.
    #[test]
    fn mem0_whitespace_is_refused_for_builtins() {
        let python_isspace: &[u32] = &[
            0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002,
            0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
        ];
        for code in python_isspace {
            let c = char::from_u32(*code).expect("valid char");
            for value in [format!("repo{c}memory"), format!("{c}repo"), format!("repo{c}")] {
                assert!(scope_id_problem(&value, true).is_some(), "U+{code:04X} in {value:?}");
            }
        }
        for ok in ["repository-memory", "team_a.b:c@d/e", "用户-1", "system:serviceaccount:agents:qwen-code"] {
            assert!(scope_id_problem(ok, true).is_none(), "{ok}");
        }
    }
}
