//! The Nexent request parsers (`nexent::parse_search_body`, `nexent::parse_ingest_body`), the ingest
//! bounds (`ingest::validate`) and the upstream add request built from an accepted unit.
//!
//! Properties: no panic; the search body is read exactly as reading it as a `serde_json::Value`
//! first would (`parse_through_value`, the reading before the typed one, kept here as its oracle);
//! an accepted search has a normalised query (1 to 2000 code points, no
//! surrounding whitespace, normalising it again changes nothing) and a limit between 1 and the
//! configured maximum; an accepted ingest survives a serialise/parse round trip unchanged; a
//! validation error never quotes the request; an add request carries the credential (the planted
//! marker) in one header only.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_crds::validation::credential_value;
use memgate_crds::{AuthScheme, Scope};
use memgate_fuzz::{MARKER, assert_hidden};
use memgate_gateway::engine::{AddUnit, Target, build_add_request};
use memgate_gateway::ingest::validate;
use memgate_gateway::nexent::{DEFAULT_LIMIT, parse_ingest_body, parse_search_body};
use memgate_gateway::profile::{MAX_QUERY_CHARS, normalize_query};

/// `parse_search_body` as it was before the typed reader: the body as a `Value`, then `query` as a
/// `String` and `limit` as an `Option<i64>` from it (`serde_json::from_value` into such a struct
/// takes exactly a string, and null, absent or an integer that `as_i64` gives).
fn parse_through_value(bytes: &[u8], max_limit: u32) -> Option<(String, u32)> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let object = value.as_object()?;
    let query = normalize_query(object.get("query")?.as_str()?).ok()?;
    let limit = match object.get("limit") {
        None | Some(serde_json::Value::Null) => DEFAULT_LIMIT,
        Some(limit) => match limit.as_i64()? {
            n if n >= 1 => u32::try_from(n).unwrap_or(u32::MAX),
            _ => return None,
        },
    };
    Some((query, limit.min(max_limit.max(1))))
}

fuzz_target!(|body: &[u8]| {
    for max_limit in [0, 1, 20, 1000] {
        let parsed = parse_search_body(body, max_limit);
        assert_eq!(parsed, parse_through_value(body, max_limit), "the typed reader differs from the Value one");
        if let Some((query, limit)) = parsed {
            assert!(!query.is_empty() && query.chars().count() <= MAX_QUERY_CHARS);
            assert_eq!(query.trim(), query, "query not trimmed");
            assert_eq!(normalize_query(&query).as_deref(), Ok(query.as_str()), "normalising twice changes the query");
            assert!(limit >= 1 && limit <= max_limit.max(1), "limit {limit} outside 1..={max_limit}");
        }
    }

    let Some(request) = parse_ingest_body(body) else { return };
    // Round trip (metadata aside: JSON floats need not survive one bit-exactly).
    let again = serde_json::to_vec(&request).expect("serialisable");
    let back = parse_ingest_body(&again).expect("a serialised request parses");
    assert_eq!(
        (&back.tenant_id, &back.user_id, &back.idempotency_key),
        (&request.tenant_id, &request.user_id, &request.idempotency_key)
    );
    assert_eq!(back.units.len(), request.units.len());
    for (back, unit) in back.units.iter().zip(&request.units) {
        assert_eq!(
            (&back.event_id, &back.unit_type, &back.unit_content, back.unit_index),
            (&unit.event_id, &unit.unit_type, &unit.unit_content, unit.unit_index)
        );
    }
    if let Err(err) = validate(&request) {
        for unit in &request.units {
            if unit.unit_content.chars().count() >= 24 {
                assert_hidden("ingest validate error", &err, &unit.unit_content);
            }
        }
        return;
    }
    let contract = memgate_presets::get("mem0-oss-rest-2026-08")
        .and_then(|dialect| dialect.write.clone())
        .expect("the mem0 OSS dialect has a write contract");
    let target = Target {
        origin: "https://memory.example.com".into(),
        base_path: "/tenant-a".into(),
        scope: Scope { user_id: Some("u".into()), agent_id: Some("a".into()), app_id: None },
        credential: credential_value("credential", MARKER.as_bytes()).expect("valid credential"),
        timeout: std::time::Duration::from_secs(5),
        max_in_flight: None,
        urls: memgate_gateway::engine::UrlCache::default(),
    };
    for unit in request.units.iter().take(8) {
        let add = AddUnit { event_id: &unit.event_id, unit_type: &unit.unit_type, content: &unit.unit_content };
        let upstream = build_add_request(&target, AuthScheme::XApiKey, &contract, &add).expect("valid target");
        let sent = upstream.body.as_ref().expect("an add has a body");
        let body = sent.value();
        assert_eq!(body["messages"][0]["content"], unit.unit_content.as_str());
        assert_eq!(body["infer"], false);
        assert_eq!(upstream.headers.iter().filter(|(_, v)| v.contains(MARKER)).count(), 1);
        // Where the caller's own text holds the marker, the body rightly carries it.
        if !unit.unit_content.contains(MARKER) && !unit.event_id.contains(MARKER) && !unit.unit_type.contains(MARKER) {
            assert!(!String::from_utf8_lossy(sent.as_bytes()).contains(MARKER), "credential in the add body");
            assert!(!format!("{upstream:?}").contains(MARKER), "Debug shows the credential");
        }
    }
});
