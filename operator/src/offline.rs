//! `validate`: the same rules the operator enforces, run on files before anything reaches a cluster.
//!
//! Each document is parsed strictly, checked against the CRD's CEL rules client side and against
//! the pure validation of `memgate-crds`; then references are resolved among the given documents
//! and the built-in dialects. Secrets are optional (GitOps repositories rarely hold them), but a
//! Secret that is given must carry the credential label (`memgate.io/credential: "true"`, as the
//! operator requires) and hold a usable value for every key a provider references. Destinations
//! are judged as in a cluster (loopback refused) unless [`Options::placement`] says standalone,
//! and against the platform team's allow-list when one is given.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;

use kube::CustomResourceExt;
use kube::core::cel::{ErrorKind, Validator};
use memgate_crds::bundle::{Bundle, MissingSecrets, provider_references};
use memgate_crds::manifest::{Object, classify, documents, identity, oversized, secret_data};
use memgate_crds::source_file::{ReadLimits, SourceError, SourceReader, collect_yaml_files};
use memgate_crds::validation::destination::{AllowedDestinations, Placement, provider_destinations};
use memgate_crds::validation::{Violation, memory_gateway, memory_provider, provider_identity};
use memgate_crds::{DialectPreset, MemoryGateway, MemoryProvider, crd, is_credential};
use serde_json::Value;

/// Where a problem was found.
#[derive(Debug, Clone)]
struct Origin {
    file: String,
    index: usize,
    identity: String,
}

/// One output line: file, document index, kind/name, field path, message.
#[derive(Debug, Clone)]
pub struct Problem {
    origin: Origin,
    violation: Violation,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.origin;
        write!(f, "{}: document {}: {}: {}", o.file, o.index, o.identity, self.violation)
    }
}

/// The outcome of a `validate` run.
#[derive(Debug, Default)]
pub struct Report {
    /// Output lines, one per problem.
    pub lines: Vec<String>,
    invalid: usize,
    unreadable: usize,
    objects: usize,
    reported: BTreeSet<(String, usize, String, String)>,
}

impl Report {
    /// 0 all valid, 1 any invalid, 2 unreadable or unparsable input.
    pub fn exit_code(&self) -> u8 {
        if self.unreadable > 0 {
            2
        } else if self.invalid > 0 {
            1
        } else {
            0
        }
    }

    /// One closing line for standard error.
    pub fn summary(&self) -> String {
        format!(
            "{} memgate object(s) checked: {} problem(s), {} unreadable input(s)",
            self.objects, self.invalid, self.unreadable
        )
    }

    /// Record a problem, unless the same one was already reported for this document.
    fn problem(&mut self, origin: &Origin, violation: Violation) {
        let key = (origin.file.clone(), origin.index, violation.field.clone(), violation.message.clone());
        if !self.reported.insert(key) {
            return;
        }
        self.invalid += 1;
        self.lines.push(Problem { origin: origin.clone(), violation }.to_string());
    }
}

/// How `validate` judges what depends on where the objects will run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Cluster (the default: loopback destinations refused) or a standalone gateway's folder.
    pub placement: Placement,
    /// The operator's `--allowed-upstream-origin` list, if the pipeline knows it.
    pub allowed: AllowedDestinations,
}

/// Validate every YAML document under `paths`, reading within `limits` (only regular files; a file
/// over the per-file limit, or one that would take the total over its limit, is unreadable input).
pub fn validate_paths(paths: &[PathBuf], limits: ReadLimits, options: &Options) -> Report {
    let mut report = Report::default();
    let mut files = Vec::new();
    let mut seen = BTreeSet::new();
    for path in paths {
        let before = files.len();
        match collect_yaml_files(path, &mut files, &mut seen) {
            // A path that holds no YAML at all is almost always a wrong path in a pipeline.
            Ok(()) if files.len() == before && path.is_dir() => {
                report.unreadable += 1;
                report.lines.push(format!("{}: no *.yaml or *.yml files found", path.display()));
            }
            Ok(()) => {}
            Err(err) => {
                report.unreadable += 1;
                report.lines.push(format!("{}: unreadable: {err}", path.display()));
            }
        }
    }
    let mut bundle = Bundle { labels_required: true, ..Bundle::default() };
    let mut providers: Vec<(Origin, MemoryProvider)> = Vec::new();
    let mut seen: BTreeMap<String, Origin> = BTreeMap::new();
    let schemas = Schemas::new();
    let mut reader = SourceReader::new(limits);
    let count = files.len();
    for (position, file) in files.into_iter().enumerate() {
        let name = file.display().to_string();
        let text = match reader.read_text(&file) {
            Ok(text) => text,
            Err(err @ SourceError::TotalTooLarge { .. }) => {
                report.unreadable += 1;
                let rest = count - position - 1;
                report.lines.push(format!("{name}: {err} (--max-total-bytes); {rest} further file(s) not read"));
                break;
            }
            Err(err @ SourceError::FileTooLarge { .. }) => {
                report.unreadable += 1;
                report.lines.push(format!("{name}: {err} (--max-file-bytes)"));
                continue;
            }
            Err(err) => {
                report.unreadable += 1;
                report.lines.push(format!("{name}: {err}"));
                continue;
            }
        };
        let docs = match documents(&text) {
            Ok(docs) => docs,
            Err(err) => {
                report.unreadable += 1;
                report.lines.push(format!("{name}: {err}"));
                continue;
            }
        };
        for (index, value) in docs {
            let origin = Origin { file: name.clone(), index, identity: identity(&value) };
            check_document(&origin, &value, &schemas, &mut report, &mut bundle, &mut providers, &mut seen);
        }
    }
    for (origin, provider) in &providers {
        let mut found = provider_destinations(&provider.spec, options.placement);
        found.extend(options.allowed.outside(&provider.spec));
        found.extend(provider_references(provider, &bundle, memgate_presets::view, MissingSecrets::Allowed));
        for v in found {
            report.problem(origin, v);
        }
    }
    report
}

#[allow(clippy::too_many_arguments)]
fn check_document(
    origin: &Origin,
    value: &Value,
    schemas: &Schemas,
    report: &mut Report,
    bundle: &mut Bundle,
    providers: &mut Vec<(Origin, MemoryProvider)>,
    seen: &mut BTreeMap<String, Origin>,
) {
    let parsed = classify(value);
    let memgate =
        matches!(value.get("kind").and_then(Value::as_str), Some("DialectPreset" | "MemoryProvider" | "MemoryGateway"));
    if memgate {
        report.objects += 1;
    }
    let mut found = Vec::new();
    match &parsed {
        Ok(Object::DialectPreset(preset)) => {
            let name = preset.metadata.name.clone().unwrap_or_default();
            if name.is_empty() {
                found.push(Violation::new("metadata.name", "is required"));
            }
            found.extend(bundle.add_preset(&name, preset.spec.clone()));
            note_duplicate(format!("DialectPreset/{name}"), origin, seen, &mut found);
        }
        Ok(Object::MemoryProvider(provider)) => {
            let namespace = provider.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = provider.metadata.name.clone().unwrap_or_default();
            if name.is_empty() {
                found.push(Violation::new("metadata.name", "is required"));
            }
            found.extend(provider_identity(&name, &namespace));
            found.extend(memory_provider(&provider.spec));
            note_duplicate(format!("MemoryProvider/{namespace}/{name}"), origin, seen, &mut found);
            providers.push((origin.clone(), (**provider).clone()));
        }
        Ok(Object::MemoryGateway(gateway)) => {
            let namespace = gateway.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = gateway.metadata.name.clone().unwrap_or_default();
            found.extend(
                provider_identity(&name, &namespace).into_iter().map(|v| {
                    Violation::new(v.field, v.message.replace("a MemoryProvider name", "a MemoryGateway name"))
                }),
            );
            found.extend(memory_gateway(&gateway.spec));
            // At most one per namespace: the operator refuses the younger ones in their status.
            if let Some(first) = seen.get(&format!("MemoryGateway/{namespace}")) {
                found.push(Violation::new(
                    "metadata.name",
                    format!(
                        "another MemoryGateway of namespace {namespace} is in {} document {}: at most one per namespace",
                        first.file, first.index
                    ),
                ));
            } else {
                seen.insert(format!("MemoryGateway/{namespace}"), origin.clone());
            }
        }
        Ok(Object::Secret(secret)) => {
            let namespace = secret.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            let name = secret.metadata.name.clone().unwrap_or_default();
            bundle.add_secret(namespace, name, secret_data(secret), is_credential(secret.metadata.labels.as_ref()));
        }
        Ok(Object::Other) => {}
        Err(violations) => found.extend(violations.iter().cloned()),
    }
    // An oversized object is reported by `classify` alone: its CEL evaluation would cost many copies.
    if memgate && oversized(value).is_none() {
        let typed_ok = parsed.is_ok();
        for v in schemas.cel(value, typed_ok) {
            let covered = found.iter().any(|f| f.field.starts_with(&v.field) || v.field.starts_with(&f.field));
            if !covered {
                found.push(v);
            }
        }
    }
    for v in found {
        report.problem(origin, v);
    }
}

fn note_duplicate(key: String, origin: &Origin, seen: &mut BTreeMap<String, Origin>, found: &mut Vec<Violation>) {
    if let Some(first) = seen.get(&key) {
        found.push(Violation::new("metadata.name", format!("duplicate of {} document {}", first.file, first.index)));
    } else {
        seen.insert(key, origin.clone());
    }
}

/// The CRD schemas, for client-side CEL evaluation.
struct Schemas {
    preset: Option<Value>,
    provider: Option<Value>,
    gateway: Option<Value>,
}

impl Schemas {
    fn new() -> Self {
        Schemas {
            preset: crd::schema_json(&DialectPreset::crd()),
            provider: crd::schema_json(&MemoryProvider::crd()),
            gateway: crd::schema_json(&MemoryGateway::crd()),
        }
    }

    /// CEL rule failures of a memgate document. Runtime evaluation errors are reported only when
    /// the document parsed (otherwise they merely echo a missing or mistyped field already reported).
    fn cel(&self, value: &Value, typed_ok: bool) -> Vec<Violation> {
        let schema = match value.get("kind").and_then(Value::as_str) {
            Some("DialectPreset") => self.preset.as_ref(),
            Some("MemoryProvider") => self.provider.as_ref(),
            Some("MemoryGateway") => self.gateway.as_ref(),
            _ => None,
        };
        let Some(schema) = schema else { return Vec::new() };
        // The API server prunes nulls before it runs rules; so does this.
        let value = without_nulls(value);
        let Err(errors) = Validator::new().validate(schema, &value, None) else { return Vec::new() };
        errors
            .iter()
            .filter(|e| typed_ok || e.kind != ErrorKind::EvaluationError)
            .map(|e| {
                // Every memgate rule message starts with the field it is about; root-level rules have
                // no field path of their own, so the message supplies it.
                let (head, rest) = e.message.split_once(' ').unwrap_or((&e.message, ""));
                let head = head.trim_end_matches(':');
                let (field, message) = if head.starts_with("spec") || head.starts_with("metadata") {
                    (head.to_string(), rest.to_string())
                } else if !e.field_path.is_empty() {
                    (e.field_path.clone(), e.message.clone())
                } else {
                    ("<document>".to_string(), e.message.clone())
                };
                Violation::new(field, format!("{message} (CEL rule)"))
            })
            .collect()
    }
}

/// `value` with every null object member removed, recursively.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> (String, Value) {
        let path = format!("{}/../testdata/invalid/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("example exists");
        let expect = text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).expect("expect line").to_string();
        let (_, doc) = documents(&text).expect("yaml").into_iter().next().expect("a document");
        (expect, doc)
    }

    /// The CRD's CEL rules and the pure validation agree on every single-object rule: the API
    /// server refuses at `kubectl apply` what the operator would refuse.
    #[test]
    fn cel_rules_flag_the_same_field_as_pure_validation() {
        let schemas = Schemas::new();
        for name in [
            "origin-with-path",
            "http-without-opt-in",
            "basepath-traversal",
            "two-dialects",
            "reserved-builtin",
            "timeout-range",
            "no-access",
            "custom-preset-ingest",
            "builtin-name-taken",
            "get-with-json-body",
            "bind-without-service-accounts",
            "scope-whitespace",
        ] {
            let (expect, doc) = example(name);
            let fields: Vec<_> = schemas.cel(&doc, true).into_iter().map(|v| v.field).collect();
            let search_rule = expect.starts_with("spec.search") && fields.iter().any(|f| f == "spec.search");
            assert!(fields.contains(&expect) || search_rule, "{name}: CEL flagged {fields:?}, expected {expect}");
        }
    }

    /// The CEL whitespace rule matches the pure rule: every Unicode space the Mem0 server refuses,
    /// for built-in dialects only.
    #[test]
    fn cel_refuses_scope_whitespace_for_builtin_dialects_only() {
        let schemas = Schemas::new();
        let (_, doc) = example("scope-whitespace");
        for id in ["repo\u{3000}memory", "repo\u{a0}memory", " repo", "repo\u{2028}", "repo\u{85}x"] {
            let mut doc = doc.clone();
            doc["spec"]["scope"]["userId"] = Value::String(id.to_string());
            let fields: Vec<_> = schemas.cel(&doc, true).into_iter().map(|v| v.field).collect();
            assert!(fields.contains(&"spec.scope.userId".to_string()), "{id:?}: {fields:?}");
        }
        let mut custom = doc.clone();
        custom["spec"]["dialect"] = serde_json::json!({"presetRef": "team-search-v1"});
        assert!(schemas.cel(&custom, true).is_empty(), "{:?}", schemas.cel(&custom, true));
    }

    #[test]
    fn cel_accepts_the_quickstart() {
        let schemas = Schemas::new();
        for file in ["quickstart/mem0-oss", "gitops/team-dialect"] {
            let path = format!("{}/../examples/{file}.yaml", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).expect("example");
            for (_, doc) in documents(&text).expect("yaml") {
                assert!(schemas.cel(&doc, true).is_empty(), "{file}: {:?}", schemas.cel(&doc, true));
            }
        }
    }
}
