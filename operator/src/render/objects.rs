//! The small gateway objects: ConfigMap, Service, ServiceAccount, the optional NetworkPolicy,
//! PodDisruptionBudget and HorizontalPodAutoscaler, and the TokenReview binding.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget,
    ResourceMetricSource,
};
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount, ServicePort, ServiceSpec};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memgate_crds::memory_gateway::GatewayAutoscaling;

use super::{GATEWAY_NAME, binding_name, labels, pod_labels, selector_labels};
use crate::settings::GatewaySettings;

/// The label every namespace carries with its own name (set by the API server).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// What every namespaced gateway object's metadata is made of.
pub struct Meta<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// Owner references (the namespace's providers).
    pub owners: &'a [OwnerReference],
}

impl Meta<'_> {
    /// Metadata of a namespaced gateway object.
    pub fn object(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(GATEWAY_NAME.into()),
            namespace: Some(self.namespace.into()),
            labels: Some(labels(self.namespace)),
            owner_references: (!self.owners.is_empty()).then(|| self.owners.to_vec()),
            ..ObjectMeta::default()
        }
    }
}

/// The ConfigMap holding the rendered config files.
pub fn config_map(meta: &Meta<'_>, data: BTreeMap<String, String>) -> ConfigMap {
    ConfigMap { metadata: meta.object(), data: Some(data), ..ConfigMap::default() }
}

/// The Service tenants call: `memgate-gateway.<ns>.svc:<port>`. It selects the gateway pods by
/// [`super::GATEWAY_POD_LABEL`] too, a label of memgate's own, so no other pod of the namespace
/// receives tenants' requests (and their tokens) by carrying the common `app.kubernetes.io` labels.
pub fn service(meta: &Meta<'_>, port: u16) -> Service {
    Service {
        metadata: meta.object(),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(pod_labels()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: i32::from(port),
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Ingress to the gateway pods: TCP to the serving and the admin port, only from pods of the
/// gateway's own namespace and of the configured ones (sorted, without repeats), and from pods of
/// any namespace matching one of the configured pod selectors (a MemoryGateway's
/// `networkPolicy.allowedPods`). Kubernetes always lets the pod's own node connect, so kubelet
/// probes need no rule.
pub fn network_policy(meta: &Meta<'_>, settings: &GatewaySettings) -> NetworkPolicy {
    let mut namespaces: BTreeSet<&str> = settings.network_policy_namespaces.iter().map(String::as_str).collect();
    namespaces.insert(meta.namespace);
    let port = |number: u16| NetworkPolicyPort {
        protocol: Some("TCP".into()),
        port: Some(IntOrString::Int(i32::from(number))),
        ..NetworkPolicyPort::default()
    };
    let mut peers = vec![NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: "In".into(),
                values: Some(namespaces.into_iter().map(String::from).collect()),
            }]),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    }];
    // An empty namespace selector beside the pod selector: matching pods of every namespace.
    peers.extend(settings.network_policy_pods.iter().map(|pods| NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector::default()),
        pod_selector: Some(pods.clone()),
        ..NetworkPolicyPeer::default()
    }));
    NetworkPolicy {
        metadata: meta.object(),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector { match_labels: Some(selector_labels()), ..LabelSelector::default() }),
            policy_types: Some(vec!["Ingress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(peers),
                ports: Some(vec![port(settings.port), port(settings.admin_port)]),
            }]),
            ..NetworkPolicySpec::default()
        }),
    }
}

/// At most one gateway pod voluntarily disrupted (node drains) at a time. Rendered only for more
/// than one replica. Unhealthy pods may always be evicted, so a gateway that never became ready
/// cannot hold a drain.
pub fn pod_disruption_budget(meta: &Meta<'_>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: meta.object(),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector { match_labels: Some(selector_labels()), ..LabelSelector::default() }),
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    }
}

/// Scales the gateway Deployment on its pods' average CPU use (a MemoryGateway's `autoscaling`);
/// the Deployment then leaves `replicas` to it.
pub fn horizontal_pod_autoscaler(meta: &Meta<'_>, autoscaling: &GatewayAutoscaling) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: meta.object(),
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: GATEWAY_NAME.into(),
            },
            min_replicas: Some(autoscaling.min_replicas),
            max_replicas: autoscaling.max_replicas,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(autoscaling.target_cpu_utilization_percentage),
                        ..MetricTarget::default()
                    },
                }),
                ..MetricSpec::default()
            }]),
            ..HorizontalPodAutoscalerSpec::default()
        },
        ..HorizontalPodAutoscaler::default()
    }
}

/// The gateway pods' identity.
pub fn service_account(meta: &Meta<'_>) -> ServiceAccount {
    ServiceAccount { metadata: meta.object(), ..ServiceAccount::default() }
}

/// `cluster_role` (exactly `create` on `tokenreviews`) for the gateway's ServiceAccount:
/// TokenReview is cluster-scoped, so a RoleBinding cannot grant it. Nothing else is bound.
pub fn binding(namespace: &str, cluster_role: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(binding_name(namespace)),
            labels: Some(labels(namespace)),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: cluster_role.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: GATEWAY_NAME.into(),
            namespace: Some(namespace.into()),
            ..Subject::default()
        }]),
    }
}
