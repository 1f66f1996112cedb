//! What a MemoryProvider refers to, answered in one place: the Secret keys it needs, what each
//! of them resolved to, and which dialect it speaks.
//!
//! ```text
//! [ MemoryProvider ] --dialect.builtin-------------------> [ built-in dialect ]  (memgate-presets)
//!                    --dialect.presetRef-----------------> [ DialectPreset ]     (cluster-scoped, by name)
//!                    --credentials.secretRef-------------> [ Secret key ]        (same namespace)
//!                    --access.bearerToken.secretRef------> [ Secret key ]        (same namespace)
//! ```
//!
//! Pure: callers bring what they found (the operator from its index and its reads of the API,
//! `memgate-operator validate` and the gateway's standalone mode from a folder of YAML), so the
//! three can never disagree about what a provider needs or about what a finding means. Messages
//! name the field and the Secret, never a value.

use std::collections::{BTreeMap, BTreeSet};

use crate::validation::{Credential, DialectView, Violation, credential_value, dialect_preset};
use crate::{CREDENTIAL_SELECTOR, DialectPresetSpec, DialectSource, MemoryProviderSpec, SecretKeyRef};

/// One Secret key a provider refers to, and the field that refers to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretUse<'a> {
    /// Field path of the reference, e.g. `spec.credentials.secretRef`.
    pub field: &'static str,
    /// The Secret (in the provider's namespace) and key.
    pub secret_ref: &'a SecretKeyRef,
}

/// The upstream credential's Secret key.
pub fn credential_use(spec: &MemoryProviderSpec) -> SecretUse<'_> {
    SecretUse { field: "spec.credentials.secretRef", secret_ref: &spec.credentials.secret_ref }
}

/// The callers' bearer token's Secret key, when callers use one.
pub fn bearer_token_use(spec: &MemoryProviderSpec) -> Option<SecretUse<'_>> {
    let bearer = spec.access.bearer_token.as_ref()?;
    Some(SecretUse { field: "spec.access.bearerToken.secretRef", secret_ref: &bearer.secret_ref })
}

/// Every Secret key `spec` needs: the upstream credential, then the callers' bearer token.
pub fn secret_uses(spec: &MemoryProviderSpec) -> Vec<SecretUse<'_>> {
    std::iter::once(credential_use(spec)).chain(bearer_token_use(spec)).collect()
}

/// Keys wanted per Secret name.
pub type WantedKeys = BTreeMap<String, BTreeSet<String>>;

/// The Secret keys a set of providers need, by Secret name.
pub fn wanted_keys<'a>(specs: impl IntoIterator<Item = &'a MemoryProviderSpec>) -> WantedKeys {
    let mut wanted = WantedKeys::new();
    for spec in specs {
        for SecretUse { secret_ref, .. } in secret_uses(spec) {
            wanted.entry(secret_ref.name.clone()).or_default().insert(secret_ref.key.clone());
        }
    }
    wanted
}

/// What looking a Secret key up found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretLookup<'a> {
    /// The Secret may not be used: it does not exist, or it lacks the credential label (where the
    /// label is required, the two are never told apart, so names cannot be probed).
    NotPermitted,
    /// No such Secret (where no label is required: a person's own config folder).
    NoSecret,
    /// The Secret exists without the key.
    NoKey,
    /// The key's bytes.
    Value(&'a [u8]),
}

impl<'a> SecretLookup<'a> {
    /// Look `key` up in the data of a Secret that may be absent.
    pub fn of<V: AsRef<[u8]>>(data: Option<&'a BTreeMap<String, V>>, key: &str) -> SecretLookup<'a> {
        match data {
            None => SecretLookup::NoSecret,
            Some(data) => data.get(key).map_or(SecretLookup::NoKey, |v| SecretLookup::Value(v.as_ref())),
        }
    }
}

/// What a Secret key reference resolved to. Never carries the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyVerdict {
    /// The key holds a usable credential.
    Usable,
    /// The Secret is absent or not labelled as a memgate credential (the same verdict for both).
    NotPermitted,
    /// The Secret does not exist.
    SecretNotFound,
    /// The Secret has no such key.
    KeyMissing,
    /// The value breaks the credential rule; the rule's message.
    Unusable(String),
}

/// Read a credential from what a lookup found: the value, or why it cannot be used.
pub fn read_key(lookup: SecretLookup<'_>) -> Result<Credential, KeyVerdict> {
    match lookup {
        SecretLookup::NotPermitted => Err(KeyVerdict::NotPermitted),
        SecretLookup::NoSecret => Err(KeyVerdict::SecretNotFound),
        SecretLookup::NoKey => Err(KeyVerdict::KeyMissing),
        SecretLookup::Value(raw) => credential_value("", raw).map_err(|v| KeyVerdict::Unusable(v.message)),
    }
}

/// Judge what a lookup found without keeping the value.
pub fn judge_key(lookup: SecretLookup<'_>) -> KeyVerdict {
    read_key(lookup).err().unwrap_or(KeyVerdict::Usable)
}

impl KeyVerdict {
    /// The violation this verdict is for a use in `namespace`; `None` when usable.
    pub fn violation(&self, secret_use: SecretUse<'_>, namespace: &str) -> Option<Violation> {
        let SecretUse { field, secret_ref: SecretKeyRef { name, key } } = secret_use;
        let at = format!("Secret \"{namespace}/{name}\"");
        match self {
            KeyVerdict::Usable => None,
            KeyVerdict::NotPermitted => Some(Violation::new(
                format!("{field}.name"),
                format!(
                    "{at} is not available to memgate: it does not exist, or it lacks the label {CREDENTIAL_SELECTOR}"
                ),
            )),
            KeyVerdict::SecretNotFound => Some(Violation::new(format!("{field}.name"), format!("{at} not found"))),
            KeyVerdict::KeyMissing => {
                Some(Violation::new(format!("{field}.key"), format!("{at} has no key \"{key}\"")))
            }
            KeyVerdict::Unusable(why) => Some(Violation::new(field, format!("{at} key \"{key}\": {why}"))),
        }
    }
}

/// Why a provider's dialect could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DialectProblem {
    /// `spec.dialect.builtin` names no shipped dialect.
    UnknownBuiltin(String),
    /// `spec.dialect.presetRef` names no DialectPreset.
    PresetNotFound(String),
    /// The DialectPreset exists but cannot be read or breaks its own rules; why.
    PresetInvalid {
        /// Its name.
        name: String,
        /// What is wrong with it.
        why: String,
    },
}

impl DialectProblem {
    /// The problem as a violation of the provider's field.
    pub fn violation(&self) -> Violation {
        match self {
            DialectProblem::UnknownBuiltin(id) => {
                Violation::new("spec.dialect.builtin", format!("unknown built-in dialect \"{id}\""))
            }
            DialectProblem::PresetNotFound(name) => {
                Violation::new("spec.dialect.presetRef", format!("DialectPreset \"{name}\" not found"))
            }
            DialectProblem::PresetInvalid { name, why } => {
                Violation::new("spec.dialect.presetRef", format!("DialectPreset \"{name}\" is invalid ({why})"))
            }
        }
    }
}

/// A provider's dialect, resolved.
#[derive(Debug, Clone, Copy)]
pub struct ResolvedDialect<'a> {
    /// The dialect id: the built-in id or the DialectPreset's name.
    pub id: &'a str,
    /// Its grammar.
    pub view: DialectView<'a>,
    /// True for a DialectPreset (`presetRef`), false for a built-in.
    pub is_preset: bool,
}

/// Resolve a dialect source: a built-in through `builtin`, a DialectPreset through `preset`
/// (`None`: not found; `Err`: found but unreadable, with why). A preset must pass its own rules.
pub fn resolve_dialect<'a>(
    source: &'a DialectSource,
    builtin: impl Fn(&str) -> Option<DialectView<'static>>,
    preset: impl Fn(&str) -> Option<Result<&'a DialectPresetSpec, String>>,
) -> Result<ResolvedDialect<'a>, DialectProblem> {
    if let Some(id) = &source.builtin {
        let view = builtin(id).ok_or_else(|| DialectProblem::UnknownBuiltin(id.clone()))?;
        return Ok(ResolvedDialect { id, view, is_preset: false });
    }
    let name = source.preset_ref.as_deref().unwrap_or_default();
    let invalid = |why: String| DialectProblem::PresetInvalid { name: name.to_string(), why };
    let spec = preset(name)
        .ok_or_else(|| DialectProblem::PresetNotFound(name.to_string()))?
        .map_err(|e| invalid(format!("cannot be read: {e}")))?;
    let found = dialect_preset(name, spec);
    if !found.is_empty() {
        return Err(invalid(found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")));
    }
    Ok(ResolvedDialect { id: name, view: DialectView { spec, can_write: false }, is_preset: true })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(access: serde_json::Value) -> MemoryProviderSpec {
        serde_json::from_value(json!({
            "dialect": {"builtin": "mem0-oss-rest-2026-08"},
            "endpoint": {"origin": "https://mem0.example.com"},
            "credentials": {"secretRef": {"name": "mem0-api", "key": "api-key"}},
            "scope": {"userId": "u"},
            "access": access,
        }))
        .expect("spec")
    }

    #[test]
    fn a_provider_needs_its_credential_and_its_callers_bearer_token() {
        let anonymous = spec(json!({"anonymous": true}));
        let fields: Vec<&str> = secret_uses(&anonymous).iter().map(|u| u.field).collect();
        assert_eq!(fields, ["spec.credentials.secretRef"]);
        let bearer = spec(json!({"bearerToken": {"secretRef": {"name": "callers", "key": "nexent"}}}));
        let fields: Vec<&str> = secret_uses(&bearer).iter().map(|u| u.field).collect();
        assert_eq!(fields, ["spec.credentials.secretRef", "spec.access.bearerToken.secretRef"]);
        let wanted = wanted_keys([&anonymous, &bearer]);
        assert_eq!(wanted.len(), 2);
        assert!(wanted["callers"].contains("nexent") && wanted["mem0-api"].contains("api-key"));
    }

    #[test]
    fn each_lookup_has_its_verdict_and_message_without_the_value() {
        let data: BTreeMap<String, Vec<u8>> =
            [("api-key".to_string(), b"PLANTED-VALUE\n".to_vec()), ("blank".to_string(), b" ".to_vec())].into();
        assert_eq!(judge_key(SecretLookup::of(Some(&data), "api-key")), KeyVerdict::Usable);
        assert_eq!(
            read_key(SecretLookup::of(Some(&data), "api-key")).map(|c| c.expose().to_string()),
            Ok("PLANTED-VALUE".into())
        );
        assert_eq!(judge_key(SecretLookup::of(Some(&data), "absent")), KeyVerdict::KeyMissing);
        assert_eq!(judge_key(SecretLookup::of::<Vec<u8>>(None, "api-key")), KeyVerdict::SecretNotFound);
        let provider = spec(json!({"anonymous": true}));
        let used = secret_uses(&provider)[0];
        let missing = KeyVerdict::KeyMissing.violation(used, "agents").expect("a violation");
        assert_eq!(
            missing.to_string(),
            "spec.credentials.secretRef.key: Secret \"agents/mem0-api\" has no key \"api-key\""
        );
        let absent = KeyVerdict::SecretNotFound.violation(used, "agents").expect("a violation");
        assert_eq!(absent.field, "spec.credentials.secretRef.name");
        let blank = judge_key(SecretLookup::of(Some(&data), "blank"));
        let violation = blank.violation(used, "agents").expect("a violation");
        assert!(violation.message.contains("blank"), "{violation}");
        assert!(KeyVerdict::Usable.violation(used, "agents").is_none());
        let refused = judge_key(SecretLookup::NotPermitted).violation(used, "agents").expect("a violation");
        assert_eq!(
            refused.to_string(),
            "spec.credentials.secretRef.name: Secret \"agents/mem0-api\" is not available to memgate: it does not exist, or it lacks the label memgate.io/credential=true"
        );
        assert!(!format!("{violation} {blank:?}").contains("PLANTED"));
    }

    fn no_builtins(_: &str) -> Option<DialectView<'static>> {
        None
    }

    #[test]
    fn a_dialect_resolves_or_says_why_not() {
        let source = DialectSource { builtin: None, preset_ref: Some("team".into()) };
        let problem = resolve_dialect(&source, no_builtins, |_| None).expect_err("absent");
        assert_eq!(problem, DialectProblem::PresetNotFound("team".into()));
        assert_eq!(problem.violation().field, "spec.dialect.presetRef");
        let problem =
            resolve_dialect(&source, no_builtins, |_| Some(Err("spec: missing field".into()))).expect_err("unreadable");
        assert!(matches!(&problem, DialectProblem::PresetInvalid { why, .. } if why.contains("cannot be read")));
        let builtin = DialectSource { builtin: Some("nope".into()), preset_ref: None };
        let problem = resolve_dialect(&builtin, no_builtins, |_| None).expect_err("unknown");
        assert_eq!(problem.violation().field, "spec.dialect.builtin");
    }
}
