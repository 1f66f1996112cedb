//! Gateway config documents (`config::build_snapshot`): parsed documents plus mounted Secret data
//! into the served snapshot, all or nothing.
//!
//! Properties: no panic; neither the error nor the snapshot's `Debug` shows a credential (the
//! planted marker in Secret values of the text, or the mounted Secret's marker); every served
//! provider's origin is one `parse_origin` accepts unchanged, and its paths pass the path rules.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use memgate_crds::manifest::documents;
use memgate_crds::validation::{check_path, parse_origin};
use memgate_fuzz::{MARKER, MOUNTED_MARKER, assert_hidden, marker_only_in_secret_values};
use memgate_gateway::config::build_snapshot;

fuzz_target!(|text: &str| {
    if text.contains(MOUNTED_MARKER) {
        return;
    }
    let Ok(docs) = documents(text) else { return };
    let confined = docs.iter().all(|(_, value)| marker_only_in_secret_values(value));
    let sourced: Vec<(String, serde_json::Value)> =
        docs.into_iter().map(|(index, value)| (format!("fuzz.yaml#{index}"), value)).collect();
    let mut mounted = BTreeMap::new();
    mounted.insert(
        ("agents".to_string(), "mounted".to_string()),
        BTreeMap::from([("api-key".to_string(), MOUNTED_MARKER.as_bytes().to_vec())]),
    );
    match build_snapshot(&sourced, &mounted) {
        Ok(snapshot) => {
            let debug = format!("{snapshot:?}");
            assert!(!debug.contains(MOUNTED_MARKER), "snapshot Debug shows the mounted credential: {debug}");
            if confined {
                assert!(!debug.contains(MARKER), "snapshot Debug shows a Secret value: {debug}");
            }
            for (name, provider) in &snapshot.providers {
                assert_eq!(name, &provider.name);
                let origin = &provider.target.origin;
                assert_eq!(
                    parse_origin("origin", origin, true).as_deref(),
                    Ok(origin.as_str()),
                    "origin not canonical"
                );
                assert!(check_path("basePath", &provider.target.base_path, true).is_empty());
                assert!(check_path("search.path", &provider.dialect.search.path, false).is_empty());
                assert!(!provider.target.timeout.is_zero());
            }
        }
        Err(err) => {
            assert!(!err.problems.is_empty(), "a refused config names at least one problem");
            assert_hidden("build_snapshot error", &err, MOUNTED_MARKER);
            if confined {
                assert_hidden("build_snapshot error", &err, MARKER);
            }
        }
    }
});
