//! `MemoryGateway`: how one namespace's gateway runs, declared by whoever owns the namespace's
//! infrastructure (Gateway API's split: the Gateway beside its routes, here the MemoryProviders).
//!
//! Optional, at most one per namespace: without it the gateway gets the operator's settings (the
//! chart's values), which stay the only defaults; every field here is optional and overrides one
//! of them. Providers never shape pods. What a MemoryGateway may set of the pod is bounded: the
//! gateway keeps running as non-root with a read-only root file system and no privilege escalation,
//! and only volumes that carry files (ConfigMaps, Secrets, projected, emptyDir) can be added.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, PodSecurityContext, ResourceRequirements, SecurityContext, Toleration, TopologySpreadConstraint,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::Condition;

/// Spec of a `MemoryGateway`; every field overrides the operator's setting of the same name.
// kube's printcolumn(...) lists repeat keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "memgate.io",
    version = "v1alpha1",
    kind = "MemoryGateway",
    namespaced,
    status = "MemoryGatewayStatus",
    shortname = "mgw",
    category = "memgate",
    derive = "PartialEq",
    cel,
    doc = "How this namespace's memgate gateway runs (public URL, replicas, resources, listener limits, pod template overrides, NetworkPolicy, PodDisruptionBudget); at most one per namespace.",
    printcolumn(name = "Public URL", type_ = "string", json_path = ".status.urls.public"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[x_kube(validation = Rule::new("!has(self.replicas) || !has(self.autoscaling)").message("spec: set replicas or autoscaling, not both"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryGatewaySpec {
    /// The base URL tenants and OAuth clients use (an Ingress or a load balancer in front of the
    /// gateway): what OAuth metadata, the default token audiences and the providers' status
    /// endpoints name, and a `Host` the gateway accepts. Default: the in-cluster Service URL.
    #[serde(rename = "publicURL", default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() <= 300 && self.matches('^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~!$&()*+,;=:@/-]*)?$')").message("spec.publicURL must be an http(s) URL with a host, optional port and path, and no user info, query or fragment"))]
    #[schemars(length(max = 300))]
    pub public_url: Option<String>,
    /// Gateway replicas, 1..20 (a namespace that ingests without a shared ledger runs one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 20").message("spec.replicas must be between 1 and 20"))]
    pub replicas: Option<i32>,
    /// Scale on CPU with a HorizontalPodAutoscaler instead of fixed replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<GatewayAutoscaling>,
    /// Requests and limits of the gateway container (`cpu`, `memory`, `ephemeral-storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The data port's listener limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener: Option<GatewayListener>,
    /// The gateway's log filter (`RUST_LOG`), e.g. `info` or `warn,memgate_gateway=debug`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.size() >= 1 && self.size() <= 256 && self.matches('^[A-Za-z0-9_=,:.-]+$')").message("spec.logLevel must be a log filter such as info or warn,memgate_gateway=debug"))]
    pub log_level: Option<String>,
    /// Merged into the gateway pod (Kubernetes field names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<GatewayPodTemplate>,
    /// Who may connect to the gateway pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<GatewayNetworkPolicy>,
    /// Voluntary disruptions of the gateway pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_disruption_budget: Option<GatewayDisruptionBudget>,
}

/// A HorizontalPodAutoscaler on the gateway's CPU.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new("self.minReplicas <= self.maxReplicas").message("spec.autoscaling.minReplicas must not exceed maxReplicas"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayAutoscaling {
    /// Fewest replicas, 1..50.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 50").message("spec.autoscaling.minReplicas must be between 1 and 50"))]
    pub min_replicas: i32,
    /// Most replicas, 1..50.
    #[x_kube(validation = Rule::new("self >= 1 && self <= 50").message("spec.autoscaling.maxReplicas must be between 1 and 50"))]
    pub max_replicas: i32,
    /// Average CPU use (percent of the request) to keep, 10..100 (default 80).
    #[serde(default = "default_cpu_target")]
    #[x_kube(validation = Rule::new("self >= 10 && self <= 100").message("spec.autoscaling.targetCPUUtilizationPercentage must be between 10 and 100"))]
    #[serde(rename = "targetCPUUtilizationPercentage")]
    pub target_cpu_utilization_percentage: i32,
}

fn default_cpu_target() -> i32 {
    80
}

/// Listener limits of the data port (`memgate-gateway serve --max-in-flight`, `--max-connections`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayListener {
    /// Most requests served at once; more are answered 503 at once. 1..100000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 100000").message("spec.listener.maxInFlight must be between 1 and 100000"))]
    pub max_in_flight: Option<u32>,
    /// Most open connections. 1..1000000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 1000000").message("spec.listener.maxConnections must be between 1 and 1000000"))]
    pub max_connections: Option<u32>,
}

/// What is merged into the gateway pod.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayPodTemplate {
    /// Labels and annotations added to the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<GatewayPodMetadata>,
    /// Scheduling, environment, extra volumes and security contexts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<GatewayPodSpec>,
}

/// Labels and annotations of the gateway pods (memgate's own keys cannot be overridden).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayPodMetadata {
    /// Added pod labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Added pod annotations (a service mesh's, a cost tool's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The parts of the gateway pod a MemoryGateway may set, in Kubernetes field names. The CEL rules
/// here are the admission-time half of `validation::gateway` (which also checks names, paths and
/// reserved variables).
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayPodSpec {
    /// `nodeSelector` of the pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// `tolerations` of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// `affinity` of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// `topologySpreadConstraints` of the pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// `priorityClassName` of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// More environment variables of the gateway container (an OTLP endpoint, `SSL_CERT_FILE`);
    /// the ones memgate sets cannot be overridden.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// More volumes: `configMap`, `secret`, `projected` or `emptyDir` only (a CA bundle, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("self.all(v, [has(v.configMap), has(v.secret), has(v.projected), has(v.emptyDir)].exists_one(x, x))").message("spec.podTemplate.spec.volumes may only be configMap, secret, projected or emptyDir volumes"))]
    pub volumes: Vec<Volume>,
    /// Where the gateway container mounts them (read-only, outside memgate's own folders).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// The pod's security context, replacing memgate's (OpenShift's restricted SCC assigns the
    /// user: omit `runAsUser` there); it must keep `runAsNonRoot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.runAsNonRoot) || self.runAsNonRoot").message("spec.podTemplate.spec.securityContext.runAsNonRoot must not be false: the gateway never runs as root"))]
    #[x_kube(validation = Rule::new("!has(self.runAsUser) || self.runAsUser != 0").message("spec.podTemplate.spec.securityContext.runAsUser must not be 0: the gateway never runs as root"))]
    pub security_context: Option<PodSecurityContext>,
    /// The gateway container's security context, replacing memgate's; no privilege, no escalation,
    /// no added capability, a read-only root file system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.privileged) || !self.privileged").message("spec.podTemplate.spec.containerSecurityContext.privileged must not be true"))]
    #[x_kube(validation = Rule::new("!has(self.allowPrivilegeEscalation) || !self.allowPrivilegeEscalation").message("spec.podTemplate.spec.containerSecurityContext.allowPrivilegeEscalation must not be true"))]
    #[x_kube(validation = Rule::new("!has(self.readOnlyRootFilesystem) || self.readOnlyRootFilesystem").message("spec.podTemplate.spec.containerSecurityContext.readOnlyRootFilesystem must not be false"))]
    #[x_kube(validation = Rule::new("!has(self.runAsNonRoot) || self.runAsNonRoot").message("spec.podTemplate.spec.containerSecurityContext.runAsNonRoot must not be false"))]
    #[x_kube(validation = Rule::new("!has(self.runAsUser) || self.runAsUser != 0").message("spec.podTemplate.spec.containerSecurityContext.runAsUser must not be 0"))]
    #[x_kube(validation = Rule::new("!has(self.capabilities) || !has(self.capabilities.add) || size(self.capabilities.add) == 0").message("spec.podTemplate.spec.containerSecurityContext.capabilities.add must be empty: the gateway needs no capability"))]
    pub container_security_context: Option<SecurityContext>,
}

/// Who may connect to the gateway pods.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayNetworkPolicy {
    /// Render the NetworkPolicy (default: the operator's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Namespaces whose pods may connect, besides the gateway's own (replaces the operator's list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_namespaces: Option<Vec<String>>,
    /// Pods (of any namespace) that may connect, by label selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_pods: Vec<LabelSelector>,
}

/// The gateway's PodDisruptionBudget.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayDisruptionBudget {
    /// Render it while more than one replica runs (default: the operator's setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Observed state of a `MemoryGateway`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MemoryGatewayStatus {
    /// Generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` and `Ready`, then `Reconciling` and `Stalled` (kstatus convention).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Where the gateway is reached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<GatewayUrls>,
}

/// Where a gateway is reached.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayUrls {
    /// `spec.publicURL`, else the in-cluster URL: the base of the providers' endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public: Option<String>,
    /// `http://memgate-gateway.<namespace>.svc:<port>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_cluster: Option<String>,
}
