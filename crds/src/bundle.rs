//! Cross-object resolution within a set of objects: what a MemoryProvider refers to.
//!
//! ```text
//! [ MemoryProvider ] --dialect.presetRef--> [ DialectPreset ]      (cluster-scoped, by name)
//!          |         --dialect.builtin-----> [ built-in dialect ] (compiled in, see `presets/`)
//!          +--credentials / access.bearerToken--> [ Secret key ]  (same namespace)
//! ```
//!
//! Used by the `validate` command on a folder of YAML and by the gateway's standalone mode; the
//! operator builds the same [`Bundle`] from its watch caches.

use std::collections::BTreeMap;

use crate::validation::{DialectView, Violation, credential_value, dialect_preset, provider_against_dialect};
use crate::{DialectPresetSpec, MemoryProvider, SecretKeyRef};

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
    /// DialectPresets by name, with whether each passed its own validation.
    pub presets: BTreeMap<String, (DialectPresetSpec, bool)>,
    /// Secrets.
    pub secrets: SecretStore,
}

impl Bundle {
    /// Add a DialectPreset; returns its own violations (it is kept either way, marked invalid).
    pub fn add_preset(&mut self, name: &str, spec: DialectPresetSpec) -> Vec<Violation> {
        let found = dialect_preset(name, &spec);
        self.presets.insert(name.to_string(), (spec, found.is_empty()));
        found
    }
}

/// Resolve a provider's dialect: a built-in through `builtin`, a preset through the bundle.
pub fn resolve_dialect<'a>(
    provider: &MemoryProvider,
    bundle: &'a Bundle,
    builtin: impl Fn(&str) -> Option<DialectView<'static>>,
) -> Result<DialectView<'a>, Violation> {
    let source = &provider.spec.dialect;
    if let Some(id) = &source.builtin {
        return builtin(id)
            .ok_or_else(|| Violation::new("spec.dialect.builtin", format!("unknown built-in dialect \"{id}\"")));
    }
    let name = source.preset_ref.as_deref().unwrap_or_default();
    match bundle.presets.get(name) {
        Some((spec, true)) => Ok(DialectView { spec, can_write: false }),
        Some((_, false)) => Err(Violation::new(
            "spec.dialect.presetRef",
            format!("DialectPreset \"{name}\" is invalid; fix its own errors first"),
        )),
        None => Err(Violation::new("spec.dialect.presetRef", format!("DialectPreset \"{name}\" not found"))),
    }
}

/// Every cross-object rule of one provider: its dialect exists and fits its scope, and each
/// referenced Secret key holds a usable value.
pub fn provider_references(
    provider: &MemoryProvider,
    bundle: &Bundle,
    builtin: impl Fn(&str) -> Option<DialectView<'static>>,
    missing_secrets: MissingSecrets,
) -> Vec<Violation> {
    let mut found = Vec::new();
    match resolve_dialect(provider, bundle, builtin) {
        Ok(view) => found.extend(provider_against_dialect(&provider.spec, view)),
        Err(v) => found.push(v),
    }
    let namespace = provider.metadata.namespace.as_deref().unwrap_or("default");
    let mut refs = vec![("spec.credentials.secretRef", &provider.spec.credentials.secret_ref)];
    if let Some(bearer) = &provider.spec.access.bearer_token {
        refs.push(("spec.access.bearerToken.secretRef", &bearer.secret_ref));
    }
    for (field, secret_ref) in refs {
        found.extend(secret_reference(field, namespace, secret_ref, &bundle.secrets, missing_secrets));
    }
    found
}

/// Check one Secret key reference; the message names the Secret and key, never the value.
pub fn secret_reference(
    field: &str,
    namespace: &str,
    secret_ref: &SecretKeyRef,
    secrets: &SecretStore,
    missing: MissingSecrets,
) -> Option<Violation> {
    let secret_name = &secret_ref.name;
    let Some(data) = secrets.get(&(namespace.to_string(), secret_name.clone())) else {
        return (missing == MissingSecrets::Refused).then(|| {
            Violation::new(format!("{field}.name"), format!("Secret \"{namespace}/{secret_name}\" not found"))
        });
    };
    let Some(value) = data.get(&secret_ref.key) else {
        return Some(Violation::new(
            format!("{field}.key"),
            format!("Secret \"{namespace}/{secret_name}\" has no key \"{}\"", secret_ref.key),
        ));
    };
    credential_value(field, value).err().map(|v| {
        Violation::new(
            v.field,
            format!("Secret \"{namespace}/{secret_name}\" key \"{}\": {}", secret_ref.key, v.message),
        )
    })
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
                Object::Other => {}
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
