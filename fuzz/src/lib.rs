//! What the fuzz targets share: the planted marker secrets, the check that no error shows them,
//! dialect grammars built from fuzzer bytes, and JSON comparison by value.
//!
//! Each target in `fuzz_targets/` checks a property of one input surface; this crate holds no
//! property of its own.

use std::fmt::{Debug, Display};

use memgate_crds::{ResponseSpec, SearchSpec};
use serde_json::{Value, json};

/// The credential the seeds and targets plant in Secret values and provider credentials. Any
/// error, log-bound message or request part other than the one auth header that shows it leaks.
pub const MARKER: &str = "FUZZMARKERSECRET51c2e9";

/// A second credential, only ever in mounted Secret data (never in the fuzzed text).
pub const MOUNTED_MARKER: &str = "MOUNTEDMARKERSECRET7d04aa";

/// Panic when `err`'s `Display` or `Debug` shows `secret`.
pub fn assert_hidden<E: Debug + Display + ?Sized>(what: &str, err: &E, secret: &str) {
    let display = err.to_string();
    assert!(!display.contains(secret), "{what}: Display shows the planted secret: {display}");
    let debug = format!("{err:?}");
    assert!(!debug.contains(secret), "{what}: Debug shows the planted secret: {debug}");
}

/// True when [`MARKER`] appears in `value` only inside the `data` / `stringData` values of `v1`
/// Secrets: then no message about `value` may show it. (Where the fuzzer moved it into a name or
/// a key, a message may rightly quote it.)
pub fn marker_only_in_secret_values(value: &Value) -> bool {
    let mut stripped = value.clone();
    strip_secret_values(&mut stripped);
    !stripped.to_string().contains(MARKER)
}

fn strip_secret_values(value: &mut Value) {
    let is_secret = value.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && value.get("kind").and_then(Value::as_str) == Some("Secret");
    if let Value::Object(map) = value {
        if is_secret {
            for key in ["data", "stringData"] {
                if let Some(Value::Object(data)) = map.get_mut(key) {
                    for entry in data.values_mut() {
                        *entry = Value::Null;
                    }
                }
            }
        }
        // A `v1 List` holds Secrets as items.
        if let Some(Value::Array(items)) = map.get_mut("items") {
            items.iter_mut().for_each(strip_secret_values);
        }
    }
}

fn pick<'a>(byte: u8, options: &[&'a str]) -> &'a str {
    options[usize::from(byte) % options.len()]
}

/// A search grammar from 8 choice bytes and a path (any combination, valid or not).
pub fn search_spec(choices: &[u8; 8], path: &str) -> Option<SearchSpec> {
    let location = ["json", "json.filters", "query", "omit"];
    let mut spec = json!({
        "method": pick(choices[0], &["GET", "POST"]),
        "path": path,
        "queryLocation": pick(choices[1], &["json", "query"]),
        "userIdLocation": pick(choices[2], &location),
        "agentIdLocation": pick(choices[3], &location),
        "appIdLocation": pick(choices[4], &location),
        "limitField": pick(choices[5], &["top_k", "limit", "omit"]),
    });
    if choices[6] % 3 == 1 {
        spec["threshold"] = json!(f64::from(choices[6]) / 255.0);
    }
    if choices[7] % 3 != 0 {
        spec["rerank"] = json!(choices[7] % 3 == 1);
    }
    serde_json::from_value(spec).ok()
}

/// A response grammar from 7 choice bytes.
pub fn response_spec(choices: &[u8; 7]) -> Option<ResponseSpec> {
    serde_json::from_value(json!({
        "collection": pick(choices[0], &["results", "root-array"]),
        "idField": pick(choices[1], &["id", "memory_id"]),
        "contentField": pick(choices[2], &["memory", "content", "text"]),
        "titleField": pick(choices[3], &["title", "omit"]),
        "uriField": pick(choices[4], &["uri", "omit"]),
        "scoreField": pick(choices[5], &["score", "omit"]),
        "updatedAtField": pick(choices[6], &["updated_at", "updatedAt", "omit"]),
    }))
    .ok()
}

/// JSON equality of everything but the numbers' values (any number matches any number): serde_json
/// (without its `float_roundtrip` feature, which the gateway does not use) parses long decimals a
/// few ULP off, e.g. `-9.775735764180315e-150`. Compare the numbers with [`text_numbers`].
pub fn same_shape(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => true,
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_shape(x, y)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && same_shape(vx, vy))
        }
        _ => a == b,
    }
}

/// The number literals of a JSON text in document order, each parsed exactly (Rust's `f64`
/// parser is correctly rounded, as JavaScript's `JSON.parse` is).
pub fn text_numbers(text: &str) -> Vec<f64> {
    let mut numbers = Vec::new();
    let mut chars = text.char_indices().peekable();
    let mut in_string = false;
    while let Some((at, c)) = chars.next() {
        if in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == '-' || c.is_ascii_digit() {
            let mut end = at + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if d.is_ascii_digit() || matches!(d, '.' | 'e' | 'E' | '+' | '-') {
                    end = i + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            numbers.push(text[at..end].parse().unwrap_or(f64::NAN));
        }
    }
    numbers
}

/// The numbers of a JSON value in document order.
pub fn value_numbers(value: &Value, out: &mut Vec<f64>) {
    match value {
        Value::Number(n) => out.push(n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => items.iter().for_each(|v| value_numbers(v, out)),
        Value::Object(map) => map.values().for_each(|v| value_numbers(v, out)),
        _ => {}
    }
}

/// Length of `text` in UTF-16 code units (what JavaScript's `length` counts).
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}
