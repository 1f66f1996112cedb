//! The built-in dialects are valid, match the reserved-id list, carry consistent fixtures, and are
//! locked: a published preset cannot change without a new id.

use std::collections::BTreeSet;

use memgate_crds::validation::{check_path, dialect_spec};
use memgate_crds::{IdLocation, LimitField, builtin_ids};
use serde_json::Value;
use sha2::{Digest, Sha256};

const LOCK: &str = include_str!("../presets.lock");

fn preset_text(id: &str) -> String {
    let path = format!("{}/dialects/{id}/preset.yaml", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// JSON with object keys sorted at every level, so comments and key order do not count.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<_> = map.keys().collect();
            keys.sort();
            let parts: Vec<String> =
                keys.into_iter().map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&map[k]))).collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

fn content_hash(id: &str) -> String {
    let value: Value = serde_saphyr::from_str(&preset_text(id)).expect("preset parses");
    hex(&Sha256::digest(canonical(&value).as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn shipped_ids_are_exactly_the_builtin_ids() {
    let shipped: BTreeSet<_> = memgate_presets::all().iter().map(|b| b.id.as_str()).collect();
    let expected: BTreeSet<_> = builtin_ids::SHIPPED.iter().copied().collect();
    assert_eq!(shipped, expected);
    for reserved in builtin_ids::RESERVED {
        assert!(memgate_presets::get(reserved).is_none(), "{reserved} is reserved, not shipped");
    }
}

#[test]
fn every_builtin_passes_dialect_validation() {
    for builtin in memgate_presets::all() {
        assert!(dialect_spec(&builtin.spec).is_empty(), "{}: {:?}", builtin.id, dialect_spec(&builtin.spec));
        if let Some(write) = &builtin.write {
            assert!(check_path("write.path", &write.path, false).is_empty(), "{}", builtin.id);
        }
    }
}

#[test]
fn every_published_preset_matches_its_lock() {
    let mut locked = BTreeSet::new();
    for line in LOCK.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let (id, hash) = line.split_once(' ').expect("lock line is `<id> <sha256>`");
        locked.insert(id);
        let actual = content_hash(id);
        assert_eq!(
            hash.trim(),
            actual,
            "published preset {id} changed. A published id never changes meaning: add the changed \
             contract as a new preset with a new id instead"
        );
    }
    for builtin in memgate_presets::all() {
        assert!(
            locked.contains(builtin.id.as_str()),
            "{} is not in presets/presets.lock; add `{} {}` once its fixtures are verified",
            builtin.id,
            builtin.id,
            content_hash(&builtin.id)
        );
    }
}

#[test]
fn lock_hash_ignores_comments_but_not_content() {
    let text = preset_text("mem0-oss-rest-2026-08");
    let a: Value = serde_saphyr::from_str(&text).expect("parses");
    let b: Value = serde_saphyr::from_str(&format!("# another comment\n{text}")).expect("parses");
    assert_eq!(canonical(&a), canonical(&b));
    let c: Value = serde_saphyr::from_str(&text.replace("path: /search", "path: /v2/search")).expect("parses");
    assert_ne!(canonical(&a), canonical(&c));
}

fn location_value<'a>(body: &'a Value, location: IdLocation, name: &str) -> Option<&'a Value> {
    match location {
        IdLocation::Json => body.get(name),
        IdLocation::JsonFilters => body.get("filters").and_then(|f| f.get(name)),
        IdLocation::Query | IdLocation::Omit => None,
    }
}

#[test]
fn fixtures_agree_with_their_dialect() {
    for builtin in memgate_presets::all() {
        let fixtures = memgate_presets::fixtures(&builtin.id).expect("fixtures exist");
        let search = &builtin.spec.search;
        assert!(!fixtures.search.is_empty(), "{} has no search fixture", builtin.id);
        for case in &fixtures.search {
            let body = case.request.body.as_ref().expect("POST fixtures have a body");
            assert_eq!(body.get("query").and_then(Value::as_str), Some(case.query.as_str()), "{}", case.name);
            for (location, name, value) in [
                (search.user_id_location, "user_id", &fixtures.provider.scope.user_id),
                (search.agent_id_location, "agent_id", &fixtures.provider.scope.agent_id),
                (search.app_id_location, "app_id", &fixtures.provider.scope.app_id),
            ] {
                let sent = location_value(body, location, name).and_then(Value::as_str);
                assert_eq!(sent, value.as_deref(), "{} / {}: {name}", builtin.id, case.name);
            }
            let limit_name = match search.limit_field {
                LimitField::TopK => Some("top_k"),
                LimitField::Limit => Some("limit"),
                LimitField::Omit => None,
            };
            if let Some(limit_name) = limit_name {
                assert_eq!(body.get(limit_name).and_then(Value::as_u64), Some(u64::from(case.limit)));
            }
            assert!(case.expect.items.len() <= case.limit as usize);
        }
        match &builtin.write {
            None => assert!(fixtures.ingest.is_empty(), "{} has ingest fixtures but no write contract", builtin.id),
            Some(write) => {
                assert!(
                    fixtures.ingest.iter().any(|c| c.expect.status == "accepted"),
                    "{} needs an accepted ingest fixture",
                    builtin.id
                );
                for case in &fixtures.ingest {
                    let body = case.request.body.as_ref().expect("writes have a body");
                    assert_eq!(body.get("infer"), Some(&Value::Bool(false)), "{}", case.name);
                    assert_eq!(body.get("metadata").is_some(), write.metadata, "{}", case.name);
                    assert!(["accepted", "rejected", "degraded"].contains(&case.expect.status.as_str()));
                    assert!(case.request.path.ends_with(&write.path));
                }
            }
        }
        let placeholder = &fixtures.provider.credential;
        assert!(placeholder.starts_with("PLACEHOLDER"), "fixtures must never hold a real credential");
    }
}
