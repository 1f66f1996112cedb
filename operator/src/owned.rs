//! The gateway objects the operator owns, as one table: their apply order, which of them are
//! pruned when not desired, how each is watched and which API access it takes. The reconciler's
//! plan ([`plan`]), the controller's watches and the RBAC check all read this table, so a new
//! kind is one row here (plus its rendering).
//!
//! Owns the table and the pure plan of which objects to apply or delete, in which order. Never
//! performs I/O and never decides what an object contains (that is `render`).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;

/// Gateway objects the operator owns, one of each per namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OwnedKind {
    /// The rendered config.
    ConfigMap,
    /// The gateway pods.
    Deployment,
    /// The in-cluster address.
    Service,
    /// The gateway pods' identity.
    ServiceAccount,
    /// TokenReview rights of that identity (cluster-scoped, one per namespace).
    ClusterRoleBinding,
    /// Who may connect to the gateway pods (`--gateway-network-policy`).
    NetworkPolicy,
    /// Voluntary disruptions of the gateway pods (more than one replica only).
    PodDisruptionBudget,
    /// Scaling of the gateway pods on CPU (a MemoryGateway's `autoscaling` only).
    HorizontalPodAutoscaler,
}

/// How the controller watches a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Metadata only (existence and resourceVersion), by the owned-object label.
    Metadata,
    /// The whole object (the Deployment: its rollout status).
    Whole,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// The Kubernetes kind.
    pub kind: &'static str,
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource name (plural), as in RBAC rules and watch paths.
    pub plural: &'static str,
    /// Cluster-scoped (one per gateway namespace, named after it) rather than namespaced.
    pub cluster_scoped: bool,
    /// Rendered only under some settings or inputs, and deleted when not rendered; the others
    /// exist whenever the namespace has providers.
    pub optional: bool,
    /// How it is watched.
    pub watch: Watch,
}

/// The API verbs the operator uses on every owned kind: watches list and watch, server-side
/// apply creates and patches, pruning deletes.
pub const VERBS: [&str; 5] = ["list", "watch", "create", "patch", "delete"];

impl OwnedKind {
    /// Every kind, in the order objects are applied: the pods' identity and its rights, then the
    /// NetworkPolicy (so pods never run unprotected once it is asked for), what the pods mount and
    /// their address, the pods, then their autoscaler and last their disruption budget. Deletion of
    /// a whole gateway runs in the reverse order.
    pub const APPLY_ORDER: [OwnedKind; 8] = [
        OwnedKind::ServiceAccount,
        OwnedKind::ClusterRoleBinding,
        OwnedKind::NetworkPolicy,
        OwnedKind::ConfigMap,
        OwnedKind::Service,
        OwnedKind::Deployment,
        OwnedKind::HorizontalPodAutoscaler,
        OwnedKind::PodDisruptionBudget,
    ];

    /// This kind's row.
    pub const fn info(self) -> KindInfo {
        const fn row(kind: &'static str, group: &'static str, plural: &'static str) -> KindInfo {
            KindInfo { kind, group, plural, cluster_scoped: false, optional: false, watch: Watch::Metadata }
        }
        match self {
            OwnedKind::ServiceAccount => row("ServiceAccount", "", "serviceaccounts"),
            OwnedKind::ClusterRoleBinding => KindInfo {
                cluster_scoped: true,
                optional: true,
                ..row("ClusterRoleBinding", "rbac.authorization.k8s.io", "clusterrolebindings")
            },
            OwnedKind::NetworkPolicy => {
                KindInfo { optional: true, ..row("NetworkPolicy", "networking.k8s.io", "networkpolicies") }
            }
            OwnedKind::ConfigMap => row("ConfigMap", "", "configmaps"),
            OwnedKind::Service => row("Service", "", "services"),
            OwnedKind::Deployment => KindInfo { watch: Watch::Whole, ..row("Deployment", "apps", "deployments") },
            OwnedKind::PodDisruptionBudget => {
                KindInfo { optional: true, ..row("PodDisruptionBudget", "policy", "poddisruptionbudgets") }
            }
            OwnedKind::HorizontalPodAutoscaler => {
                KindInfo { optional: true, ..row("HorizontalPodAutoscaler", "autoscaling", "horizontalpodautoscalers") }
            }
        }
    }

    /// The Kubernetes kind.
    pub const fn as_str(self) -> &'static str {
        self.info().kind
    }
}

impl std::fmt::Display for OwnedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A desired object of one owned kind, borrowed from the rendered gateway.
#[derive(Debug, Clone, Copy)]
pub enum Desired<'a> {
    /// The rendered config.
    ConfigMap(&'a ConfigMap),
    /// The gateway pods.
    Deployment(&'a Deployment),
    /// The in-cluster address.
    Service(&'a Service),
    /// The pods' identity.
    ServiceAccount(&'a ServiceAccount),
    /// TokenReview rights.
    ClusterRoleBinding(&'a ClusterRoleBinding),
    /// Who may connect.
    NetworkPolicy(&'a NetworkPolicy),
    /// Voluntary disruptions.
    PodDisruptionBudget(&'a PodDisruptionBudget),
    /// Scaling.
    HorizontalPodAutoscaler(&'a HorizontalPodAutoscaler),
}

impl Desired<'_> {
    /// Its kind.
    pub fn kind(&self) -> OwnedKind {
        match self {
            Desired::ConfigMap(_) => OwnedKind::ConfigMap,
            Desired::Deployment(_) => OwnedKind::Deployment,
            Desired::Service(_) => OwnedKind::Service,
            Desired::ServiceAccount(_) => OwnedKind::ServiceAccount,
            Desired::ClusterRoleBinding(_) => OwnedKind::ClusterRoleBinding,
            Desired::NetworkPolicy(_) => OwnedKind::NetworkPolicy,
            Desired::PodDisruptionBudget(_) => OwnedKind::PodDisruptionBudget,
            Desired::HorizontalPodAutoscaler(_) => OwnedKind::HorizontalPodAutoscaler,
        }
    }
}

/// One write of a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Apply the desired object of this kind.
    Apply(OwnedKind),
    /// Delete the object of this kind (it exists and is no longer desired).
    Delete(OwnedKind),
}

/// The owned objects present, with their resourceVersions (from the index).
pub type Live = BTreeMap<OwnedKind, String>;

/// What to write for a namespace: with `desired` kinds (the namespace has providers), apply each
/// in [`OwnedKind::APPLY_ORDER`] and delete, at its place in that order, each live one that is no
/// longer desired; with `None` (no provider left), delete every live one in reverse order.
pub fn plan(desired: Option<&BTreeSet<OwnedKind>>, live: &Live) -> Vec<Step> {
    match desired {
        Some(desired) => OwnedKind::APPLY_ORDER
            .into_iter()
            .filter_map(|kind| {
                if desired.contains(&kind) {
                    Some(Step::Apply(kind))
                } else {
                    live.contains_key(&kind).then_some(Step::Delete(kind))
                }
            })
            .collect(),
        None => OwnedKind::APPLY_ORDER.into_iter().rev().filter(|k| live.contains_key(k)).map(Step::Delete).collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use OwnedKind::*;

    fn live(kinds: &[OwnedKind]) -> Live {
        kinds.iter().map(|k| (*k, "1".to_string())).collect()
    }

    #[test]
    fn a_gateway_is_applied_identity_first_pods_after_what_they_mount_and_budget_last() {
        let desired: BTreeSet<OwnedKind> = OwnedKind::APPLY_ORDER.into_iter().collect();
        assert_eq!(
            plan(Some(&desired), &live(&[])),
            [
                Step::Apply(ServiceAccount),
                Step::Apply(ClusterRoleBinding),
                Step::Apply(NetworkPolicy),
                Step::Apply(ConfigMap),
                Step::Apply(Service),
                Step::Apply(Deployment),
                Step::Apply(HorizontalPodAutoscaler),
                Step::Apply(PodDisruptionBudget),
            ]
        );
    }

    #[test]
    fn optional_objects_no_longer_desired_are_pruned_in_place_and_absent_ones_left_alone() {
        let desired: BTreeSet<OwnedKind> = [ServiceAccount, ConfigMap, Service, Deployment].into();
        assert_eq!(
            plan(
                Some(&desired),
                &live(&[ServiceAccount, NetworkPolicy, ConfigMap, Service, Deployment, PodDisruptionBudget])
            ),
            [
                Step::Apply(ServiceAccount),
                Step::Delete(NetworkPolicy),
                Step::Apply(ConfigMap),
                Step::Apply(Service),
                Step::Apply(Deployment),
                Step::Delete(PodDisruptionBudget),
            ]
        );
    }

    #[test]
    fn the_last_provider_gone_deletes_every_live_object_pods_first() {
        let everything = live(&OwnedKind::APPLY_ORDER);
        assert_eq!(
            plan(None, &everything),
            [
                Step::Delete(PodDisruptionBudget),
                Step::Delete(HorizontalPodAutoscaler),
                Step::Delete(Deployment),
                Step::Delete(Service),
                Step::Delete(ConfigMap),
                Step::Delete(NetworkPolicy),
                Step::Delete(ClusterRoleBinding),
                Step::Delete(ServiceAccount),
            ]
        );
        assert!(plan(None, &live(&[])).is_empty(), "nothing left: nothing to write");
    }

    #[test]
    fn only_the_binding_is_cluster_scoped_and_only_the_deployment_is_watched_whole() {
        let cluster: Vec<OwnedKind> = OwnedKind::APPLY_ORDER.into_iter().filter(|k| k.info().cluster_scoped).collect();
        assert_eq!(cluster, [ClusterRoleBinding]);
        let whole: Vec<OwnedKind> =
            OwnedKind::APPLY_ORDER.into_iter().filter(|k| k.info().watch == Watch::Whole).collect();
        assert_eq!(whole, [Deployment]);
    }

    /// The committed RBAC grants every owned kind exactly the verbs the operator uses on it.
    #[test]
    fn the_documented_rbac_grants_each_owned_kind_its_verbs() {
        let text = include_str!("../rbac/operator-rbac.yaml");
        let documents: Vec<Value> = serde_saphyr::from_multiple(text).expect("RBAC YAML");
        let cluster_role = documents.iter().find(|d| d["kind"] == "ClusterRole").expect("a ClusterRole");
        let rules = cluster_role["rules"].as_array().expect("rules");
        for kind in OwnedKind::APPLY_ORDER {
            let info = kind.info();
            let rule = rules
                .iter()
                .find(|r| {
                    r["apiGroups"].as_array().is_some_and(|g| g.iter().any(|g| g == info.group))
                        && r["resources"].as_array().is_some_and(|res| res.iter().any(|res| res == info.plural))
                        && r.get("resourceNames").is_none()
                })
                .unwrap_or_else(|| panic!("no rule for {}", info.plural));
            let verbs: Vec<&str> = rule["verbs"].as_array().expect("verbs").iter().filter_map(Value::as_str).collect();
            assert_eq!(verbs, VERBS, "{}", info.plural);
        }
    }
}
