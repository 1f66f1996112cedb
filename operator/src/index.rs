//! The in-memory view of the cluster the operator reconciles from, fed by watch events.
//!
//! ```text
//! [ MemoryProvider ns/p ] --spec.dialect.presetRef-----------> [ DialectPreset ]        (cluster-scoped)
//!          |              --credentials / bearerToken.secretRef -> [ Secret ns/s ]     (metadata only, labelled ones)
//!          |              --nexent.pluginClaim-----------------> [ PVC ns/c ]         (metadata only)
//!          v
//! [ MemoryGateway ns/g ] --shapes------------------------------> [ namespace ns's gateway ]  (at most one counts)
//! [ namespace ns ] <--owns-- [ ConfigMap | Deployment | Service | ServiceAccount  memgate-gateway ]
//!                  <--owns-- [ NetworkPolicy | PodDisruptionBudget  memgate-gateway ]   (optional)
//!                  <--owns-- [ ClusterRoleBinding memgate-gateway-<ns> ]                (cluster-scoped)
//! ```
//!
//! Everything is keyed by namespace because the unit of work is the namespace: one gateway serves
//! every provider of a namespace, and a provider only refers to Secrets and claims of its own
//! namespace. A provider without `spec.nexent.pluginClaim` refers to the operator's default claim
//! (`--gateway-default-plugin-claim`), which the index is built with. Each change returns the [`Key`]s it affects (the namespaces whose gateway may have to
//! change, and the DialectPresets whose status counts their users), so the watch wiring only has to
//! enqueue them.
//!
//! The index holds no Secret data (only names and resource versions from a metadata watch of the
//! Secrets labelled `memgate.io/credential: "true"`: no other Secret is ever seen) and performs
//! no I/O. An object that fails to parse is kept with its parse error, so that it can be
//! reported on its own status instead of hiding every other object of its kind.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::owned::OwnedKind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::jiff::Timestamp;
use kube::api::DynamicObject;
use memgate_crds::memory_gateway::{MemoryGatewaySpec, MemoryGatewayStatus};
use memgate_crds::memory_provider::DEFAULT_PLUGIN_CLAIM;
use memgate_crds::references::secret_uses;
use memgate_crds::{DialectPresetSpec, DialectPresetStatus, MemoryProviderSpec, MemoryProviderStatus};

/// A unit of reconciliation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// The gateway of a namespace and the status of its providers.
    Namespace(String),
    /// The status of a DialectPreset.
    Preset(String),
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Namespace(ns) => write!(f, "namespace/{ns}"),
            Key::Preset(name) => write!(f, "dialectpreset/{name}"),
        }
    }
}

/// A watched MemoryProvider: identity, and its spec if it could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderEntry {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// The spec, or why it could not be read.
    pub spec: Result<MemoryProviderSpec, String>,
    /// The current status (empty when absent or unreadable).
    pub status: MemoryProviderStatus,
}

/// A watched DialectPreset.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetEntry {
    /// `metadata.name`: the dialect id.
    pub name: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// The spec, or why it could not be read.
    pub spec: Result<DialectPresetSpec, String>,
    /// The current status.
    pub status: DialectPresetStatus,
}

impl ProviderEntry {
    /// Read a MemoryProvider watched as a dynamic object; `None` without name or namespace.
    pub fn from_dynamic(object: &DynamicObject) -> Option<ProviderEntry> {
        let meta = &object.metadata;
        Some(ProviderEntry {
            name: meta.name.clone()?,
            namespace: meta.namespace.clone()?,
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            spec: read_field(&object.data, "spec"),
            status: read_field(&object.data, "status").unwrap_or_default(),
        })
    }

    /// The spec when it could be read.
    pub fn spec(&self) -> Option<&MemoryProviderSpec> {
        self.spec.as_ref().ok()
    }

    /// Names of the Secrets it refers to (see `memgate_crds::references`).
    fn secret_names(&self) -> impl Iterator<Item = &str> {
        self.spec().map(secret_uses).into_iter().flatten().map(|used| used.secret_ref.name.as_str())
    }

    /// The claim a Nexent provider writes its plugin into (`default` when its spec names none).
    fn plugin_claim<'a>(&'a self, default: &'a str) -> Option<&'a str> {
        self.spec().filter(|s| s.nexent.any()).map(|s| s.nexent.plugin_claim_or(default))
    }

    fn preset_ref(&self) -> Option<&str> {
        self.spec().and_then(|s| s.dialect.preset_ref.as_deref())
    }
}

/// A watched MemoryGateway.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayEntry {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.resourceVersion`.
    pub resource_version: String,
    /// `metadata.creationTimestamp`: the oldest MemoryGateway of a namespace is the one that counts.
    pub created: Option<Timestamp>,
    /// The spec, or why it could not be read.
    pub spec: Result<MemoryGatewaySpec, String>,
    /// The current status.
    pub status: MemoryGatewayStatus,
}

impl GatewayEntry {
    /// Read a MemoryGateway watched as a dynamic object; `None` without name or namespace.
    pub fn from_dynamic(object: &DynamicObject) -> Option<GatewayEntry> {
        let meta = &object.metadata;
        Some(GatewayEntry {
            name: meta.name.clone()?,
            namespace: meta.namespace.clone()?,
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            spec: read_field(&object.data, "spec"),
            status: read_field(&object.data, "status").unwrap_or_default(),
        })
    }
}

impl PresetEntry {
    /// Read a DialectPreset watched as a dynamic object; `None` without a name.
    pub fn from_dynamic(object: &DynamicObject) -> Option<PresetEntry> {
        let meta = &object.metadata;
        Some(PresetEntry {
            name: meta.name.clone()?,
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            spec: read_field(&object.data, "spec"),
            status: read_field(&object.data, "status").unwrap_or_default(),
        })
    }
}

/// Deserialize one top-level field strictly; the error names the field path (no values beyond
/// what serde quotes of a spec, which never holds a credential).
fn read_field<T: serde::de::DeserializeOwned>(data: &serde_json::Value, field: &str) -> Result<T, String> {
    let value = data.get(field).cloned().unwrap_or(serde_json::Value::Null);
    serde_path_to_error::deserialize(value).map_err(|e| match e.path().to_string().as_str() {
        "." => format!("{field}: {}", e.inner()),
        path => format!("{field}.{path}: {}", e.inner()),
    })
}

/// `(namespace, name)`.
type NamespacedName = (String, String);

/// Everything one namespace's reconcile reads.
#[derive(Debug, Clone, Default)]
pub struct NamespaceView {
    /// The namespace.
    pub namespace: String,
    /// Its providers, by name.
    pub providers: Vec<ProviderEntry>,
    /// The DialectPresets its providers name (those that exist).
    pub presets: BTreeMap<String, PresetEntry>,
    /// Secrets present in the namespace with the credential label, by name.
    pub secrets: BTreeSet<String>,
    /// PersistentVolumeClaims present in the namespace, by name.
    pub claims: BTreeSet<String>,
    /// The owned gateway objects present, with their resource versions.
    pub owned: BTreeMap<OwnedKind, String>,
    /// The gateway Deployment as last seen (for its rollout status).
    pub deployment: Option<Arc<Deployment>>,
    /// Its MemoryGateways, oldest first (the first one counts; any other is refused).
    pub gateways: Vec<GatewayEntry>,
}

/// What a DialectPreset's status is computed from.
#[derive(Debug, Clone)]
pub struct PresetView {
    /// The preset, when it exists.
    pub preset: Option<PresetEntry>,
    /// Providers naming it (in the namespaces this operator sees).
    pub users: u32,
}

/// The index itself. See the module documentation.
#[derive(Debug)]
pub struct Index {
    providers: BTreeMap<NamespacedName, ProviderEntry>,
    presets: BTreeMap<String, PresetEntry>,
    secrets: BTreeMap<NamespacedName, String>,
    claims: BTreeMap<NamespacedName, String>,
    owned: BTreeMap<(OwnedKind, String), String>,
    deployments: BTreeMap<String, Arc<Deployment>>,
    gateways: BTreeMap<NamespacedName, GatewayEntry>,
    ledger_secret: Option<String>,
    default_claim: String,
}

impl Default for Index {
    /// An index without a ledger Secret, with the built-in default plugin claim.
    fn default() -> Index {
        Index::new(None, DEFAULT_PLUGIN_CLAIM.to_string())
    }
}

impl Index {
    /// An empty index; `ledger_secret` is the Secret name every gateway namespace may hold the
    /// shared ingest ledger URL in (its changes concern the namespaces that have providers);
    /// `default_claim` is the plugin claim of a Nexent provider that names none.
    pub fn new(ledger_secret: Option<String>, default_claim: String) -> Index {
        Index {
            providers: BTreeMap::new(),
            presets: BTreeMap::new(),
            secrets: BTreeMap::new(),
            claims: BTreeMap::new(),
            owned: BTreeMap::new(),
            deployments: BTreeMap::new(),
            gateways: BTreeMap::new(),
            ledger_secret,
            default_claim,
        }
    }

    // --- MemoryProviders -------------------------------------------------------------------

    /// A provider was added or changed.
    pub fn apply_provider(&mut self, entry: ProviderEntry) -> Vec<Key> {
        let id = (entry.namespace.clone(), entry.name.clone());
        let previous = self.providers.get(&id);
        if previous.is_some_and(|p| p.resource_version == entry.resource_version && !entry.resource_version.is_empty())
        {
            return Vec::new();
        }
        let mut keys = provider_keys(previous);
        keys.extend(provider_keys(Some(&entry)));
        self.providers.insert(id, entry);
        dedup(keys)
    }

    /// A provider was deleted.
    pub fn delete_provider(&mut self, namespace: &str, name: &str) -> Vec<Key> {
        let removed = self.providers.remove(&(namespace.to_string(), name.to_string()));
        let mut keys = provider_keys(removed.as_ref());
        keys.push(Key::Namespace(namespace.to_string()));
        dedup(keys)
    }

    /// A relist: exactly these providers exist in `scope` (one namespace, or `None`: everywhere).
    pub fn reset_providers(&mut self, scope: Option<&str>, entries: Vec<ProviderEntry>) -> Vec<Key> {
        let mut keys = Vec::new();
        let listed: BTreeSet<NamespacedName> = entries.iter().map(|e| (e.namespace.clone(), e.name.clone())).collect();
        let gone: Vec<NamespacedName> =
            self.providers.keys().filter(|id| in_scope(scope, &id.0) && !listed.contains(*id)).cloned().collect();
        for (namespace, name) in gone {
            keys.extend(self.delete_provider(&namespace, &name));
        }
        for entry in entries {
            keys.extend(self.apply_provider(entry));
        }
        dedup(keys)
    }

    // --- MemoryGateways ---------------------------------------------------------------------

    /// A MemoryGateway was added or changed: its namespace's gateway may change shape.
    pub fn apply_gateway(&mut self, entry: GatewayEntry) -> Vec<Key> {
        let id = (entry.namespace.clone(), entry.name.clone());
        if self.gateways.get(&id).is_some_and(|g| g.resource_version == entry.resource_version) {
            return Vec::new();
        }
        self.gateways.insert(id.clone(), entry);
        vec![Key::Namespace(id.0)]
    }

    /// A MemoryGateway was deleted.
    pub fn delete_gateway(&mut self, namespace: &str, name: &str) -> Vec<Key> {
        self.gateways.remove(&(namespace.to_string(), name.to_string()));
        vec![Key::Namespace(namespace.to_string())]
    }

    /// A relist of MemoryGateways in `scope`.
    pub fn reset_gateways(&mut self, scope: Option<&str>, entries: Vec<GatewayEntry>) -> Vec<Key> {
        let listed: BTreeSet<NamespacedName> = entries.iter().map(|e| (e.namespace.clone(), e.name.clone())).collect();
        let gone: Vec<NamespacedName> =
            self.gateways.keys().filter(|id| in_scope(scope, &id.0) && !listed.contains(*id)).cloned().collect();
        let mut keys = Vec::new();
        for (namespace, name) in gone {
            keys.extend(self.delete_gateway(&namespace, &name));
        }
        for entry in entries {
            keys.extend(self.apply_gateway(entry));
        }
        dedup(keys)
    }

    // --- DialectPresets ----------------------------------------------------------------------

    /// A preset was added or changed.
    pub fn apply_preset(&mut self, entry: PresetEntry) -> Vec<Key> {
        if self.presets.get(&entry.name).is_some_and(|p| p.resource_version == entry.resource_version) {
            return Vec::new();
        }
        let name = entry.name.clone();
        self.presets.insert(name.clone(), entry);
        self.preset_keys(&name)
    }

    /// A preset was deleted.
    pub fn delete_preset(&mut self, name: &str) -> Vec<Key> {
        self.presets.remove(name);
        self.preset_keys(name)
    }

    /// A relist of presets.
    pub fn reset_presets(&mut self, entries: Vec<PresetEntry>) -> Vec<Key> {
        let listed: BTreeSet<String> = entries.iter().map(|e| e.name.clone()).collect();
        let gone: Vec<String> = self.presets.keys().filter(|n| !listed.contains(*n)).cloned().collect();
        let mut keys = Vec::new();
        for name in gone {
            keys.extend(self.delete_preset(&name));
        }
        for entry in entries {
            keys.extend(self.apply_preset(entry));
        }
        dedup(keys)
    }

    fn preset_keys(&self, name: &str) -> Vec<Key> {
        let mut keys = vec![Key::Preset(name.to_string())];
        for provider in self.providers.values().filter(|p| p.preset_ref() == Some(name)) {
            keys.push(Key::Namespace(provider.namespace.clone()));
        }
        dedup(keys)
    }

    // --- Secret and PersistentVolumeClaim metadata ---------------------------------------------

    /// A Secret's metadata changed (or it appeared); `None` when it was deleted.
    pub fn secret(&mut self, namespace: &str, name: &str, resource_version: Option<String>) -> Vec<Key> {
        let id = (namespace.to_string(), name.to_string());
        if !changed(&mut self.secrets, id, resource_version) {
            return Vec::new();
        }
        self.secret_keys(namespace, name)
    }

    /// A relist of Secret metadata in `scope`: `(namespace, name, resourceVersion)`.
    pub fn reset_secrets(&mut self, scope: Option<&str>, listed: Vec<(String, String, String)>) -> Vec<Key> {
        let changes = reset_versions(&mut self.secrets, scope, listed);
        dedup(changes.iter().flat_map(|(ns, name)| self.secret_keys(ns, name)).collect())
    }

    fn secret_keys(&self, namespace: &str, name: &str) -> Vec<Key> {
        let mut in_namespace = self.providers_in(namespace).peekable();
        let has_providers = in_namespace.peek().is_some();
        let referenced = in_namespace.any(|p| p.secret_names().any(|s| s == name));
        let ledger = has_providers && self.ledger_secret.as_deref() == Some(name);
        if referenced || ledger { vec![Key::Namespace(namespace.to_string())] } else { Vec::new() }
    }

    /// A PersistentVolumeClaim's metadata changed (or it appeared); `None` when it was deleted.
    pub fn claim(&mut self, namespace: &str, name: &str, resource_version: Option<String>) -> Vec<Key> {
        let id = (namespace.to_string(), name.to_string());
        if !changed(&mut self.claims, id, resource_version) {
            return Vec::new();
        }
        self.claim_keys(namespace, name)
    }

    /// A relist of claim metadata in `scope`.
    pub fn reset_claims(&mut self, scope: Option<&str>, listed: Vec<(String, String, String)>) -> Vec<Key> {
        let changes = reset_versions(&mut self.claims, scope, listed);
        dedup(changes.iter().flat_map(|(ns, name)| self.claim_keys(ns, name)).collect())
    }

    fn claim_keys(&self, namespace: &str, name: &str) -> Vec<Key> {
        if self.providers_in(namespace).any(|p| p.plugin_claim(&self.default_claim) == Some(name)) {
            vec![Key::Namespace(namespace.to_string())]
        } else {
            Vec::new()
        }
    }

    // --- owned gateway objects ---------------------------------------------------------------

    /// An owned object of `namespace`'s gateway changed (or appeared); `None` when deleted.
    pub fn owned(&mut self, kind: OwnedKind, namespace: &str, resource_version: Option<String>) -> Vec<Key> {
        if changed(&mut self.owned, (kind, namespace.to_string()), resource_version) {
            vec![Key::Namespace(namespace.to_string())]
        } else {
            Vec::new()
        }
    }

    /// A relist of one owned kind in `scope`: `(namespace, resourceVersion)`.
    pub fn reset_owned(&mut self, kind: OwnedKind, scope: Option<&str>, listed: Vec<(String, String)>) -> Vec<Key> {
        let listed: BTreeMap<(OwnedKind, String), String> =
            listed.into_iter().map(|(ns, rv)| ((kind, ns), rv)).collect();
        let mut keys = Vec::new();
        let gone: Vec<String> = self
            .owned
            .keys()
            .filter(|(k, ns)| *k == kind && in_scope(scope, ns) && !listed.contains_key(&(kind, ns.clone())))
            .map(|(_, ns)| ns.clone())
            .collect();
        for namespace in gone {
            keys.extend(self.owned(kind, &namespace, None));
        }
        for ((_, namespace), version) in listed {
            keys.extend(self.owned(kind, &namespace, Some(version)));
        }
        dedup(keys)
    }

    /// The gateway Deployment of a namespace was seen (for its rollout status); `None` when deleted.
    pub fn deployment(&mut self, namespace: &str, deployment: Option<Deployment>) -> Vec<Key> {
        let version = deployment.as_ref().and_then(|d| d.metadata.resource_version.clone());
        match deployment {
            Some(d) => self.deployments.insert(namespace.to_string(), Arc::new(d)),
            None => self.deployments.remove(namespace),
        };
        self.owned(OwnedKind::Deployment, namespace, version)
    }

    /// A relist of gateway Deployments in `scope`.
    pub fn reset_deployments(&mut self, scope: Option<&str>, listed: Vec<(String, Deployment)>) -> Vec<Key> {
        let versions = listed
            .iter()
            .map(|(ns, d)| (ns.clone(), d.metadata.resource_version.clone().unwrap_or_default()))
            .collect();
        self.deployments.retain(|ns, _| !in_scope(scope, ns));
        self.deployments.extend(listed.into_iter().map(|(ns, d)| (ns, Arc::new(d))));
        self.reset_owned(OwnedKind::Deployment, scope, versions)
    }

    // --- lookups ---------------------------------------------------------------------------

    fn providers_in<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = &'a ProviderEntry> + 'a {
        self.providers
            .range((namespace.to_string(), String::new())..)
            .take_while(move |((ns, _), _)| ns == namespace)
            .map(|(_, p)| p)
    }

    /// Everything the reconcile of `namespace` reads.
    pub fn namespace(&self, namespace: &str) -> NamespaceView {
        let providers: Vec<ProviderEntry> = self.providers_in(namespace).cloned().collect();
        let presets = providers
            .iter()
            .filter_map(ProviderEntry::preset_ref)
            .filter_map(|name| self.presets.get(name).map(|p| (name.to_string(), p.clone())))
            .collect();
        let in_namespace = |map: &BTreeMap<NamespacedName, String>| -> BTreeSet<String> {
            map.keys().filter(|(ns, _)| ns == namespace).map(|(_, name)| name.clone()).collect()
        };
        let (secrets, claims) = (in_namespace(&self.secrets), in_namespace(&self.claims));
        let owned = self
            .owned
            .iter()
            .filter(|((_, ns), _)| ns == namespace)
            .map(|((kind, _), version)| (*kind, version.clone()))
            .collect();
        NamespaceView {
            namespace: namespace.to_string(),
            providers,
            presets,
            secrets,
            claims,
            owned,
            deployment: self.deployments.get(namespace).cloned(),
            gateways: {
                let mut gateways: Vec<GatewayEntry> =
                    self.gateways.values().filter(|g| g.namespace == namespace).cloned().collect();
                // Oldest first; a tie (same second) goes to the smaller name.
                gateways.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
                gateways
            },
        }
    }

    /// What the status of preset `name` is computed from.
    pub fn preset(&self, name: &str) -> PresetView {
        let users = self.providers.values().filter(|p| p.preset_ref() == Some(name)).count();
        PresetView { preset: self.presets.get(name).cloned(), users: u32::try_from(users).unwrap_or(u32::MAX) }
    }

    /// Every key there is work for: namespaces with providers, gateway objects or MemoryGateways, and presets.
    pub fn all_keys(&self) -> Vec<Key> {
        let namespaces = self
            .providers
            .keys()
            .map(|(ns, _)| ns.clone())
            .chain(self.owned.keys().map(|(_, ns)| ns.clone()))
            .chain(self.gateways.keys().map(|(ns, _)| ns.clone()));
        let mut keys: Vec<Key> = namespaces.map(Key::Namespace).collect();
        keys.extend(self.presets.keys().cloned().map(Key::Preset));
        dedup(keys)
    }
}

/// Keys a provider concerns: its namespace, and the preset it names.
fn provider_keys(entry: Option<&ProviderEntry>) -> Vec<Key> {
    let Some(entry) = entry else { return Vec::new() };
    let mut keys = vec![Key::Namespace(entry.namespace.clone())];
    keys.extend(entry.preset_ref().map(|name| Key::Preset(name.to_string())));
    keys
}

/// Record a resource version (or a deletion); true when anything changed.
fn changed<K: Ord>(map: &mut BTreeMap<K, String>, id: K, version: Option<String>) -> bool {
    match version {
        Some(version) => map.insert(id, version.clone()).is_none_or(|old| old != version),
        None => map.remove(&id).is_some(),
    }
}

/// True when `namespace` is covered by a watch of `scope`.
fn in_scope(scope: Option<&str>, namespace: &str) -> bool {
    scope.is_none_or(|s| s == namespace)
}

/// Replace every version in `scope` after a relist; returns the ids that changed, appeared or
/// vanished.
fn reset_versions(
    map: &mut BTreeMap<NamespacedName, String>,
    scope: Option<&str>,
    listed: Vec<(String, String, String)>,
) -> Vec<NamespacedName> {
    let listed: BTreeMap<NamespacedName, String> = listed.into_iter().map(|(ns, name, rv)| ((ns, name), rv)).collect();
    let mut changes: Vec<NamespacedName> =
        map.keys().filter(|id| in_scope(scope, &id.0) && !listed.contains_key(*id)).cloned().collect();
    changes.extend(listed.iter().filter(|(id, rv)| map.get(*id) != Some(*rv)).map(|(id, _)| id.clone()));
    map.retain(|id, _| !in_scope(scope, &id.0));
    map.extend(listed);
    changes
}

fn dedup(mut keys: Vec<Key>) -> Vec<Key> {
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn provider(namespace: &str, name: &str, rv: &str, spec: serde_json::Value) -> ProviderEntry {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "memgate.io/v1alpha1", "kind": "MemoryProvider",
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "generation": 1, "resourceVersion": rv},
            "spec": spec,
        }))
        .expect("object");
        ProviderEntry::from_dynamic(&object).expect("named")
    }

    fn spec(secret: &str) -> serde_json::Value {
        json!({
            "dialect": {"builtin": "mem0-oss-rest-2026-08"},
            "endpoint": {"origin": "https://mem0.example.com"},
            "credentials": {"secretRef": {"name": secret, "key": "api-key"}},
            "scope": {"userId": "u", "agentId": "a"},
            "nexent": {"search": true},
            "access": {"anonymous": true},
        })
    }

    fn preset_spec_ref(secret: &str, preset: &str) -> serde_json::Value {
        let mut value = spec(secret);
        value["dialect"] = json!({"presetRef": preset});
        value
    }

    fn ns(name: &str) -> Key {
        Key::Namespace(name.into())
    }

    #[test]
    fn provider_change_concerns_its_namespace_and_the_presets_it_named_before_and_after() {
        let mut index = Index::default();
        let keys = index.apply_provider(provider("agents", "p", "1", preset_spec_ref("s", "old")));
        assert_eq!(keys, [ns("agents"), Key::Preset("old".into())]);
        let keys = index.apply_provider(provider("agents", "p", "2", preset_spec_ref("s", "new")));
        assert_eq!(keys, [ns("agents"), Key::Preset("new".into()), Key::Preset("old".into())]);
        assert_eq!(index.delete_provider("agents", "p"), [ns("agents"), Key::Preset("new".into())]);
    }

    #[test]
    fn the_same_resource_version_again_is_no_change() {
        let mut index = Index::default();
        index.apply_provider(provider("agents", "p", "7", spec("s")));
        assert!(index.apply_provider(provider("agents", "p", "7", spec("s"))).is_empty());
    }

    #[test]
    fn unreadable_provider_is_kept_with_its_error_and_hides_nothing_else() {
        let mut index = Index::default();
        let mut broken = spec("s");
        broken["futureField"] = json!(true);
        index.apply_provider(provider("agents", "broken", "1", broken));
        index.apply_provider(provider("agents", "good", "1", spec("s")));
        let view = index.namespace("agents");
        assert_eq!(view.providers.len(), 2);
        let broken = &view.providers[0];
        assert!(broken.spec.as_ref().is_err_and(|e| e.contains("futureField")), "{:?}", broken.spec);
        assert!(view.providers[1].spec.is_ok());
    }

    #[test]
    fn secret_change_concerns_only_namespaces_whose_providers_reference_it() {
        let mut index = Index::new(Some("ledger".into()), DEFAULT_PLUGIN_CLAIM.into());
        index.apply_provider(provider("agents", "p", "1", spec("mem0-api")));
        assert_eq!(index.secret("agents", "mem0-api", Some("5".into())), [ns("agents")]);
        assert!(index.secret("agents", "mem0-api", Some("5".into())).is_empty(), "same version");
        assert!(index.secret("agents", "unrelated", Some("1".into())).is_empty());
        assert!(index.secret("elsewhere", "mem0-api", Some("1".into())).is_empty());
        assert_eq!(index.secret("agents", "ledger", Some("1".into())), [ns("agents")], "the ledger Secret");
        assert!(index.secret("elsewhere", "ledger", Some("1".into())).is_empty(), "no providers there");
        assert_eq!(index.secret("agents", "mem0-api", None), [ns("agents")], "deleted");
    }

    #[test]
    fn bearer_token_secret_is_a_reference_too() {
        let mut index = Index::default();
        let mut value = spec("mem0-api");
        value["access"] = json!({"bearerToken": {"secretRef": {"name": "callers", "key": "nexent"}}});
        index.apply_provider(provider("agents", "p", "1", value));
        assert_eq!(index.secret("agents", "callers", Some("1".into())), [ns("agents")]);
    }

    #[test]
    fn claim_matters_only_to_providers_serving_nexent() {
        let mut index = Index::default();
        index.apply_provider(provider("agents", "p", "1", spec("s")));
        assert_eq!(index.claim("agents", "nexent-memory-plugins", Some("1".into())), [ns("agents")]);
        let mut no_nexent = spec("s");
        no_nexent["nexent"] = json!({"search": false, "pluginClaim": "other"});
        index.apply_provider(provider("agents", "p", "2", no_nexent));
        assert!(index.claim("agents", "other", Some("1".into())).is_empty());
        assert!(index.namespace("agents").claims.contains("nexent-memory-plugins"));
    }

    #[test]
    fn an_unnamed_claim_is_the_configured_default_and_a_named_one_wins() {
        let mut index = Index::new(None, "team-plugins".into());
        index.apply_provider(provider("agents", "p", "1", spec("s")));
        assert_eq!(index.claim("agents", "team-plugins", Some("1".into())), [ns("agents")]);
        assert!(index.claim("agents", "nexent-memory-plugins", Some("1".into())).is_empty(), "not the built-in one");
        let mut named = spec("s");
        named["nexent"] = json!({"search": true, "pluginClaim": "own-plugins"});
        index.apply_provider(provider("agents", "p", "2", named));
        assert_eq!(index.claim("agents", "own-plugins", Some("1".into())), [ns("agents")]);
        assert!(index.claim("agents", "team-plugins", Some("2".into())).is_empty());
    }

    #[test]
    fn preset_change_concerns_every_namespace_using_it() {
        let mut index = Index::default();
        index.apply_provider(provider("a", "p", "1", preset_spec_ref("s", "team")));
        index.apply_provider(provider("b", "q", "1", preset_spec_ref("s", "team")));
        index.apply_provider(provider("c", "r", "1", spec("s")));
        let preset: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "memgate.io/v1alpha1", "kind": "DialectPreset",
            "metadata": {"name": "team", "uid": "u1", "resourceVersion": "3"}, "spec": {}}))
        .expect("object");
        let entry = PresetEntry::from_dynamic(&preset).expect("named");
        assert!(entry.spec.is_err(), "an empty spec cannot be read");
        assert_eq!(index.apply_preset(entry), [ns("a"), ns("b"), Key::Preset("team".into())]);
        assert_eq!(index.preset("team").users, 2);
        assert_eq!(index.namespace("a").presets.len(), 1);
        assert!(index.namespace("c").presets.is_empty());
    }

    #[test]
    fn relist_reports_what_vanished_while_the_watch_was_down() {
        let mut index = Index::default();
        index.apply_provider(provider("a", "p", "1", spec("s")));
        index.apply_provider(provider("b", "q", "1", spec("s")));
        let keys = index.reset_providers(None, vec![provider("a", "p", "1", spec("s"))]);
        assert_eq!(keys, [ns("b")]);
        assert!(index.namespace("b").providers.is_empty());
        index.secret("a", "s", Some("1".into()));
        assert_eq!(index.reset_secrets(None, vec![]), [ns("a")], "the Secret vanished");
    }

    #[test]
    fn relist_of_one_watched_namespace_leaves_the_others_alone() {
        let mut index = Index::default();
        index.apply_provider(provider("a", "p", "1", spec("s")));
        index.apply_provider(provider("b", "q", "1", spec("s")));
        assert!(index.reset_providers(Some("a"), vec![provider("a", "p", "1", spec("s"))]).is_empty());
        assert_eq!(index.namespace("b").providers.len(), 1);
        index.secret("b", "s", Some("1".into()));
        assert!(index.reset_secrets(Some("a"), vec![]).is_empty());
        assert_eq!(index.reset_owned(OwnedKind::Service, Some("a"), vec![]), Vec::<Key>::new());
    }

    #[test]
    fn owned_objects_map_to_their_namespace_and_stay_listed_for_cleanup() {
        let mut index = Index::default();
        assert_eq!(index.owned(OwnedKind::ConfigMap, "gone", Some("4".into())), [ns("gone")]);
        assert!(index.owned(OwnedKind::ConfigMap, "gone", Some("4".into())).is_empty());
        assert_eq!(index.all_keys(), [ns("gone")], "a namespace without providers but with objects");
        assert_eq!(index.namespace("gone").owned.get(&OwnedKind::ConfigMap).map(String::as_str), Some("4"));
        assert_eq!(index.reset_owned(OwnedKind::ConfigMap, None, vec![]), [ns("gone")]);
        assert!(index.all_keys().is_empty());
    }

    #[test]
    fn deployment_is_kept_whole_for_its_rollout_status() {
        let mut index = Index::default();
        let mut deployment = Deployment::default();
        deployment.metadata.resource_version = Some("9".into());
        assert_eq!(index.deployment("agents", Some(deployment)), [ns("agents")]);
        let view = index.namespace("agents");
        assert!(view.deployment.is_some());
        assert_eq!(view.owned.get(&OwnedKind::Deployment).map(String::as_str), Some("9"));
        index.deployment("agents", None);
        assert!(index.namespace("agents").deployment.is_none());
    }
}
