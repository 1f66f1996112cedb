//! Profile rendering and truncation (`profile::render`) on arbitrary provider items.
//!
//! Properties: at most 5 items, in provider order, each a capped prefix of its source with a
//! non-empty id and content and a finite score; the text is at most 4000 UTF-16 code units, has no
//! raw `<` or `>`, and parses back to the structured value (every number exactly, as
//! JavaScript's `JSON.parse` reads it); the structured value has exactly the profile's keys, in order,
//! and the bytes written for it without building it are serde_json's.

#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use memgate_fuzz::{same_shape, text_numbers, utf16_len, value_numbers};
use memgate_gateway::engine::Item;
use memgate_gateway::profile::{
    CONTENT_CAP, ID_CAP, MAX_ITEMS, MAX_TEXT_UTF16_UNITS, NOTICE, TITLE_CAP, UPDATED_AT_CAP, URI_CAP, render,
};
use serde_json::Value;

#[derive(Arbitrary, Debug)]
struct Source {
    id: String,
    content: String,
    title: Option<String>,
    uri: Option<String>,
    score: Option<f64>,
    updated_at: Option<String>,
    /// Repeat `content` this many times (long contents reach the truncation paths quickly).
    repeat: u8,
}

fn capped_prefix(kept: &str, source: &str, cap: usize) {
    assert!(!kept.is_empty());
    assert!(kept.chars().count() <= cap, "over its cap of {cap}");
    assert!(source.starts_with(kept), "not a prefix of the source value");
}

fuzz_target!(|sources: Vec<Source>| {
    let items: Vec<Item> = sources
        .iter()
        .map(|s| Item {
            id: s.id.clone(),
            content: s.content.repeat(usize::from(s.repeat % 16) + 1),
            title: s.title.clone(),
            uri: s.uri.clone(),
            score: s.score,
            updated_at: s.updated_at.clone(),
        })
        .collect();
    let output = render(&items);

    assert!(output.items.len() <= MAX_ITEMS);
    assert!(utf16_len(&output.text) <= MAX_TEXT_UTF16_UNITS, "text over budget");
    assert!(!output.text.contains('<') && !output.text.contains('>'), "raw angle bracket in {}", output.text);
    let parsed: Value = serde_json::from_str(&output.text).expect("the text is JSON");
    let structured = output.structured();
    assert!(same_shape(&parsed, &structured), "text {} != structured {structured}", output.text);
    let mut written = String::new();
    output.push_structured_json(&mut written);
    assert_eq!(written, structured.to_string(), "the structured bytes are serde_json's");
    let mut numbers = Vec::new();
    value_numbers(&structured, &mut numbers);
    let written = text_numbers(&output.text);
    assert_eq!(written.len(), numbers.len(), "numbers in {}", output.text);
    for (written, number) in written.iter().zip(&numbers) {
        assert!(written == number, "{} is written as a number parsing to {written:e}", number);
    }

    let body = &structured["untrusted_external_context"];
    assert_eq!(structured.as_object().map(|o| o.len()), Some(1));
    assert_eq!(
        body.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["notice".into(), "items".into()])
    );
    assert_eq!(body["notice"], NOTICE);
    let order = ["id", "content", "title", "uri", "score", "updatedAt"];
    for value in body["items"].as_array().expect("items array") {
        let keys: Vec<&str> = value.as_object().expect("item object").keys().map(String::as_str).collect();
        let mut positions = keys.iter().map(|k| order.iter().position(|o| o == k).expect("only profile keys"));
        let mut last = None;
        assert!(
            positions.all(|p| {
                let ok = last < Some(p);
                last = Some(p);
                ok
            }),
            "keys out of order: {keys:?}"
        );
    }

    // Items keep provider order: each kept item comes from a later source than the one before.
    let mut from = 0;
    for kept in &output.items {
        let position = items[from..]
            .iter()
            .position(|s| s.id.starts_with(&kept.id) && s.content.starts_with(&kept.content))
            .expect("every kept item comes from a source item, in order");
        let source = &items[from + position];
        from += position + 1;
        capped_prefix(&kept.id, &source.id, ID_CAP);
        capped_prefix(&kept.content, &source.content, CONTENT_CAP);
        for (kept, source, cap) in [
            (&kept.title, &source.title, TITLE_CAP),
            (&kept.uri, &source.uri, URI_CAP),
            (&kept.updated_at, &source.updated_at, UPDATED_AT_CAP),
        ] {
            if let Some(kept) = kept {
                capped_prefix(kept, source.as_deref().expect("no invented field"), cap);
            }
        }
        assert!(kept.score.is_none_or(f64::is_finite));
    }
});
