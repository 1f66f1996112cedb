//! Reconcile one key: a namespace (its gateway and its providers' status) or a DialectPreset (its
//! status).
//!
//! A namespace goes through the stages in order, each in its own module:
//!
//! ```text
//! index view --resolve--> Secret verdicts --validate--> provider verdicts --render--> desired objects
//!            --apply--> written / unchanged / deleted --status--> one status write per changed provider
//! ```
//!
//! Only `resolve`, `apply` and the status write perform I/O; everything between is pure. A provider
//! that is invalid or half-resolved only changes its own status: the others are rendered as if it
//! were absent.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use memgate_crds::{API_VERSION, MemoryProviderStatus};

use crate::apply::{Applied, Applier, ApplyError, Writer};
use crate::events::{Events, Regarding};
use crate::index::{Index, Key, NamespaceView, PresetEntry, ProviderEntry};
use crate::metrics::Metrics;
use crate::render::{self, Gateway, GatewayInput, RenderError, ServedProvider};
use crate::resolve;
use crate::settings::Settings;
use crate::status::{self, GatewayState};
use crate::validate::{self, Claims, ProviderVerdict};
use memgate_crds::references::{KeyVerdict, wanted_keys};

/// Everything a reconcile uses.
pub struct Context {
    /// API client.
    pub client: Client,
    /// The watched view.
    pub index: Arc<RwLock<Index>>,
    /// Settings.
    pub settings: Arc<Settings>,
    /// Server-side apply with write skipping.
    pub applier: Applier,
    /// Event publisher.
    pub events: Events,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// Why a reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Reading referenced Secrets failed.
    #[error("reading the Secrets of namespace {namespace}: {source}")]
    Secrets {
        /// The namespace.
        namespace: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Rendering failed.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// Applying or deleting a gateway object failed.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Writing a status failed.
    #[error("writing the status of {kind} {name}: {source}")]
    Status {
        /// `MemoryProvider` or `DialectPreset`.
        kind: &'static str,
        /// `namespace/name` or `name`.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The reconcile took longer than allowed.
    #[error("took longer than {0:?}")]
    Timeout(Duration),
}

impl ReconcileError {
    /// The failing stage, as a metric label.
    pub fn stage(&self) -> &'static str {
        match self {
            ReconcileError::Secrets { .. } => "secrets",
            ReconcileError::Render(_) => "render",
            ReconcileError::Apply(e) if e.operation == "deleting" => "delete",
            ReconcileError::Apply(_) => "apply",
            ReconcileError::Status { .. } => "status",
            ReconcileError::Timeout(_) => "timeout",
        }
    }
}

/// Reconcile `key`.
pub async fn reconcile(ctx: &Context, key: &Key) -> Result<(), ReconcileError> {
    match key {
        Key::Namespace(namespace) => reconcile_namespace(ctx, namespace).await,
        Key::Preset(name) => reconcile_preset(ctx, name).await,
    }
}

fn read_index(ctx: &Context) -> std::sync::RwLockReadGuard<'_, Index> {
    ctx.index.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write_index(ctx: &Context) -> std::sync::RwLockWriteGuard<'_, Index> {
    ctx.index.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now() -> Time {
    Time(Timestamp::now())
}

async fn reconcile_namespace(ctx: &Context, namespace: &str) -> Result<(), ReconcileError> {
    let view = read_index(ctx).namespace(namespace);
    if view.providers.is_empty() {
        return remove_gateway(ctx, &view).await;
    }

    // Dereference: the referenced Secret keys (and the shared ledger's), judged and dropped.
    let gateway_settings = &ctx.settings.gateway;
    let mut wanted = wanted_keys(view.providers.iter().filter_map(ProviderEntry::spec));
    if let Some(ledger) = &gateway_settings.ledger {
        wanted.entry(ledger.name.clone()).or_default().insert(ledger.key.clone());
    }
    let secrets = resolve::read_secrets(&Api::<Secret>::namespaced(ctx.client.clone(), namespace), &wanted)
        .await
        .map_err(|source| ReconcileError::Secrets { namespace: namespace.to_string(), source })?;
    let ledger_available = gateway_settings
        .ledger
        .as_ref()
        .is_some_and(|l| secrets.get(&(l.name.clone(), l.key.clone())) == Some(&KeyVerdict::Usable));

    // Validate.
    let claims = Claims { present: &view.claims, default: &gateway_settings.default_plugin_claim };
    let verdicts: Vec<ProviderVerdict> =
        view.providers.iter().map(|p| validate::verdict(p, &view.presets, &secrets, claims)).collect();

    // Render.
    let served: Vec<ServedProvider<'_>> = view
        .providers
        .iter()
        .zip(&verdicts)
        .filter(|(_, verdict)| verdict.served())
        .filter_map(|(provider, _)| served_provider(provider, &view))
        .collect();
    let input = GatewayInput {
        namespace,
        served,
        owners: view.providers.iter().map(owner_reference).collect(),
        ledger_available,
    };
    let gateway = render::render(&input, gateway_settings)?;

    // Apply.
    let deployment = apply_gateway(ctx, &view, &gateway).await?;

    // Status.
    let state = GatewayState {
        rollout: status::rollout(deployment.as_deref(), &gateway.config_hash),
        available: deployment.as_ref().and_then(|d| d.status.as_ref()).and_then(|s| s.available_replicas).unwrap_or(0),
        base_url: render::gateway_url(namespace, gateway_settings.port),
        replica_note: gateway.replica_note.clone(),
    };
    let mut first_error = None;
    for (provider, verdict) in view.providers.iter().zip(&verdicts) {
        let gateway_state = verdict.served().then_some(&state);
        let desired = status::provider_status(provider, verdict, gateway_state, &now());
        if let Err(error) = write_provider_status(ctx, provider, desired).await {
            // One status that cannot be written does not keep the others from being written.
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The served form of a provider whose verdict says it is served.
fn served_provider<'a>(provider: &'a ProviderEntry, view: &'a NamespaceView) -> Option<ServedProvider<'a>> {
    let spec = provider.spec()?;
    let preset = match &spec.dialect.preset_ref {
        Some(name) => {
            let entry: &PresetEntry = view.presets.get(name)?;
            Some((name.as_str(), entry.spec.as_ref().ok()?))
        }
        None => None,
    };
    Some(ServedProvider { name: &provider.name, spec, preset })
}

fn owner_reference(provider: &ProviderEntry) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.into(),
        kind: "MemoryProvider".into(),
        name: provider.name.clone(),
        uid: provider.uid.clone(),
        ..OwnerReference::default()
    }
}

/// Apply every desired object and delete the optional ones (binding, NetworkPolicy,
/// PodDisruptionBudget) that are no longer desired; returns the gateway Deployment as now known
/// (as written, or as last watched).
async fn apply_gateway(
    ctx: &Context,
    view: &NamespaceView,
    gateway: &Gateway,
) -> Result<Option<Arc<Deployment>>, ReconcileError> {
    let writer = writer(ctx, view);
    writer.apply(&gateway.service_account).await?;
    match &gateway.binding {
        Some(binding) => {
            writer.apply(binding).await?;
        }
        None => writer.delete::<ClusterRoleBinding>().await?,
    }
    // Before the pods, so that they never run unprotected once the policy is asked for.
    match &gateway.network_policy {
        Some(policy) => {
            writer.apply(policy).await?;
        }
        None => writer.delete::<NetworkPolicy>().await?,
    }
    writer.apply(&gateway.config_map).await?;
    writer.apply(&gateway.service).await?;
    let deployment = match writer.apply(&gateway.deployment).await? {
        Applied::Written(deployment) => {
            // Status is computed from what was just written, not from a watch event still on its way.
            write_index(ctx).deployment(&view.namespace, Some(deployment.clone()));
            Some(Arc::new(deployment))
        }
        Applied::Unchanged => view.deployment.clone(),
    };
    match &gateway.pod_disruption_budget {
        Some(budget) => {
            writer.apply(budget).await?;
        }
        None => writer.delete::<PodDisruptionBudget>().await?,
    }
    Ok(deployment)
}

fn writer<'a>(ctx: &'a Context, view: &'a NamespaceView) -> Writer<'a> {
    Writer {
        applier: &ctx.applier,
        client: &ctx.client,
        namespace: &view.namespace,
        live: &view.owned,
        metrics: &ctx.metrics,
    }
}

/// The last provider of the namespace is gone: delete every gateway object still there.
async fn remove_gateway(ctx: &Context, view: &NamespaceView) -> Result<(), ReconcileError> {
    let writer = writer(ctx, view);
    writer.delete::<PodDisruptionBudget>().await?;
    writer.delete::<Deployment>().await?;
    writer.delete::<Service>().await?;
    writer.delete::<ConfigMap>().await?;
    writer.delete::<NetworkPolicy>().await?;
    writer.delete::<ClusterRoleBinding>().await?;
    writer.delete::<ServiceAccount>().await?;
    Ok(())
}

/// Write a provider's status when it differs from the stored one, and announce transitions.
async fn write_provider_status(
    ctx: &Context,
    provider: &ProviderEntry,
    desired: MemoryProviderStatus,
) -> Result<(), ReconcileError> {
    if desired == provider.status {
        return Ok(());
    }
    let written = status::write::provider(&ctx.client, &provider.namespace, &provider.name, &desired).await.map_err(
        |source| ReconcileError::Status {
            kind: "MemoryProvider",
            name: format!("{}/{}", provider.namespace, provider.name),
            source,
        },
    )?;
    ctx.metrics.wrote("MemoryProvider", "status");
    if let Some(entry) = ProviderEntry::from_dynamic(&written) {
        // The next reconcile compares with what was just written, not with a stale watch copy.
        write_index(ctx).apply_provider(entry);
    }
    let regarding = Regarding {
        kind: "MemoryProvider",
        name: &provider.name,
        namespace: Some(&provider.namespace),
        uid: &provider.uid,
    };
    let changed = status::transitions(&provider.status.conditions, &desired.conditions);
    ctx.events.transitions(&regarding, &changed, &ctx.metrics).await;
    if let (Some(before), Some(now)) = (&provider.status.preset, &desired.preset)
        && before.name == now.name
        && before != now
    {
        ctx.events.preset_replaced(&regarding, before, now, &ctx.metrics).await;
    }
    Ok(())
}

async fn reconcile_preset(ctx: &Context, name: &str) -> Result<(), ReconcileError> {
    let view = read_index(ctx).preset(name);
    let Some(preset) = view.preset else { return Ok(()) };
    let desired = status::preset_status(&preset, view.users, &now());
    if desired == preset.status {
        return Ok(());
    }
    let written = status::write::preset(&ctx.client, name, &desired)
        .await
        .map_err(|source| ReconcileError::Status { kind: "DialectPreset", name: name.to_string(), source })?;
    ctx.metrics.wrote("DialectPreset", "status");
    if let Some(entry) = PresetEntry::from_dynamic(&written) {
        write_index(ctx).apply_preset(entry);
    }
    let regarding = Regarding { kind: "DialectPreset", name, namespace: None, uid: &preset.uid };
    let changed = status::transitions(&preset.status.conditions, &desired.conditions);
    ctx.events.transitions(&regarding, &changed, &ctx.metrics).await;
    Ok(())
}
