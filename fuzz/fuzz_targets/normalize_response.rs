//! Upstream response normalisation (`engine::normalize`) and what the MCP surface makes of it.
//!
//! Input: 9 choice bytes (response grammar, content encoding, limit), then the response body.
//! Properties: no panic; the same answer as reading the body into a `serde_json::Value` first (the
//! way `normalize` worked before it read the body straight into items, kept here as the oracle);
//! at most `limit` items, each with a non-empty id and content, a finite score and non-empty
//! optional strings; an error is one of the documented codes and never shows the body (the planted
//! marker); the items always render within the profile's bounds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_crds::{Collection, ResponseSpec};
use memgate_fuzz::{MARKER, assert_hidden, response_spec, utf16_len};
use memgate_gateway::engine::{EngineError, Item, normalize};
use memgate_gateway::profile::{MAX_ITEMS, MAX_TEXT_UTF16_UNITS, render};
use memgate_presets::ContentEncoding;

fuzz_target!(|data: &[u8]| {
    if data.len() < 9 {
        return;
    }
    let (options, body) = data.split_at(9);
    let choices: [u8; 7] = std::array::from_fn(|i| options[i]);
    let Some(response) = response_spec(&choices) else { return };
    let encoding = if options[7] % 2 == 0 { ContentEncoding::Plain } else { ContentEncoding::MessageJson };
    let limit = usize::from(options[8] % 60);
    let answer = normalize(body, &response, encoding, limit);
    assert_eq!(answer, by_value(body, &response, encoding, limit), "differs from reading a Value first");
    match answer {
        Ok(items) => {
            assert!(items.len() <= limit);
            for item in &items {
                assert!(!item.id.is_empty() && !item.content.is_empty());
                assert!(item.score.is_none_or(f64::is_finite));
                for optional in [&item.title, &item.uri, &item.updated_at] {
                    assert!(optional.as_ref().is_none_or(|s| !s.is_empty()));
                }
            }
            let output = render(&items);
            assert!(output.items.len() <= MAX_ITEMS.min(items.len()));
            assert!(utf16_len(&output.text) <= MAX_TEXT_UTF16_UNITS);
        }
        Err(err) => {
            assert!(
                matches!(err, EngineError::InvalidUtf8 | EngineError::InvalidJson | EngineError::SchemaMismatch),
                "unexpected error {err:?}"
            );
            assert_hidden("normalize error", &err, MARKER);
        }
    }
});

/// The oracle: the whole body parsed as a `Value`, then each item read from its object.
fn by_value(
    body: &[u8],
    response: &ResponseSpec,
    encoding: ContentEncoding,
    limit: usize,
) -> Result<Vec<Item>, EngineError> {
    use serde_json::{Map, Value};
    let text = std::str::from_utf8(body).map_err(|_| EngineError::InvalidUtf8)?;
    let document: Value = serde_json::from_str(text).map_err(|_| EngineError::InvalidJson)?;
    let collection = match (response.collection, &document) {
        (Collection::RootArray, Value::Array(items)) => items,
        (Collection::Results, Value::Object(root)) => match root.get("results") {
            Some(Value::Array(items)) => items,
            _ => return Err(EngineError::SchemaMismatch),
        },
        _ => return Err(EngineError::SchemaMismatch),
    };
    let text_of = |object: &Map<String, Value>, name: &str| match object.get(name) {
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    };
    let unwrap = |raw: &str| -> Option<String> {
        let Ok(Value::Array(messages)) = serde_json::from_str::<Value>(raw) else { return None };
        if messages.is_empty() {
            return None;
        }
        let parts: Option<Vec<&str>> = messages.iter().map(|m| m.as_object()?.get("content")?.as_str()).collect();
        Some(parts?.join("\n"))
    };
    let item = |object: &Map<String, Value>| -> Option<Item> {
        let id = text_of(object, response.id_field.member())?;
        let raw = text_of(object, response.content_field.member())?;
        let content = match encoding {
            ContentEncoding::Plain => raw,
            ContentEncoding::MessageJson => unwrap(&raw).unwrap_or(raw),
        };
        if content.is_empty() {
            return None;
        }
        let optional = |member: Option<&str>| member.and_then(|name| text_of(object, name));
        Some(Item {
            id,
            content,
            title: optional(response.title_field.member()),
            uri: optional(response.uri_field.member()),
            score: response
                .score_field
                .member()
                .and_then(|name| object.get(name)?.as_f64())
                .filter(|score| score.is_finite()),
            updated_at: optional(response.updated_at_field.member()),
        })
    };
    Ok(collection.iter().filter_map(|value| value.as_object().and_then(item)).take(limit).collect())
}
