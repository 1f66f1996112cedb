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
//! cluster-scoped bindings included. [`ApplyTarget`] is the seam the reconciler writes through:
//! [`Writer`] is the real one, unit tests record. Never decides what is desired.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Mutex;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::metrics::Metrics;
use crate::owned::{Desired, Live, OwnedKind};
use crate::render::{FIELD_MANAGER, GATEWAY_NAME, binding_name};

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

impl ApplyError {
    /// What failed, for a provider's status: the operation, the object and the API server's answer
    /// (its code and message; a gateway object holds no credential, so neither does the answer).
    pub fn summary(&self) -> String {
        let answer = match &self.source {
            kube::Error::Api(status) => format!("HTTP {} {}: {}", status.code, status.reason, status.message),
            _ => "the API server could not be reached".to_string(),
        };
        format!("{} the gateway {} failed ({answer}); retrying with backoff", self.operation, self.kind)
    }
}

/// What happened to one object.
#[derive(Debug)]
pub enum Applied<K> {
    /// Written; the object as the server returned it.
    Written(K),
    /// Already as desired: nothing sent.
    Unchanged,
}

/// Where a reconcile's writes of gateway objects go.
pub trait ApplyTarget {
    /// Apply `object` into the namespace's gateway (unless it is current); a written Deployment
    /// comes back as the server returned it, for its rollout status.
    fn apply(
        &self,
        object: Desired<'_>,
    ) -> impl Future<Output = Result<Applied<Option<Deployment>>, ApplyError>> + Send;
    /// Delete the namespace's object of `kind` if it exists.
    fn delete(&self, kind: OwnedKind) -> impl Future<Output = Result<(), ApplyError>> + Send;
}

/// A gateway object kind: which [`OwnedKind`] it is and where it lives.
pub trait Owned: Resource + Serialize + DeserializeOwned + Clone + Debug {
    /// The kind in the index.
    const KIND: OwnedKind;
    /// The API to reach the object of `namespace`'s gateway.
    fn api(client: &Client, namespace: &str) -> Api<Self>;
    /// Its name.
    fn name(namespace: &str) -> String;
}

macro_rules! namespaced_owned {
    ($type:ty, $kind:expr) => {
        impl Owned for $type {
            const KIND: OwnedKind = $kind;
            fn api(client: &Client, namespace: &str) -> Api<Self> {
                Api::namespaced(client.clone(), namespace)
            }
            fn name(_: &str) -> String {
                GATEWAY_NAME.to_string()
            }
        }
    };
}

namespaced_owned!(ConfigMap, OwnedKind::ConfigMap);
namespaced_owned!(Deployment, OwnedKind::Deployment);
namespaced_owned!(Service, OwnedKind::Service);
namespaced_owned!(ServiceAccount, OwnedKind::ServiceAccount);
namespaced_owned!(NetworkPolicy, OwnedKind::NetworkPolicy);
namespaced_owned!(PodDisruptionBudget, OwnedKind::PodDisruptionBudget);
namespaced_owned!(HorizontalPodAutoscaler, OwnedKind::HorizontalPodAutoscaler);

impl Owned for ClusterRoleBinding {
    const KIND: OwnedKind = OwnedKind::ClusterRoleBinding;
    fn api(client: &Client, _: &str) -> Api<Self> {
        Api::all(client.clone())
    }
    fn name(namespace: &str) -> String {
        binding_name(namespace)
    }
}

/// Remembers, per object, the desired object last applied and the resourceVersion it got.
#[derive(Debug, Default)]
pub struct Applier {
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

    fn record<K: Serialize>(&self, kind: OwnedKind, namespace: &str, object: &K, version: String) {
        self.last().insert((kind, namespace.to_string()), (desired_hash(object), version));
    }

    fn forget(&self, kind: OwnedKind, namespace: &str) {
        self.last().remove(&(kind, namespace.to_string()));
    }
}

/// Writes the gateway objects of one namespace, knowing which exist and at which resourceVersion.
pub struct Writer<'a> {
    /// What was applied before.
    pub applier: &'a Applier,
    /// API client.
    pub client: &'a Client,
    /// The gateway's namespace.
    pub namespace: &'a str,
    /// The owned objects present, with their resourceVersions (from the index).
    pub live: &'a Live,
    /// Write counters.
    pub metrics: &'a Metrics,
}

impl Writer<'_> {
    /// Apply `object` unless it is current.
    pub async fn apply_typed<K: Owned>(&self, object: &K) -> Result<Applied<K>, ApplyError> {
        let (kind, namespace) = (K::KIND, self.namespace);
        let live_version = self.live.get(&kind).map(String::as_str);
        if self.applier.is_current(kind, namespace, object, live_version) {
            return Ok(Applied::Unchanged);
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let written =
            K::api(self.client, namespace).patch(&K::name(namespace), &params, &Patch::Apply(object)).await.map_err(
                |source| ApplyError { operation: "applying", kind, namespace: namespace.to_string(), source },
            )?;
        self.metrics.wrote(kind.as_str(), "apply");
        let version = written.meta().resource_version.clone().unwrap_or_default();
        self.applier.record(kind, namespace, object, version);
        Ok(Applied::Written(written))
    }

    /// Delete the `K` object of this gateway if it exists (one already gone is fine).
    pub async fn delete_typed<K: Owned>(&self) -> Result<(), ApplyError> {
        let (kind, namespace) = (K::KIND, self.namespace);
        self.applier.forget(kind, namespace);
        if !self.live.contains_key(&kind) {
            return Ok(());
        }
        match K::api(self.client, namespace).delete(&K::name(namespace), &DeleteParams::background()).await {
            Ok(_) => {
                self.metrics.wrote(kind.as_str(), "delete");
                tracing::info!(namespace, kind = %kind, "gateway object deleted");
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
            Err(source) => Err(ApplyError { operation: "deleting", kind, namespace: namespace.to_string(), source }),
        }
    }
}

/// An apply's outcome without the written object (only the Deployment's is kept).
fn written<K>(applied: Applied<K>) -> Applied<Option<Deployment>> {
    match applied {
        Applied::Written(_) => Applied::Written(None),
        Applied::Unchanged => Applied::Unchanged,
    }
}

impl ApplyTarget for Writer<'_> {
    async fn apply(&self, object: Desired<'_>) -> Result<Applied<Option<Deployment>>, ApplyError> {
        Ok(match object {
            Desired::ConfigMap(o) => written(self.apply_typed(o).await?),
            Desired::Service(o) => written(self.apply_typed(o).await?),
            Desired::ServiceAccount(o) => written(self.apply_typed(o).await?),
            Desired::ClusterRoleBinding(o) => written(self.apply_typed(o).await?),
            Desired::NetworkPolicy(o) => written(self.apply_typed(o).await?),
            Desired::PodDisruptionBudget(o) => written(self.apply_typed(o).await?),
            Desired::HorizontalPodAutoscaler(o) => written(self.apply_typed(o).await?),
            Desired::Deployment(o) => match self.apply_typed(o).await? {
                Applied::Written(deployment) => Applied::Written(Some(deployment)),
                Applied::Unchanged => Applied::Unchanged,
            },
        })
    }

    async fn delete(&self, kind: OwnedKind) -> Result<(), ApplyError> {
        match kind {
            OwnedKind::ConfigMap => self.delete_typed::<ConfigMap>().await,
            OwnedKind::Deployment => self.delete_typed::<Deployment>().await,
            OwnedKind::Service => self.delete_typed::<Service>().await,
            OwnedKind::ServiceAccount => self.delete_typed::<ServiceAccount>().await,
            OwnedKind::ClusterRoleBinding => self.delete_typed::<ClusterRoleBinding>().await,
            OwnedKind::NetworkPolicy => self.delete_typed::<NetworkPolicy>().await,
            OwnedKind::PodDisruptionBudget => self.delete_typed::<PodDisruptionBudget>().await,
            OwnedKind::HorizontalPodAutoscaler => self.delete_typed::<HorizontalPodAutoscaler>().await,
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
        applier.record(OwnedKind::ConfigMap, "agents", &desired, "1".into());
        assert!(applier.is_current(OwnedKind::ConfigMap, "agents", &desired, Some("1")));
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &desired, Some("2")), "edited since");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &desired, None), "deleted since");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "agents", &config_map("b"), Some("1")), "new desire");
        assert!(!applier.is_current(OwnedKind::ConfigMap, "other", &desired, Some("1")), "per namespace");
    }
}
