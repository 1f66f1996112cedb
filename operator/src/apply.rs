//! Apply: write the desired gateway objects with server-side apply, and delete the ones no longer
//! desired.
//!
//! One field manager (`memgate-operator`) for every write, with `force` so that a field edited by
//! hand is taken back. A write is skipped when the desired object is the one this process last
//! applied and the object's `resourceVersion` is still the one that apply returned: nothing
//! changed on either side, so a steady state sends no write at all. Any other change (a new
//! desired object, a hand edit, a deletion, a restart of the operator) applies again, and an apply
//! that changes nothing is a no-op on the server.
//!
//! Deletions are explicit (a bare API server, like many clusters, runs no garbage collector),
//! cluster-scoped bindings included. Never decides what is desired.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Mutex;

use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::index::OwnedKind;
use crate::metrics::Metrics;
use crate::render::FIELD_MANAGER;

/// A write that failed.
#[derive(Debug, thiserror::Error)]
#[error("{operation} {kind} of namespace {namespace}: {source}")]
pub struct ApplyError {
    /// `applying` or `deleting`.
    pub operation: &'static str,
    /// The object's kind.
    pub kind: OwnedKind,
    /// The gateway's namespace.
    pub namespace: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// What happened to one object.
#[derive(Debug)]
pub enum Applied<K> {
    /// Written; the object as the server returned it.
    Written(K),
    /// Already as desired: nothing sent.
    Unchanged,
}

/// Applies objects and remembers what it applied.
#[derive(Debug, Default)]
pub struct Applier {
    /// Per object: hash of the desired object last applied, and the resourceVersion it got.
    last: Mutex<HashMap<(OwnedKind, String), (String, String)>>,
}

fn desired_hash<K: Serialize>(object: &K) -> String {
    let json = serde_json::to_vec(object).unwrap_or_default();
    Sha256::digest(&json).iter().map(|b| format!("{b:02x}")).collect()
}

impl Applier {
    fn last(&self) -> std::sync::MutexGuard<'_, HashMap<(OwnedKind, String), (String, String)>> {
        self.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// True when `object` was the last one applied and the live object (at `live_version`) has not
    /// changed since.
    pub fn is_current<K: Serialize>(
        &self,
        kind: OwnedKind,
        namespace: &str,
        object: &K,
        live_version: Option<&str>,
    ) -> bool {
        let Some(live_version) = live_version else { return false };
        self.last()
            .get(&(kind, namespace.to_string()))
            .is_some_and(|(hash, version)| version == live_version && *hash == desired_hash(object))
    }

    /// Apply `object` through `api` unless it is current.
    pub async fn apply<K>(
        &self,
        api: &Api<K>,
        kind: OwnedKind,
        namespace: &str,
        object: &K,
        live_version: Option<&str>,
        metrics: &Metrics,
    ) -> Result<Applied<K>, ApplyError>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug,
    {
        if self.is_current(kind, namespace, object, live_version) {
            return Ok(Applied::Unchanged);
        }
        let name = object.meta().name.clone().unwrap_or_default();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let written = api.patch(&name, &params, &Patch::Apply(object)).await.map_err(|source| ApplyError {
            operation: "applying",
            kind,
            namespace: namespace.to_string(),
            source,
        })?;
        metrics.wrote(kind.as_str(), "apply");
        let version = written.meta().resource_version.clone().unwrap_or_default();
        self.last().insert((kind, namespace.to_string()), (desired_hash(object), version));
        Ok(Applied::Written(written))
    }

    /// Delete the object `name` through `api`; an object already gone is fine.
    pub async fn delete<K>(
        &self,
        api: &Api<K>,
        kind: OwnedKind,
        namespace: &str,
        name: &str,
        metrics: &Metrics,
    ) -> Result<(), ApplyError>
    where
        K: Resource + DeserializeOwned + Clone + Debug,
    {
        self.last().remove(&(kind, namespace.to_string()));
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {
                metrics.wrote(kind.as_str(), "delete");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(source) => Err(ApplyError { operation: "deleting", kind, namespace: namespace.to_string(), source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn config_map(value: &str) -> ConfigMap {
        ConfigMap { data: Some([("gateway.yaml".to_string(), value.to_string())].into()), ..ConfigMap::default() }
    }

    #[test]
    fn only_the_last_applied_object_at_its_returned_version_is_current() {
        let applier = Applier::default();
        let desired = config_map("a");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &desired, Some("1")), "never applied");
        applier.last().insert((OwnedKind::ConfigMap, "agents".into()), (desired_hash(&desired), "1".into()));
        assert!(applier.is_current(OwnedKind::ConfigMap, "agents", &desired, Some("1")));
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &desired, Some("2")), "edited since");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &desired, None), "deleted since");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &config_map("b"), Some("1")), "new desire");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "other", &desired, Some("1")), "per namespace");
    }
}
