//! Reading the YAML a person writes: multi-document files of DialectPresets, MemoryProviders and
//! the `v1` Secrets they reference.
//!
//! Parsing is strict: an unknown field anywhere in a memgate object is an error naming its path,
//! because a typo must never silently switch off a safety rule.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::validation::Violation;
use crate::{API_VERSION, DialectPreset, MemoryGateway, MemoryProvider};

/// `apiVersion` of the document naming a mounted Secret folder, which the operator renders into a
/// gateway's config in place of a Secret (the gateway reads it: gateway/src/config).
pub const SECRET_MOUNT_API_VERSION: &str = "gateway.memgate.io/v1alpha1";
/// `kind` of that document.
pub const SECRET_MOUNT_KIND: &str = "SecretMount";

/// True for a `SecretMount` document.
pub fn is_secret_mount(value: &Value) -> bool {
    value.get("apiVersion").and_then(Value::as_str) == Some(SECRET_MOUNT_API_VERSION)
        && value.get("kind").and_then(Value::as_str) == Some(SECRET_MOUNT_KIND)
}

/// A YAML text that is not YAML at all (or not a sequence of mappings).
#[derive(Debug, thiserror::Error)]
#[error("not parsable as YAML: {0}")]
pub struct ParseError(String);

/// Split a YAML text into its documents, dropping empty ones; each keeps its 0-based index.
///
/// Parse errors carry the position and the parser's reason but no snippet of the text: the text may
/// be a Secret, and these messages reach logs, `/readyz` and CI output.
pub fn documents(text: &str) -> Result<Vec<(usize, Value)>, ParseError> {
    let options = serde_saphyr::options! { with_snippet: false };
    let docs: Vec<Value> =
        serde_saphyr::from_multiple_with_options(text, options).map_err(|e| ParseError(e.to_string()))?;
    let mut out = Vec::new();
    for (index, doc) in docs.into_iter().enumerate() {
        match list_items(&doc) {
            // A `v1 List` (what `kubectl get -o yaml` prints) is applied item by item: so is it read.
            Some(items) => out.extend(items.iter().filter(|v| !v.is_null()).map(|v| (index, v.clone()))),
            None if !doc.is_null() => out.push((index, doc)),
            None => {}
        }
    }
    Ok(out)
}

fn list_items(doc: &Value) -> Option<&Vec<Value>> {
    let is_list = doc.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && doc.get("kind").and_then(Value::as_str) == Some("List");
    if is_list { doc.get("items").and_then(Value::as_array) } else { None }
}

/// A recognised object.
#[derive(Debug, Clone)]
pub enum Object {
    /// A `memgate.io/v1alpha1` DialectPreset.
    DialectPreset(Box<DialectPreset>),
    /// A `memgate.io/v1alpha1` MemoryProvider.
    MemoryProvider(Box<MemoryProvider>),
    /// A `memgate.io/v1alpha1` MemoryGateway.
    MemoryGateway(Box<MemoryGateway>),
    /// A `v1` Secret (possible credential source).
    Secret(Box<Secret>),
    /// Any other kind: not memgate's business, left alone.
    Other,
}

/// `kind/name` of a document, as far as it can be read, for messages.
pub fn identity(value: &Value) -> String {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("<no kind>");
    let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<no name>");
    format!("{kind}/{name}")
}

const TOP_LEVEL: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
const METADATA: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "annotations",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "finalizers",
    "ownerReferences",
    "managedFields",
    "selfLink",
];

/// Largest memgate object accepted, in bytes of its JSON form: what etcd stores for one object by
/// default (`--max-request-bytes`, 1.5 MiB), so anything larger could never be applied anyway.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// About how many bytes `value` takes as JSON (strings and keys by length, other scalars and
/// punctuation counted small); cheap, copies nothing.
pub fn approximate_json_size(value: &Value) -> usize {
    match value {
        Value::String(text) => text.len() + 2,
        Value::Array(items) => items.iter().map(|v| approximate_json_size(v) + 1).sum::<usize>() + 2,
        Value::Object(map) => map.iter().map(|(k, v)| k.len() + 4 + approximate_json_size(v)).sum::<usize>() + 2,
        _ => 8,
    }
}

/// The violation of a memgate object larger than [`MAX_OBJECT_BYTES`], checked before anything
/// else looks at it (the CEL evaluation of a huge object costs many copies of it).
pub fn oversized(value: &Value) -> Option<Violation> {
    (approximate_json_size(value) > MAX_OBJECT_BYTES).then(|| {
        Violation::new(
            "<document>",
            format!(
                "is larger than {MAX_OBJECT_BYTES} bytes, more than the Kubernetes API server stores for one object"
            ),
        )
    })
}

/// Recognise and strictly deserialize one document.
pub fn classify(value: &Value) -> Result<Object, Vec<Violation>> {
    let Some(map) = value.as_object() else {
        return Err(vec![Violation::new("<document>", "must be a mapping with apiVersion and kind")]);
    };
    let api_version = map.get("apiVersion").and_then(Value::as_str);
    let kind = map.get("kind").and_then(Value::as_str);
    let memgate = matches!(kind, Some("DialectPreset" | "MemoryProvider" | "MemoryGateway"));
    if memgate && let Some(too_large) = oversized(value) {
        return Err(vec![too_large]);
    }
    match (api_version, kind) {
        (Some("v1"), Some("Secret")) => typed(value).map(|s| Object::Secret(Box::new(s))).map_err(|found| {
            // serde's messages quote the offending value; for a Secret that is a credential.
            found
                .into_iter()
                .map(|v| Violation::new(v.field, "must be a Secret with string data (base64) or stringData values"))
                .collect()
        }),
        (api, Some(kind @ ("DialectPreset" | "MemoryProvider" | "MemoryGateway"))) => {
            let mut found = Vec::new();
            if api != Some(API_VERSION) {
                found.push(Violation::new("apiVersion", format!("must be {API_VERSION} for kind {kind}")));
            }
            found.extend(unknown_keys("", map, TOP_LEVEL));
            if let Some(Value::Object(meta)) = map.get("metadata") {
                found.extend(unknown_keys("metadata.", meta, METADATA));
            }
            if !found.is_empty() {
                return Err(found);
            }
            match kind {
                "DialectPreset" => typed(value).map(|o| Object::DialectPreset(Box::new(o))),
                "MemoryGateway" => typed(value).map(|o| Object::MemoryGateway(Box::new(o))),
                _ => typed(value).map(|o| Object::MemoryProvider(Box::new(o))),
            }
        }
        (Some(api), kind) if api.starts_with("memgate.io/") => Err(vec![Violation::new(
            "kind",
            format!(
                "{} is not a memgate.io kind: use DialectPreset, MemoryProvider or MemoryGateway",
                kind.unwrap_or("<none>")
            ),
        )]),
        // Anything else (other kinds, Helm values, CI files without apiVersion/kind) is not memgate's.
        _ => Ok(Object::Other),
    }
}

fn unknown_keys(prefix: &str, map: &serde_json::Map<String, Value>, known: &[&str]) -> Vec<Violation> {
    map.keys()
        .filter(|k| !known.contains(&k.as_str()))
        .map(|k| Violation::new(format!("{prefix}{k}"), "unknown field"))
        .collect()
}

fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, Vec<Violation>> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." { "<document>".to_string() } else { path };
        vec![Violation::new(field, err.into_inner().to_string())]
    })
}

/// The data of a Secret with `stringData` merged over base64 `data`, as the API server does.
pub fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> =
        secret.data.iter().flatten().map(|(k, v)| (k.clone(), v.0.clone())).collect();
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDER: &str = r#"
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {name: repo-memory, namespace: agents}
spec:
  dialect: {builtin: mem0-oss-rest-2026-08}
  endpoint: {origin: "http://mem0.memory.svc:8888", allowInsecureHttp: true}
  credentials: {secretRef: {name: mem0-api, key: api-key}}
  scope: {userId: repository-memory, agentId: qwen-code}
  access: {anonymous: true}
"#;

    #[test]
    fn provider_parses_with_defaults() {
        let docs = documents(PROVIDER).expect("yaml");
        let Ok(Object::MemoryProvider(p)) = classify(&docs[0].1) else { panic!("not a provider") };
        assert!(p.spec.enabled && p.spec.mcp.enabled);
        assert_eq!(p.spec.timeout_ms, 5000);
        assert_eq!(p.spec.endpoint.base_path, "");
        assert!(!p.spec.nexent.search && !p.spec.nexent.ingest);
    }

    #[test]
    fn unknown_spec_field_is_an_error_naming_its_path() {
        let text = PROVIDER.replace("allowInsecureHttp", "allowInsecureHtp");
        let docs = documents(&text).expect("yaml");
        let err = classify(&docs[0].1).unwrap_err();
        assert_eq!(err[0].field, "spec.endpoint.allowInsecureHtp");
        assert!(err[0].message.contains("allowInsecureHtp"), "{}", err[0].message);
    }

    #[test]
    fn unknown_top_level_and_metadata_fields_are_errors() {
        let text = format!("{PROVIDER}extra: 1\n").replace("namespace: agents", "namespace: agents, nmae: x");
        let docs = documents(&text).expect("yaml");
        let fields: Vec<_> = classify(&docs[0].1).unwrap_err().into_iter().map(|v| v.field).collect();
        assert_eq!(fields, ["extra", "metadata.nmae"]);
    }

    #[test]
    fn wrong_api_version_is_an_error() {
        let text = PROVIDER.replace("memgate.io/v1alpha1", "memgate.io/v1");
        let docs = documents(&text).expect("yaml");
        assert_eq!(classify(&docs[0].1).unwrap_err()[0].field, "apiVersion");
    }

    #[test]
    fn closed_enum_values_are_refused() {
        let text = r#"
apiVersion: memgate.io/v1alpha1
kind: DialectPreset
metadata: {name: d}
spec:
  dialectVersion: 1
  auth: cookie
  search: {method: POST, path: /s, queryLocation: json, userIdLocation: omit, agentIdLocation: omit, appIdLocation: omit, limitField: limit}
  response: {collection: results, idField: id, contentField: memory, titleField: omit, uriField: omit, scoreField: omit, updatedAtField: omit}
"#;
        let docs = documents(text).expect("yaml");
        let err = classify(&docs[0].1).unwrap_err();
        assert_eq!(err[0].field, "spec.auth");
        assert!(err[0].message.contains("authorization-token"), "{}", err[0].message);
    }

    #[test]
    fn secrets_merge_string_data_over_data_and_others_are_ignored() {
        let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {a: YWFh, b: YmJi}\nstringData: {b: override}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
        let docs = documents(text).expect("yaml");
        assert_eq!(docs.len(), 2);
        let Ok(Object::Secret(s)) = classify(&docs[0].1) else { panic!("not a secret") };
        let data = secret_data(&s);
        assert_eq!(data["a"], b"aaa");
        assert_eq!(data["b"], b"override");
        assert!(matches!(classify(&docs[1].1), Ok(Object::Other)));
    }

    #[test]
    fn list_items_are_read_and_unknown_memgate_kinds_are_errors() {
        let text = format!(
            "apiVersion: v1\nkind: List\nitems:\n{}",
            PROVIDER
                .trim()
                .lines()
                .enumerate()
                .map(|(i, l)| if i == 0 { format!("- {l}\n") } else { format!("  {l}\n") })
                .collect::<String>()
        );
        let docs = documents(&text).expect("yaml");
        assert_eq!(docs.len(), 1);
        assert!(matches!(classify(&docs[0].1), Ok(Object::MemoryProvider(_))));
        let typo = PROVIDER.replace("kind: MemoryProvider", "kind: MemoryProviders");
        let docs = documents(&typo).expect("yaml");
        assert_eq!(classify(&docs[0].1).unwrap_err()[0].field, "kind");
        let values = documents("replicaCount: 2\nimage: {tag: x}\n").expect("yaml");
        assert!(matches!(classify(&values[0].1), Ok(Object::Other)));
    }

    #[test]
    fn memgate_objects_larger_than_etcd_stores_are_refused_before_parsing_them() {
        let huge = PROVIDER.replace("repository-memory", &"x".repeat(MAX_OBJECT_BYTES));
        let docs = documents(&huge).expect("yaml");
        let err = classify(&docs[0].1).unwrap_err();
        assert_eq!((err.len(), err[0].field.as_str()), (1, "<document>"));
        assert!(!err[0].message.contains("xxxx"), "{}", err[0].message);
        let json = serde_json::to_vec(&docs[0].1).expect("json").len();
        let estimate = approximate_json_size(&docs[0].1);
        assert!(estimate <= json + json / 10 && estimate + estimate / 10 >= json, "{estimate} vs {json}");
    }

    #[test]
    fn broken_yaml_is_a_parse_error() {
        assert!(documents("a: [1, 2\n").is_err());
    }

    #[test]
    fn parse_errors_never_quote_the_text() {
        let text = "apiVersion: v1\nkind: Secret\nstringData:\n  api-key: \"sk-live-TOPSECRET\" trailing\n";
        let err = documents(text).unwrap_err().to_string();
        assert!(!err.contains("TOPSECRET"), "{err}");
        let text = "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {api-key: [sk-live-TOPSECRET]}\ndata: {b: \"!!notbase64-TOPSECRET\"}\n";
        let docs = documents(text).expect("yaml");
        let err = classify(&docs[0].1).unwrap_err();
        assert!(err.iter().all(|v| !v.to_string().contains("TOPSECRET")), "{err:?}");
    }
}
