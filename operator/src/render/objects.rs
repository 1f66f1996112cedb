//! The small gateway objects: ConfigMap, Service, ServiceAccount and the TokenReview binding.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount, ServicePort, ServiceSpec};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{AUTH_DELEGATOR, GATEWAY_NAME, binding_name, labels, selector_labels};

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

/// The Service tenants call: `memgate-gateway.<ns>.svc:<port>`.
pub fn service(meta: &Meta<'_>, port: u16) -> Service {
    Service {
        metadata: meta.object(),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(selector_labels()),
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

/// The gateway pods' identity.
pub fn service_account(meta: &Meta<'_>) -> ServiceAccount {
    ServiceAccount { metadata: meta.object(), ..ServiceAccount::default() }
}

/// `system:auth-delegator` for the gateway's ServiceAccount: TokenReview is cluster-scoped, so a
/// RoleBinding cannot grant it. Nothing else is bound.
pub fn binding(namespace: &str) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(binding_name(namespace)),
            labels: Some(labels(namespace)),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: AUTH_DELEGATOR.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: GATEWAY_NAME.into(),
            namespace: Some(namespace.into()),
            ..Subject::default()
        }]),
    }
}
