//! A folder's worth of objects to resolve providers against: the DialectPresets and Secrets given
//! beside them.
//!
//! Used by `memgate-operator validate` on a folder of YAML and by the gateway's standalone mode.
//! What a provider refers to, and what each finding means, is [`crate::references`]: the operator
//! answers the same questions from its index and its reads of the API.

use std::collections::{BTreeMap, BTreeSet};

use crate::references::{self, DialectProblem, ResolvedDialect, SecretLookup, SecretUse};
use crate::validation::{Credential, DialectView, Violation, dialect_preset, provider_against_dialect};
use crate::{DialectPresetSpec, MemoryProvider};

/// Secret data by `(namespace, name)`, key to bytes.
pub type SecretStore = BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>;

/// What to do about a referenced Secret that is not in the bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingSecrets {
    /// A GitOps repository rarely holds Secrets: absent ones are not an error.
    Allowed,
    /// Serving needs the value: an absent Secret is an error.
    Refused,
}

/// The objects references are resolved against.
#[derive(Debug, Default, Clone)]
pub struct Bundle {
    /// DialectPresets by name.
    pub presets: BTreeMap<String, DialectPresetSpec>,
    /// Secrets.
    pub secrets: SecretStore,
    /// Secrets given with the credential label (`memgate.io/credential: "true"`).
    pub labelled: BTreeSet<(String, String)>,
    /// Judge Secrets as the operator does: one without the credential label is not permitted
    /// (`memgate-operator validate`); a gateway's own config folder needs no label.
    pub labels_required: bool,
}

impl Bundle {
    /// Add a DialectPreset; returns its own violations (it is kept either way, and refused when
    /// a provider names it).
    pub fn add_preset(&mut self, name: &str, spec: DialectPresetSpec) -> Vec<Violation> {
        let found = dialect_preset(name, &spec);
        self.presets.insert(name.to_string(), spec);
        found
    }

    /// Resolve a provider's dialect: a built-in through `builtin`, a preset through the bundle.
    pub fn resolve_dialect<'a>(
        &'a self,
        provider: &'a MemoryProvider,
        builtin: impl Fn(&str) -> Option<DialectView<'static>>,
    ) -> Result<ResolvedDialect<'a>, Violation> {
        references::resolve_dialect(&provider.spec.dialect, builtin, |name| self.presets.get(name).map(Ok)).map_err(
            |problem| match problem {
                DialectProblem::PresetInvalid { name, .. } => Violation::new(
                    "spec.dialect.presetRef",
                    format!("DialectPreset \"{name}\" is invalid; fix its own errors first"),
                ),
                other => other.violation(),
            },
        )
    }

    /// Add a Secret's data and whether it carries the credential label.
    pub fn add_secret(&mut self, namespace: String, name: String, data: BTreeMap<String, Vec<u8>>, labelled: bool) {
        if labelled {
            self.labelled.insert((namespace.clone(), name.clone()));
        }
        self.secrets.insert((namespace, name), data);
    }

    /// What the bundle holds for one Secret key a provider in `namespace` uses.
    pub fn lookup(&self, namespace: &str, secret_use: SecretUse<'_>) -> SecretLookup<'_> {
        let id = (namespace.to_string(), secret_use.secret_ref.name.clone());
        if self.labels_required && self.secrets.contains_key(&id) && !self.labelled.contains(&id) {
            return SecretLookup::NotPermitted;
        }
        SecretLookup::of(self.secrets.get(&id), &secret_use.secret_ref.key)
    }

    /// The credential one Secret key a provider in `namespace` uses holds, or the violation.
    pub fn credential(&self, namespace: &str, secret_use: SecretUse<'_>) -> Result<Credential, Violation> {
        references::read_key(self.lookup(namespace, secret_use)).map_err(|verdict| {
            verdict.violation(secret_use, namespace).unwrap_or_else(|| Violation::new(secret_use.field, "unusable"))
        })
    }
}

/// Every cross-object rule of one provider: its dialect exists and fits its scope, and each
/// referenced Secret key holds a usable value (an absent Secret is fine with
/// [`MissingSecrets::Allowed`]).
pub fn provider_references(
    provider: &MemoryProvider,
    bundle: &Bundle,
    builtin: impl Fn(&str) -> Option<DialectView<'static>>,
    missing_secrets: MissingSecrets,
) -> Vec<Violation> {
    let mut found = Vec::new();
    match bundle.resolve_dialect(provider, builtin) {
        Ok(dialect) => found.extend(provider_against_dialect(&provider.spec, dialect.view)),
        Err(v) => found.push(v),
    }
    let namespace = provider.metadata.namespace.as_deref().unwrap_or("default");
    for secret_use in references::secret_uses(&provider.spec) {
        let lookup = bundle.lookup(namespace, secret_use);
        if lookup == SecretLookup::NoSecret && missing_secrets == MissingSecrets::Allowed {
            continue;
        }
        found.extend(references::judge_key(lookup).violation(secret_use, namespace));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Object, classify, documents};

    const DOCS: &str = r#"
apiVersion: memgate.io/v1alpha1
kind: DialectPreset
metadata: {name: team-dialect}
spec:
  dialectVersion: 1
  auth: authorization-bearer
  search: {method: GET, path: /search, queryLocation: query, userIdLocation: query, agentIdLocation: omit, appIdLocation: omit, limitField: limit}
  response: {collection: root-array, idField: id, contentField: text, titleField: title, uriField: uri, scoreField: score, updatedAtField: updatedAt}
---
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {name: team, namespace: agents}
spec:
  dialect: {presetRef: team-dialect}
  endpoint: {origin: "https://search.example.com"}
  credentials: {secretRef: {name: team-api, key: token}}
  scope: {userId: shared}
  access: {anonymous: true}
"#;

    fn load(text: &str) -> (Bundle, MemoryProvider) {
        let mut bundle = Bundle::default();
        let mut provider = None;
        for (_, doc) in documents(text).expect("yaml") {
            match classify(&doc).expect("valid") {
                Object::DialectPreset(p) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    bundle.add_preset(&name, p.spec);
                }
                Object::MemoryProvider(p) => provider = Some(*p),
                Object::Secret(s) => {
                    let ns = s.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                    let name = s.metadata.name.clone().unwrap_or_default();
                    bundle.secrets.insert((ns, name), crate::manifest::secret_data(&s));
                }
                Object::MemoryGateway(_) | Object::Other => {}
            }
        }
        (bundle, provider.expect("a provider"))
    }

    fn no_builtins(_: &str) -> Option<DialectView<'static>> {
        None
    }

    #[test]
    fn preset_reference_resolves_and_missing_secret_is_allowed_for_gitops() {
        let (bundle, provider) = load(DOCS);
        assert!(provider_references(&provider, &bundle, no_builtins, MissingSecrets::Allowed).is_empty());
        let v = provider_references(&provider, &bundle, no_builtins, MissingSecrets::Refused);
        assert_eq!(v[0].field, "spec.credentials.secretRef.name");
    }

    #[test]
    fn missing_preset_is_named() {
        let (bundle, provider) = load(&DOCS.replace("{presetRef: team-dialect}", "{presetRef: other}"));
        let v = provider_references(&provider, &bundle, no_builtins, MissingSecrets::Allowed);
        assert_eq!(v[0].field, "spec.dialect.presetRef");
        assert!(v[0].message.contains("\"other\" not found"));
    }

    #[test]
    fn invalid_preset_is_not_used() {
        let (bundle, provider) = load(&DOCS.replace("path: /search", "path: /a/../search"));
        let v = provider_references(&provider, &bundle, no_builtins, MissingSecrets::Allowed);
        assert!(v[0].message.contains("is invalid"));
    }

    #[test]
    fn secret_key_and_value_are_checked_without_echo() {
        let secret = "\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: team-api, namespace: agents}\nstringData: {token: \"${TEAM_TOKEN}\", other: x}\n";
        let (bundle, provider) = load(&format!("{DOCS}{secret}"));
        let v = provider_references(&provider, &bundle, no_builtins, MissingSecrets::Refused);
        assert_eq!(v[0].field, "spec.credentials.secretRef");
        assert!(!v[0].message.contains("TEAM_TOKEN"));
        let (bundle, provider) = load(&format!("{DOCS}{}", secret.replace("token:", "tokn:")));
        let v = provider_references(&provider, &bundle, no_builtins, MissingSecrets::Refused);
        assert_eq!(v[0].field, "spec.credentials.secretRef.key");
    }

    #[test]
    fn scope_is_checked_against_the_resolved_preset() {
        let (bundle, provider) = load(&DOCS.replace("scope: {userId: shared}", "scope: {appId: shared}"));
        let fields: Vec<_> = provider_references(&provider, &bundle, no_builtins, MissingSecrets::Allowed)
            .into_iter()
            .map(|v| v.field)
            .collect();
        assert_eq!(fields, ["spec.scope.userId", "spec.scope.appId"]);
    }
}
