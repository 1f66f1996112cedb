//! Reconcile one key: a namespace (its gateway and its providers' status) or a DialectPreset (its
//! status).
//!
//! A namespace goes through the stages in order, each in its own module:
//!
//! ```text
//! index view --resolve--> Secret verdicts --validate--> provider verdicts --render--> desired objects
//!            --plan--> steps --apply--> written / unchanged / deleted --status--> one write per changed provider
//! ```
//!
//! Only `resolve`, the [`ApplyTarget`] and the status write perform I/O; what to apply, in which
//! order, what to prune ([`decide`]) and which statuses to write (`status::provider_writes`) are
//! pure and unit-tested here without an API server. A provider that is invalid or half-resolved
//! only changes its own status: the others are rendered as if it were absent.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use memgate_crds::memory_gateway::GatewayUrls;
use memgate_crds::references::{KeyVerdict, WantedKeys, wanted_keys};
use memgate_crds::{API_VERSION, MemoryProviderStatus};

use crate::apply::{Applied, Applier, ApplyError, ApplyTarget, Writer};
use crate::events::{Events, Regarding};
use crate::index::{GatewayEntry, Index, Key, NamespaceView, PresetEntry, ProviderEntry};
use crate::metrics::Metrics;
use crate::owned::{Step, plan};
use crate::render::{self, Gateway, GatewayInput, RenderError, ServedProvider};
use crate::resolve::{self, SecretVerdicts};
use crate::settings::{GatewaySettings, Settings};
use crate::status::gateway::{GatewayVerdict, Shaped, gateway_status, gateway_verdicts};
use crate::status::{self, GatewayState, Rollout};
use crate::validate::{self, Claims, ProviderVerdict};

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
    let writer = writer(ctx, &view);
    if view.providers.is_empty() {
        // The last provider of the namespace is gone: delete every gateway object still there.
        execute(&writer, None, &plan(None, &view.owned)).await?;
        let (gateway_verdicts, shaped_settings) = shape(&view, &ctx.settings.gateway);
        let urls = gateway_urls(&view.namespace, &shaped_settings);
        return write_gateway_statuses(ctx, &view, &gateway_verdicts, &Shaped::Idle, &urls).await;
    }

    // Dereference: the referenced Secret keys (and the shared ledger's), judged and dropped.
    let api = Api::<Secret>::namespaced(ctx.client.clone(), namespace);
    let secrets = resolve::read_secrets(&api, &wanted(ctx, &view), &view.secrets)
        .await
        .map_err(|source| ReconcileError::Secrets { namespace: namespace.to_string(), source })?;

    // Validate and render (pure), then apply.
    let decision = decide(&view, &secrets, &ctx.settings)?;
    let (gateway_verdicts, urls) = (&decision.gateway_verdicts, &decision.urls);
    let written = match execute(&writer, Some(&decision.gateway), &decision.steps).await {
        Ok(written) => written,
        Err(error) => {
            // The providers say what keeps them from being served while the write is retried (their
            // status may still be writable: an admission webhook or a quota refused one object).
            let state = gateway_state(&decision, view.deployment.as_deref(), Some(error.summary()));
            for (provider, desired) in status::provider_writes(&view.providers, &decision.verdicts, &state, &now()) {
                let _ = write_provider_status(ctx, provider, desired).await;
            }
            let _ = write_gateway_statuses(ctx, &view, gateway_verdicts, &Shaped::Running(&state), urls).await;
            return Err(error.into());
        }
    };
    let deployment = match written {
        Some(deployment) => {
            // Status is computed from what was just written, not from a watch event still on its way.
            write_index(ctx).deployment(namespace, Some(deployment.clone()));
            Some(Arc::new(deployment))
        }
        None => view.deployment.clone(),
    };

    // Status.
    let state = gateway_state(&decision, deployment.as_deref(), None);
    let mut first_error = None;
    for (provider, desired) in status::provider_writes(&view.providers, &decision.verdicts, &state, &now()) {
        if let Err(error) = write_provider_status(ctx, provider, desired).await {
            // One status that cannot be written does not keep the others from being written.
            first_error.get_or_insert(error);
        }
    }
    if let Err(error) = write_gateway_statuses(ctx, &view, gateway_verdicts, &Shaped::Running(&state), urls).await {
        first_error.get_or_insert(error);
    }
    first_error.map_or(Ok(()), Err)
}

/// The namespace's MemoryGateways judged (oldest first), and the operator's gateway settings shaped
/// by the one that counts when it is valid. Pure.
pub fn shape(view: &NamespaceView, settings: &GatewaySettings) -> (Vec<GatewayVerdict>, GatewaySettings) {
    let verdicts = gateway_verdicts(&view.gateways, |entry| match &entry.spec {
        Err(error) => Some(format!("the object cannot be read: {error}")),
        Ok(spec) => {
            let found = memgate_crds::validation::memory_gateway(spec);
            (!found.is_empty()).then(|| found.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))
        }
    });
    let shaped = match (view.gateways.first().map(|g| &g.spec), verdicts.first()) {
        (Some(Ok(spec)), Some(GatewayVerdict::Shaping)) => settings.shaped_by(spec),
        _ => settings.clone(),
    };
    (verdicts, shaped)
}

/// The public and in-cluster base URLs of a namespace's gateway.
fn gateway_urls(namespace: &str, settings: &GatewaySettings) -> GatewayUrls {
    GatewayUrls {
        public: Some(render::public_url(namespace, settings)),
        in_cluster: Some(render::gateway_url(namespace, settings.port)),
    }
}

/// The gateway as the providers' status sees it: its rollout of the desired config (or the write
/// that failed), its available replicas and its URL.
fn gateway_state(decision: &Decision, deployment: Option<&Deployment>, failed_write: Option<String>) -> GatewayState {
    GatewayState {
        rollout: match failed_write {
            Some(why) => Rollout::ApplyFailed(why),
            None => status::rollout(deployment, &decision.gateway.config_hash),
        },
        available: deployment.and_then(|d| d.status.as_ref()).and_then(|s| s.available_replicas).unwrap_or(0),
        base_url: decision.gateway.public_url.clone(),
        replica_note: decision.gateway.replica_note.clone(),
    }
}

/// Write the status of each MemoryGateway of the namespace that differs from the stored one.
async fn write_gateway_statuses(
    ctx: &Context,
    view: &NamespaceView,
    verdicts: &[GatewayVerdict],
    shaped: &Shaped<'_>,
    urls: &GatewayUrls,
) -> Result<(), ReconcileError> {
    let mut first_error = None;
    for (entry, verdict) in view.gateways.iter().zip(verdicts) {
        let desired = gateway_status(entry, verdict, shaped, urls.clone(), &now());
        if desired == entry.status {
            continue;
        }
        let name = format!("{}/{}", entry.namespace, entry.name);
        match status::write::gateway(&ctx.client, &entry.namespace, &entry.name, &desired).await {
            Ok(written) => {
                ctx.metrics.wrote("MemoryGateway", "status");
                if let Some(fresh) = GatewayEntry::from_dynamic(&written) {
                    write_index(ctx).apply_gateway(fresh);
                }
                let regarding = Regarding {
                    kind: "MemoryGateway",
                    name: &entry.name,
                    namespace: Some(&entry.namespace),
                    uid: &entry.uid,
                };
                let changed = status::transitions(&entry.status.conditions, &desired.conditions);
                ctx.events.transitions(&regarding, &changed, &ctx.metrics).await;
            }
            Err(source) => {
                first_error.get_or_insert(ReconcileError::Status { kind: "MemoryGateway", name, source });
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The Secret keys a namespace's reconcile reads: its providers' and the shared ledger's.
fn wanted(ctx: &Context, view: &NamespaceView) -> WantedKeys {
    let mut wanted = wanted_keys(view.providers.iter().filter_map(ProviderEntry::spec));
    if let Some(ledger) = &ctx.settings.gateway.ledger {
        wanted.entry(ledger.name.clone()).or_default().insert(ledger.key.clone());
    }
    wanted
}

/// What a reconcile of a namespace with providers decided, before any write.
#[derive(Debug)]
pub struct Decision {
    /// The verdict on each provider, in the view's order.
    pub verdicts: Vec<ProviderVerdict>,
    /// The desired gateway.
    pub gateway: Gateway,
    /// The writes, in order.
    pub steps: Vec<Step>,
    /// The verdict on each MemoryGateway of the namespace, oldest first.
    pub gateway_verdicts: Vec<GatewayVerdict>,
    /// The gateway's public and in-cluster URLs (its MemoryGateways' status).
    pub urls: GatewayUrls,
}

/// Validate every provider of `view`, render the gateway of those served and plan the writes
/// against the live objects. Pure.
pub fn decide(view: &NamespaceView, secrets: &SecretVerdicts, settings: &Settings) -> Result<Decision, RenderError> {
    let allowed = &settings.allowed_destinations;
    let (gateway_verdicts, shaped) = shape(view, &settings.gateway);
    let settings = &shaped;
    let ledger_available = settings
        .ledger
        .as_ref()
        .is_some_and(|l| secrets.get(&(l.name.clone(), l.key.clone())) == Some(&KeyVerdict::Usable));
    let claims = Claims { present: &view.claims, default: &settings.default_plugin_claim };
    let verdicts: Vec<ProviderVerdict> =
        view.providers.iter().map(|p| validate::verdict(p, &view.presets, secrets, claims, allowed)).collect();
    let served: Vec<ServedProvider<'_>> = view
        .providers
        .iter()
        .zip(&verdicts)
        .filter(|(_, verdict)| verdict.served())
        .filter_map(|(provider, _)| served_provider(provider, view))
        .collect();
    let input = GatewayInput {
        namespace: &view.namespace,
        served,
        owners: view.providers.iter().map(owner_reference).collect(),
        ledger_available,
    };
    let gateway = render::render(&input, settings)?;
    let steps = plan(Some(&gateway.kinds()), &view.owned);
    let urls = gateway_urls(&view.namespace, settings);
    Ok(Decision { verdicts, gateway, steps, gateway_verdicts, urls })
}

/// Carry out `steps` in order through `target`, stopping at the first failure; returns the
/// Deployment if it was written.
pub async fn execute(
    target: &impl ApplyTarget,
    gateway: Option<&Gateway>,
    steps: &[Step],
) -> Result<Option<Deployment>, ApplyError> {
    let mut written = None;
    for step in steps {
        match *step {
            Step::Apply(kind) => {
                let Some(object) = gateway.and_then(|g| g.object(kind)) else { continue };
                if let Applied::Written(Some(deployment)) = target.apply(object).await? {
                    written = Some(deployment);
                }
            }
            Step::Delete(kind) => target.delete(kind).await?,
        }
    }
    Ok(written)
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

fn writer<'a>(ctx: &'a Context, view: &'a NamespaceView) -> Writer<'a> {
    Writer {
        applier: &ctx.applier,
        client: &ctx.client,
        namespace: &view.namespace,
        live: &view.owned,
        metrics: &ctx.metrics,
    }
}

/// Write a provider's status when it differs from the stored one, and announce transitions.
async fn write_provider_status(
    ctx: &Context,
    provider: &ProviderEntry,
    desired: MemoryProviderStatus,
) -> Result<(), ReconcileError> {
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    use clap::Parser;
    use kube::api::DynamicObject;
    use serde_json::{Value, json};

    use super::*;
    use crate::owned::OwnedKind::{
        ClusterRoleBinding, ConfigMap, NetworkPolicy, PodDisruptionBudget, Service, ServiceAccount,
    };
    use crate::owned::{Desired, Live, OwnedKind};
    use crate::settings::RunArgs;

    /// The operator's own defaults (what `memgate-operator run` starts with).
    fn settings() -> Settings {
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        Settings::try_from(Cli::parse_from(["memgate-operator"]).run).expect("the defaults are valid")
    }

    fn provider(name: &str, secret: &str, access: Value) -> ProviderEntry {
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "memgate.io/v1alpha1", "kind": "MemoryProvider",
            "metadata": {"name": name, "namespace": "agents", "uid": format!("uid-{name}"), "generation": 1, "resourceVersion": "1"},
            "spec": {
                "dialect": {"builtin": "mem0-oss-rest-2026-08"},
                "endpoint": {"origin": "https://mem0.example.com"},
                "credentials": {"secretRef": {"name": secret, "key": "api-key"}},
                "scope": {"userId": "u", "agentId": "a"},
                "access": access,
            },
        }))
        .expect("object");
        ProviderEntry::from_dynamic(&object).expect("named")
    }

    fn anonymous(name: &str, secret: &str) -> ProviderEntry {
        provider(name, secret, json!({"anonymous": true}))
    }

    fn view(providers: Vec<ProviderEntry>, live: &[OwnedKind]) -> NamespaceView {
        NamespaceView {
            namespace: "agents".into(),
            providers,
            owned: live.iter().map(|k| (*k, "7".to_string())).collect(),
            ..NamespaceView::default()
        }
    }

    fn usable(secrets: &[&str]) -> SecretVerdicts {
        secrets.iter().map(|s| ((s.to_string(), "api-key".to_string()), KeyVerdict::Usable)).collect()
    }

    #[test]
    fn a_new_namespace_gets_its_whole_gateway_identity_first_and_budget_last() {
        let decision = decide(&view(vec![anonymous("p", "mem0-api")], &[]), &usable(&["mem0-api"]), &settings())
            .expect("rendered");
        assert_eq!(
            decision.steps,
            [
                Step::Apply(ServiceAccount),
                Step::Apply(ConfigMap),
                Step::Apply(Service),
                Step::Apply(OwnedKind::Deployment),
                Step::Apply(PodDisruptionBudget),
            ]
        );
        assert!(decision.verdicts[0].served());
    }

    #[test]
    fn service_account_callers_bring_the_binding_and_losing_them_prunes_it_before_the_config() {
        let callers = json!({"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": "agents"}]}});
        let decision =
            decide(&view(vec![provider("p", "mem0-api", callers)], &[]), &usable(&["mem0-api"]), &settings())
                .expect("rendered");
        assert_eq!(decision.steps[..2], [Step::Apply(ServiceAccount), Step::Apply(ClusterRoleBinding)]);

        let live = [ServiceAccount, ClusterRoleBinding, ConfigMap, Service, OwnedKind::Deployment, PodDisruptionBudget];
        let decision = decide(&view(vec![anonymous("p", "mem0-api")], &live), &usable(&["mem0-api"]), &settings())
            .expect("rendered");
        assert_eq!(
            decision.steps[..3],
            [Step::Apply(ServiceAccount), Step::Delete(ClusterRoleBinding), Step::Apply(ConfigMap)]
        );
    }

    #[test]
    fn a_provider_that_cannot_be_served_changes_only_its_own_status() {
        let providers = vec![anonymous("good", "mem0-api"), anonymous("orphan", "gone")];
        let decision = decide(&view(providers.clone(), &[]), &usable(&["mem0-api"]), &settings()).expect("rendered");
        let config = &decision.gateway.config_map.data.as_ref().expect("data")["gateway.yaml"];
        assert!(config.contains("name: good") && !config.contains("orphan"), "{config}");
        assert!(!config.contains("name: gone"), "the missing Secret is not mounted");
        assert!(decision.verdicts[0].served() && !decision.verdicts[1].served());
        assert!(decision.steps.contains(&Step::Apply(OwnedKind::Deployment)), "the good provider is still served");
    }

    fn state() -> GatewayState {
        GatewayState {
            rollout: Rollout::Complete,
            available: 2,
            base_url: "http://memgate-gateway.agents.svc:8080".into(),
            replica_note: None,
        }
    }

    #[test]
    fn statuses_are_written_when_they_change_and_an_unchanged_world_writes_none() {
        let mut providers = vec![anonymous("good", "mem0-api"), anonymous("orphan", "gone")];
        let decision = decide(&view(providers.clone(), &[]), &usable(&["mem0-api"]), &settings()).expect("rendered");
        let now = Time(Timestamp::from_second(1_800_000_000).expect("time"));
        let writes = status::provider_writes(&providers, &decision.verdicts, &state(), &now);
        let reasons: Vec<(&str, String)> = writes
            .iter()
            .map(|(p, s)| {
                let ready = s.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
                (p.name.as_str(), ready.reason.clone())
            })
            .collect();
        assert_eq!(reasons, [("good", "Ready".to_string()), ("orphan", "SecretNotPermitted".to_string())]);
        let written: Vec<MemoryProviderStatus> = writes.into_iter().map(|(_, s)| s).collect();
        for (provider, status) in providers.iter_mut().zip(written) {
            provider.status = status;
        }
        let later = Time(Timestamp::from_second(1_800_000_600).expect("time"));
        assert!(status::provider_writes(&providers, &decision.verdicts, &state(), &later).is_empty());
    }

    /// Records every write; fails the first write of `fail_on`.
    #[derive(Default)]
    struct RecordingTarget {
        steps: Mutex<Vec<Step>>,
        fail_on: Option<OwnedKind>,
    }

    impl RecordingTarget {
        fn record(&self, step: Step, kind: OwnedKind) -> Result<(), ApplyError> {
            self.steps.lock().expect("lock").push(step);
            if self.fail_on == Some(kind) {
                let source =
                    kube::Error::Api(Box::new(kube::core::Status::failure("refused by the test", "Forbidden")));
                return Err(ApplyError { operation: "applying", kind, namespace: "agents".into(), source });
            }
            Ok(())
        }

        fn steps(&self) -> Vec<Step> {
            self.steps.lock().expect("lock").clone()
        }
    }

    impl ApplyTarget for RecordingTarget {
        async fn apply(&self, object: Desired<'_>) -> Result<Applied<Option<Deployment>>, ApplyError> {
            self.record(Step::Apply(object.kind()), object.kind())?;
            Ok(match object {
                Desired::Deployment(d) => Applied::Written(Some(d.clone())),
                _ => Applied::Written(None),
            })
        }

        async fn delete(&self, kind: OwnedKind) -> Result<(), ApplyError> {
            self.record(Step::Delete(kind), kind)
        }
    }

    #[tokio::test]
    async fn execute_writes_in_plan_order_returns_the_deployment_and_stops_at_the_first_failure() {
        let decision =
            decide(&view(vec![anonymous("p", "mem0-api")], &[NetworkPolicy]), &usable(&["mem0-api"]), &settings())
                .expect("rendered");
        let target = RecordingTarget::default();
        let written = execute(&target, Some(&decision.gateway), &decision.steps).await.expect("written");
        assert_eq!(target.steps(), decision.steps);
        assert_eq!(decision.steps[1], Step::Delete(NetworkPolicy), "the policy turned off is pruned");
        assert_eq!(written.as_ref(), Some(&decision.gateway.deployment));

        let failing = RecordingTarget { fail_on: Some(ConfigMap), ..RecordingTarget::default() };
        let error = execute(&failing, Some(&decision.gateway), &decision.steps).await.expect_err("refused");
        assert_eq!(error.kind, ConfigMap);
        assert_eq!(failing.steps(), decision.steps[..3], "nothing after the failed write");
    }

    #[tokio::test]
    async fn the_last_provider_gone_removes_every_gateway_object_pods_first() {
        let live: Live = OwnedKind::APPLY_ORDER.into_iter().map(|k| (k, "1".to_string())).collect();
        let target = RecordingTarget::default();
        let written = execute(&target, None, &plan(None, &live)).await.expect("deleted");
        assert!(written.is_none());
        let deleted: Vec<Step> = OwnedKind::APPLY_ORDER.into_iter().rev().map(Step::Delete).collect();
        assert_eq!(target.steps(), deleted);
        let kinds: BTreeSet<OwnedKind> = live.keys().copied().collect();
        assert_eq!(kinds.len(), OwnedKind::APPLY_ORDER.len());
    }
}
