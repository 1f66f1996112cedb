//! Static URL path rules for `spec.search.path` and `spec.endpoint.basePath` (reference §3).

use super::Violation;

/// Characters allowed in a path: RFC 3986 `pchar` without `%`, plus `/`.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/-._~!$&'()*+,;=:@".contains(c)
}

/// Check a static path. `allow_empty` is true for `basePath`, false for `search.path`.
///
/// A path starts with `/`; it never contains `//`, `?`, `#`, `\`, `%` (so no encoded traversal such
/// as `%2e` or `%252e`), whitespace, control or non-ASCII characters, or a `.` / `..` segment.
pub fn check_path(field: &str, value: &str, allow_empty: bool) -> Vec<Violation> {
    if value.is_empty() {
        return if allow_empty {
            Vec::new()
        } else {
            vec![Violation::new(field, "must not be empty; a path starts with '/'")]
        };
    }
    let mut found = Vec::new();
    if !value.starts_with('/') {
        found.push(Violation::new(field, "must start with '/'"));
    }
    if value.len() > 512 {
        found.push(Violation::new(field, "must be at most 512 characters"));
    }
    if let Some(bad) = value.chars().find(|c| !allowed(*c)) {
        let shown = match bad {
            '?' | '#' | '%' | '\\' => format!("'{bad}'"),
            c if c.is_control() => "a control character".to_string(),
            c if c.is_whitespace() => "whitespace".to_string(),
            c if !c.is_ascii() => "a non-ASCII character".to_string(),
            c => format!("'{c}'"),
        };
        found.push(Violation::new(
            field,
            format!("must not contain {shown}: only unreserved URL characters are allowed (no '?', '#', '%', '\\', spaces or control characters)"),
        ));
    }
    if value.contains("//") {
        found.push(Violation::new(field, "must not contain '//'"));
    }
    if value.split('/').any(|segment| segment == "." || segment == "..") {
        found.push(Violation::new(field, "must not contain '.' or '..' segments"));
    }
    found
}

/// Join origin, base path and dialect path: origin and base path lose a trailing `/`.
///
/// `https://m.example.com/` + `/tenant-a/` + `/v2/memories/search/` gives
/// `https://m.example.com/tenant-a/v2/memories/search/`.
pub fn join_url(origin: &str, base_path: &str, path: &str) -> String {
    format!("{}{}{}", origin.trim_end_matches('/'), base_path.trim_end_matches('/'), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(value: &str) -> bool {
        !check_path("spec.search.path", value, false).is_empty()
    }

    #[test]
    fn plain_paths_are_accepted() {
        for ok in ["/search", "/v3/memories/search/", "/v2/memories/search", "/a-b_c.d~e/f:g@h"] {
            assert!(check_path("spec.search.path", ok, false).is_empty(), "{ok}");
        }
    }

    #[test]
    fn base_path_may_be_empty_but_search_path_may_not() {
        assert!(check_path("spec.endpoint.basePath", "", true).is_empty());
        assert!(refused(""));
    }

    #[test]
    fn path_must_start_with_slash() {
        assert!(refused("search"));
    }

    #[test]
    fn double_slash_is_refused() {
        assert!(refused("//evil.example.com/search"));
        assert!(refused("/a//b"));
    }

    #[test]
    fn query_fragment_backslash_percent_are_refused() {
        for bad in ["/search?x=1", "/search#frag", "/a\\b", "/%2e%2e/admin", "/%252e/admin"] {
            assert!(refused(bad), "{bad}");
        }
    }

    #[test]
    fn dot_segments_are_refused() {
        for bad in ["/.", "/..", "/a/../b", "/a/./b", "/a/.."] {
            assert!(refused(bad), "{bad}");
        }
        assert!(!refused("/a/.well-known/b"));
    }

    #[test]
    fn control_whitespace_and_non_ascii_are_refused() {
        for bad in ["/a\nb", "/a\tb", "/a b", "/caf\u{e9}", "/a\u{7f}"] {
            assert!(refused(bad), "{bad:?}");
        }
    }

    #[test]
    fn message_names_the_field() {
        let v = check_path("spec.endpoint.basePath", "/a?b", true);
        assert_eq!(v[0].field, "spec.endpoint.basePath");
        assert!(v[0].message.contains("'?'"));
    }

    #[test]
    fn join_url_follows_reference_example() {
        assert_eq!(
            join_url("https://memory.example.com", "/tenant-a/", "/v2/memories/search/"),
            "https://memory.example.com/tenant-a/v2/memories/search/"
        );
        assert_eq!(join_url("http://h:8888/", "", "/search"), "http://h:8888/search");
    }
}
