//! YAML/JSON reading of the resources (`memgate_crds::manifest`): splitting a text into documents
//! and recognising each strictly.
//!
//! Properties: no panic; a parse error never quotes the text (it may be a Secret file), so the
//! planted marker never shows in it; a refused document's violations never show a Secret value;
//! a recognised Secret's data can always be read.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memgate_crds::manifest::{Object, classify, documents, identity, secret_data};
use memgate_fuzz::{MARKER, assert_hidden, marker_only_in_secret_values};

fuzz_target!(|text: &str| {
    let docs = match documents(text) {
        Ok(docs) => docs,
        Err(err) => {
            assert_hidden("manifest::documents error", &err, MARKER);
            return;
        }
    };
    for (_, value) in docs {
        let _ = identity(&value);
        let confined = marker_only_in_secret_values(&value);
        match classify(&value) {
            Ok(Object::Secret(secret)) => {
                let _ = secret_data(&secret);
            }
            Ok(_) => {}
            Err(violations) => {
                assert!(!violations.is_empty(), "a refusal names at least one problem");
                if confined {
                    for violation in &violations {
                        assert_hidden("manifest::classify violation", violation, MARKER);
                    }
                }
            }
        }
    }
});
