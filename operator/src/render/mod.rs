//! Render: the gateway objects one namespace should have, as a pure function of its served
//! providers and the operator's settings.
//!
//! ```text
//! served providers + presets + settings --render--> ConfigMap      memgate-gateway  (rendered config, no values)
//!                                                   Deployment     memgate-gateway  (serve + Nexent init containers)
//!                                                   Service        memgate-gateway
//!                                                   ServiceAccount memgate-gateway
//!                                                   NetworkPolicy  memgate-gateway  (only with --gateway-network-policy)
//!                                                   PodDisruptionBudget memgate-gateway (only for more than one replica)
//!                                                   HorizontalPodAutoscaler memgate-gateway (only with a MemoryGateway's autoscaling)
//!                                                   ClusterRoleBinding memgate-gateway-<ns> (only for ServiceAccount callers)
//! ```
//!
//! No I/O, no clock, no randomness: the same input renders byte-identical objects, which is what
//! lets the operator skip writes in a steady state. Never sees a Secret value: Secrets appear only
//! as names and keys to mount.

mod config;
pub mod layout;
mod objects;
mod pod;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use memgate_crds::{DialectPresetSpec, MemoryProviderSpec, ServiceAccountVerification};

pub use layout::{CONFIG_DIR, CONFIG_KEY, SECRETS_DIR};

use crate::owned::{Desired, OwnedKind};
use crate::settings::GatewaySettings;

/// Name of every namespaced gateway object (and the host name tenants use).
pub const GATEWAY_NAME: &str = "memgate-gateway";
/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "memgate-operator";
/// `app.kubernetes.io/managed-by` value on every gateway object.
pub const MANAGED_BY: &str = "memgate-operator";
/// Label naming the namespace a gateway object belongs to (also on the cluster-scoped binding).
pub const GATEWAY_NAMESPACE_LABEL: &str = "memgate.io/gateway-namespace";
/// Pod-template annotation: hash of the rendered config and of the set of mounted Secrets and claims.
pub const CONFIG_HASH_ANNOTATION: &str = "memgate.io/config-hash";
/// Label selector matching every object the operator owns.
pub const OWNED_SELECTOR: &str = "app.kubernetes.io/managed-by=memgate-operator,app.kubernetes.io/name=memgate-gateway";
/// Pod label selecting a namespace's gateway pods, on top of the Deployment's selector: a label of
/// memgate's own, so that no pod of the namespace joins the gateway's Service by accident.
pub const GATEWAY_POD_LABEL: &str = "memgate.io/gateway";

/// Name of the ClusterRoleBinding of `namespace`'s gateway.
pub fn binding_name(namespace: &str) -> String {
    format!("{GATEWAY_NAME}-{namespace}")
}

/// The gateway's in-cluster base URL.
pub fn gateway_url(namespace: &str, port: u16) -> String {
    format!("http://{GATEWAY_NAME}.{namespace}.svc:{port}")
}

/// The base URL tenants use: a MemoryGateway's `publicURL`, else the in-cluster URL.
pub fn public_url(namespace: &str, settings: &GatewaySettings) -> String {
    settings.public_url.clone().unwrap_or_else(|| gateway_url(namespace, settings.port))
}

/// One provider the gateway serves.
#[derive(Debug, Clone, Copy)]
pub struct ServedProvider<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// The validated spec.
    pub spec: &'a MemoryProviderSpec,
    /// The DialectPreset it uses (`presetRef`), by name.
    pub preset: Option<(&'a str, &'a DialectPresetSpec)>,
}

/// Everything rendering a namespace's gateway depends on.
#[derive(Debug, Clone)]
pub struct GatewayInput<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// Providers to serve (valid, enabled, resolved), in name order.
    pub served: Vec<ServedProvider<'a>>,
    /// Every provider of the namespace, as owners of the gateway objects (garbage-collection
    /// backstop where a controller manager runs; the operator deletes explicitly anyway).
    pub owners: Vec<OwnerReference>,
    /// The shared ledger Secret (`--gateway-ledger-secret`) exists here with a usable URL.
    pub ledger_available: bool,
}

/// The desired objects of one namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Gateway {
    /// Rendered config.
    pub config_map: ConfigMap,
    /// Gateway pods.
    pub deployment: Deployment,
    /// Address.
    pub service: Service,
    /// Identity.
    pub service_account: ServiceAccount,
    /// TokenReview rights, when any served provider accepts ServiceAccount tokens.
    pub binding: Option<ClusterRoleBinding>,
    /// Who may connect, with `--gateway-network-policy`.
    pub network_policy: Option<NetworkPolicy>,
    /// `maxUnavailable: 1`, when enabled and more than one replica runs.
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
    /// Scaling on CPU, with a MemoryGateway's `autoscaling` (and more than one replica allowed).
    pub horizontal_pod_autoscaler: Option<HorizontalPodAutoscaler>,
    /// The pod-template hash.
    pub config_hash: String,
    /// Replicas rendered (the autoscaler's minimum when it scales them).
    pub replicas: i32,
    /// The base URL tenants use (the providers' endpoints are under it).
    pub public_url: String,
    /// Why replicas were limited, for the providers' Ready message.
    pub replica_note: Option<String>,
}

impl Gateway {
    /// The desired object of `kind`, when rendered.
    pub fn object(&self, kind: OwnedKind) -> Option<Desired<'_>> {
        match kind {
            OwnedKind::ConfigMap => Some(Desired::ConfigMap(&self.config_map)),
            OwnedKind::Deployment => Some(Desired::Deployment(&self.deployment)),
            OwnedKind::Service => Some(Desired::Service(&self.service)),
            OwnedKind::ServiceAccount => Some(Desired::ServiceAccount(&self.service_account)),
            OwnedKind::ClusterRoleBinding => self.binding.as_ref().map(Desired::ClusterRoleBinding),
            OwnedKind::NetworkPolicy => self.network_policy.as_ref().map(Desired::NetworkPolicy),
            OwnedKind::PodDisruptionBudget => self.pod_disruption_budget.as_ref().map(Desired::PodDisruptionBudget),
            OwnedKind::HorizontalPodAutoscaler => {
                self.horizontal_pod_autoscaler.as_ref().map(Desired::HorizontalPodAutoscaler)
            }
        }
    }

    /// The kinds rendered.
    pub fn kinds(&self) -> BTreeSet<OwnedKind> {
        OwnedKind::APPLY_ORDER.into_iter().filter(|k| self.object(*k).is_some()).collect()
    }
}

/// Why rendering failed (a bug, not a user error: the input is validated).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The config could not be written as YAML.
    #[error("rendering the gateway config as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
    /// A spec could not be turned into JSON.
    #[error("rendering a spec as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Render the gateway of one namespace, with `settings` already shaped by its MemoryGateway.
pub fn render(input: &GatewayInput<'_>, settings: &GatewaySettings) -> Result<Gateway, RenderError> {
    let files = config::render_files(input, &settings.default_plugin_claim)?;
    let ingests = input.served.iter().any(|p| p.spec.nexent.ingest);
    // The Redis store also shares the providers' rate limits across replicas (`spec.limits`).
    let rate_limited = input.served.iter().any(|p| p.spec.limits.as_ref().is_some_and(|l| l.has_shared_rates()));
    let shared_ledger = (ingests || rate_limited) && input.ledger_available && settings.ledger.is_some();
    let single_writer = ingests && !shared_ledger;
    let (scale, replica_note) = if single_writer {
        let note = match &settings.ledger {
            None => "runs 1 gateway replica: a provider here ingests and no shared ledger is configured (operator flag --gateway-ledger-secret)".to_string(),
            Some(ledger) => format!(
                "runs 1 gateway replica: a provider here ingests and the shared ledger Secret \"{}\" (key \"{}\") is missing or unusable in this namespace",
                ledger.name, ledger.key
            ),
        };
        (Scale::Fixed(1), Some(note))
    } else {
        match &settings.autoscaling {
            Some(autoscaling) => (Scale::Autoscaled(autoscaling), None),
            None => (Scale::Fixed(settings.replicas), None),
        }
    };
    // ServiceAccount callers need the gateway's own API identity: TokenReview needs the
    // tokenreviews binding, offline (jwks) verification only reads the cluster's public
    // keys, which every ServiceAccount may (system:service-account-issuer-discovery).
    let service_account_modes: Vec<ServiceAccountVerification> =
        input.served.iter().filter_map(|p| p.spec.access.service_accounts.as_ref().map(|sa| sa.verification)).collect();
    let token_review = service_account_modes.contains(&ServiceAccountVerification::TokenReview);
    let api_identity = !service_account_modes.is_empty();
    let pod = pod::PodPlan {
        namespace: input.namespace,
        files: &files,
        replicas: match scale {
            Scale::Fixed(replicas) => Some(replicas),
            Scale::Autoscaled(_) => None,
        },
        shared_ledger,
        single_writer,
        api_identity,
    };
    let config_hash = files.hash(shared_ledger.then_some(settings.ledger.as_ref()).flatten());
    let meta = objects::Meta { namespace: input.namespace, owners: &input.owners };
    let (replicas, most) = match scale {
        Scale::Fixed(replicas) => (replicas, replicas),
        Scale::Autoscaled(a) => (a.min_replicas, a.max_replicas),
    };
    Ok(Gateway {
        config_map: objects::config_map(&meta, files.data.clone()),
        deployment: pod::deployment(&meta, &pod, &config_hash, settings),
        service: objects::service(&meta, settings.port),
        service_account: objects::service_account(&meta),
        binding: token_review.then(|| objects::binding(input.namespace, &settings.token_review_cluster_role)),
        network_policy: settings.network_policy.then(|| objects::network_policy(&meta, settings)),
        // Never for one replica (a namespace that ingests without a shared ledger): a budget
        // there protects nothing (`maxUnavailable: 1` lets the only pod go anyway), and any
        // stricter one would block node drains forever.
        pod_disruption_budget: (settings.pod_disruption_budget && most > 1)
            .then(|| objects::pod_disruption_budget(&meta)),
        horizontal_pod_autoscaler: match scale {
            Scale::Autoscaled(a) => Some(objects::horizontal_pod_autoscaler(&meta, a)),
            Scale::Fixed(_) => None,
        },
        config_hash,
        replicas,
        public_url: public_url(input.namespace, settings),
        replica_note,
    })
}

/// How many gateway pods run.
#[derive(Debug, Clone, Copy)]
enum Scale<'a> {
    /// This many (`spec.replicas` of the Deployment).
    Fixed(i32),
    /// What a HorizontalPodAutoscaler decides (the Deployment leaves `spec.replicas` to it).
    Autoscaled(&'a memgate_crds::memory_gateway::GatewayAutoscaling),
}

/// Labels on every gateway object of `namespace`.
pub fn labels(namespace: &str) -> BTreeMap<String, String> {
    let mut labels = selector_labels();
    labels.insert(GATEWAY_NAMESPACE_LABEL.into(), namespace.into());
    labels
}

/// Labels of the Deployment's selector (immutable once created, so kept as first rendered).
pub fn selector_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), GATEWAY_NAME.to_string()),
        ("app.kubernetes.io/managed-by".to_string(), MANAGED_BY.to_string()),
    ])
}

/// Labels of the gateway pods, which the Service, NetworkPolicy and PodDisruptionBudget select:
/// the Deployment's selector plus [`GATEWAY_POD_LABEL`].
pub fn pod_labels() -> BTreeMap<String, String> {
    let mut labels = selector_labels();
    labels.insert(GATEWAY_POD_LABEL.to_string(), GATEWAY_NAME.to_string());
    labels
}

#[cfg(test)]
mod tests;
