//! The rendered config: the YAML files of the gateway's ConfigMap and what they mount.
//!
//! `gateway.yaml` holds the served providers, the DialectPresets they use and one `SecretMount`
//! per Secret they reference: the format `memgate-gateway serve --config` reads (gateway/src/config:
//! the same objects a person would `kubectl apply`, plus `SecretMount` documents naming a Secret
//! volume). One `nexent-<i>.yaml` per distinct plugin claim holds only the providers writing
//! plugins into that claim, for its `write-nexent-plugins` init container.
//!
//! A `SecretMount` path is relative to the folder its YAML is mounted in (`../secrets/<name>`),
//! so the same ConfigMap works for the serving container and for every init container.

use std::collections::{BTreeMap, BTreeSet};

use memgate_crds::API_VERSION;
use memgate_crds::manifest::{SECRET_MOUNT_API_VERSION, SECRET_MOUNT_KIND};
use memgate_crds::references::{WantedKeys, wanted_keys};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::layout::{CONFIG_KEY, SECRETS_FOLDER, claim_config_key};
use super::{GatewayInput, RenderError, ServedProvider};
use crate::settings::LedgerSecret;

/// The rendered files and what the pod must mount for them.
#[derive(Debug, Clone, PartialEq)]
pub struct Files {
    /// ConfigMap data: file name to YAML text.
    pub data: BTreeMap<String, String>,
    /// Secrets to mount (name to the keys referenced), for the serving container.
    pub secrets: BTreeMap<String, BTreeSet<String>>,
    /// Plugin claims, in order: claim name, its ConfigMap key, the Secrets its providers need.
    pub claims: Vec<ClaimFiles>,
}

/// The files of one Nexent plugin claim.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimFiles {
    /// PersistentVolumeClaim name.
    pub claim: String,
    /// ConfigMap key of its config.
    pub key: String,
    /// Secrets its providers reference.
    pub secrets: BTreeMap<String, BTreeSet<String>>,
}

impl Files {
    /// Hash of what the pod mounts: the config text, the set of Secret names and keys, the claims
    /// and the ledger Secret reference. Never a Secret value (a rotated value is picked up by the
    /// gateway's file reload without a restart).
    pub fn hash(&self, ledger: Option<&LedgerSecret>) -> String {
        let mut hasher = Sha256::new();
        for (key, text) in &self.data {
            hasher.update(format!("file {key} {}\n", text.len()));
            hasher.update(text.as_bytes());
        }
        for (name, keys) in &self.secrets {
            hasher.update(format!("secret {name} {keys:?}\n"));
        }
        for claim in &self.claims {
            hasher.update(format!("claim {} {}\n", claim.claim, claim.key));
        }
        if let Some(ledger) = ledger {
            hasher.update(format!("ledger {} {}\n", ledger.name, ledger.key));
        }
        hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// Render every file of a namespace's ConfigMap; `default_claim` is the plugin claim of a Nexent
/// provider that names none.
pub fn render_files(input: &GatewayInput<'_>, default_claim: &str) -> Result<Files, RenderError> {
    let mut data = BTreeMap::new();
    data.insert(CONFIG_KEY.to_string(), config_text(input.namespace, &input.served)?);
    let mut by_claim: BTreeMap<&str, Vec<ServedProvider<'_>>> = BTreeMap::new();
    for provider in input.served.iter().filter(|p| p.spec.nexent.any()) {
        by_claim.entry(provider.spec.nexent.plugin_claim_or(default_claim)).or_default().push(*provider);
    }
    let mut claims = Vec::new();
    for (i, (claim, providers)) in by_claim.into_iter().enumerate() {
        let key = claim_config_key(i);
        data.insert(key.clone(), config_text(input.namespace, &providers)?);
        claims.push(ClaimFiles { claim: claim.to_string(), key, secrets: mounted_secrets(&providers) });
    }
    Ok(Files { data, secrets: mounted_secrets(&input.served), claims })
}

/// Secret names and keys a set of providers reference.
fn mounted_secrets(providers: &[ServedProvider<'_>]) -> WantedKeys {
    wanted_keys(providers.iter().map(|p| p.spec))
}

/// One config file: presets, then providers, then Secret mounts, each in name order.
fn config_text(namespace: &str, providers: &[ServedProvider<'_>]) -> Result<String, RenderError> {
    let mut documents: Vec<Value> = Vec::new();
    let presets: BTreeMap<&str, _> = providers.iter().filter_map(|p| p.preset).collect();
    for (name, spec) in presets {
        documents.push(json!({
            "apiVersion": API_VERSION,
            "kind": "DialectPreset",
            "metadata": {"name": name},
            "spec": serde_json::to_value(spec)?,
        }));
    }
    for provider in providers {
        documents.push(json!({
            "apiVersion": API_VERSION,
            "kind": "MemoryProvider",
            "metadata": {"name": provider.name, "namespace": namespace},
            "spec": serde_json::to_value(provider.spec)?,
        }));
    }
    for name in mounted_secrets(providers).keys() {
        documents.push(json!({
            "apiVersion": SECRET_MOUNT_API_VERSION,
            "kind": SECRET_MOUNT_KIND,
            "metadata": {"name": name, "namespace": namespace},
            "path": format!("../{SECRETS_FOLDER}/{name}"),
        }));
    }
    let mut text = String::from("# Rendered by memgate-operator; edits are overwritten.\n");
    if documents.is_empty() {
        text.push_str("# No provider of this namespace is served (see each MemoryProvider's conditions).\n");
    } else {
        text.push_str(&serde_saphyr::to_string_multiple(&documents)?);
    }
    Ok(text)
}
