//! The validation rules (`memgate_crds::validation`) on resources read from YAML, and credential
//! values read from Secrets.
//!
//! Properties: no panic; a provider spec the rules accept has an origin `parse_origin` accepts
//! (scheme http/https, no user info, path, query or fragment) and paths without traversal or
//! encoding tricks; a dialect the rules accept has such a path too; no violation shows a credential
//! (the planted marker) and a refused credential value is never quoted.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_crds::manifest::{Object, classify, documents};
use memgate_crds::validation::{
    check_path, credential_value, dialect_preset, memory_provider, parse_origin, provider_against_dialect,
    provider_identity,
};
use memgate_fuzz::{MARKER, assert_hidden, marker_only_in_secret_values};

fn path_is_plain(path: &str) {
    for bad in ["//", "?", "#", "%", "\\", "/../", "/./"] {
        assert!(!path.contains(bad), "accepted path {path:?} contains {bad:?}");
    }
    assert!(!path.ends_with("/..") && !path.ends_with("/."), "accepted path {path:?} ends in a dot segment");
    assert!(
        path.chars().all(|c| c.is_ascii_graphic()),
        "accepted path {path:?} has a space, control or non-ASCII character"
    );
}

fuzz_target!(|text: &str| {
    // Credential values: whatever the bytes, a refusal never quotes them.
    let raw = format!("{MARKER}{text}");
    if let Err(violation) = credential_value("spec.credentials.secretRef", raw.as_bytes()) {
        assert_hidden("credential_value", &violation, MARKER);
    }
    let Ok(docs) = documents(text) else { return };
    for (_, value) in docs {
        let confined = marker_only_in_secret_values(&value);
        let found = match classify(&value) {
            Ok(Object::MemoryProvider(provider)) => {
                let spec = &provider.spec;
                let name = provider.metadata.name.clone().unwrap_or_default();
                let namespace = provider.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                let mut found = provider_identity(&name, &namespace);
                let own = memory_provider(spec);
                if own.is_empty() {
                    let endpoint = &spec.endpoint;
                    let origin = parse_origin("origin", &endpoint.origin, endpoint.allow_insecure_http)
                        .unwrap_or_else(|v| panic!("accepted provider has a refused origin: {v}"));
                    let url = url::Url::parse(&origin).expect("a normalised origin parses");
                    assert!(url.username().is_empty() && url.password().is_none());
                    assert!(url.query().is_none() && url.fragment().is_none() && url.path() == "/");
                    assert!(matches!(url.scheme(), "https" | "http"));
                    assert!(url.scheme() == "https" || endpoint.allow_insecure_http);
                    if !endpoint.base_path.is_empty() {
                        path_is_plain(&endpoint.base_path);
                    }
                    for builtin in memgate_presets::all() {
                        if let Some(view) = memgate_presets::view(&builtin.id) {
                            found.extend(provider_against_dialect(spec, view));
                        }
                    }
                }
                found.extend(own);
                found
            }
            Ok(Object::DialectPreset(preset)) => {
                let name = preset.metadata.name.clone().unwrap_or_default();
                let found = dialect_preset(&name, &preset.spec);
                if found.is_empty() {
                    path_is_plain(&preset.spec.search.path);
                    assert!(check_path("search.path", &preset.spec.search.path, false).is_empty());
                }
                found
            }
            Ok(_) => Vec::new(),
            Err(found) => found,
        };
        if confined {
            for violation in &found {
                assert_hidden("validation violation", violation, MARKER);
            }
        }
    }
});
