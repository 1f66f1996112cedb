//! The wiring: watches feed the index, the index names the keys to reconcile, workers reconcile
//! them. No business rule lives here.
//!
//! | watch | of | what a change enqueues |
//! |---|---|---|
//! | MemoryProviders | whole objects (read one by one, so one unreadable object hides nothing) | its namespace, the presets it names |
//! | DialectPresets | whole objects (cluster-scoped) | the preset, every namespace using it |
//! | Secrets labelled `memgate.io/credential=true` | metadata only (`Api<PartialObjectMeta<Secret>>`: no data is ever fetched or cached; no other Secret is seen) | namespaces whose providers reference it |
//! | PersistentVolumeClaims | metadata only | namespaces whose Nexent providers name it |
//! | ConfigMaps, Services, ServiceAccounts, NetworkPolicies, PodDisruptionBudgets | metadata, label `app.kubernetes.io/managed-by=memgate-operator` (also while turned off: one left from an earlier setting is deleted) | their namespace |
//! | Deployments | whole objects, same label (their rollout status) | their namespace |
//! | ClusterRoleBindings | metadata, same label | the namespace named by `memgate.io/gateway-namespace` |
//!
//! Keys go through the [`WorkQueue`] (dedupe, one run per key at a time, backoff per key on
//! error), plus a periodic resync of every key. Reconciles start once every watch has listed its
//! objects (a gateway is never deleted for a provider not listed yet) and, with leader election,
//! once this process holds the Lease. Each reconcile has a time limit, so nothing can hold a worker.
//!
//! With leader election every reconcile runs through the leader's [`Gate`]: while the hold on the
//! Lease is not confirmed (an API server outage longer than the Lease) no reconcile starts, one
//! running is dropped (and runs again later), and `memgate_operator_leader` is 0; when the gate
//! opens again every key is enqueued.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use memgate_crds::{CREDENTIAL_SELECTOR, DialectPreset, MemoryGateway, MemoryProvider};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::apply::Applier;
use crate::events::Events;
use crate::http::Health;
use crate::index::{GatewayEntry, Index, Key, OwnedKind, PresetEntry, ProviderEntry};
use crate::leader::{Gate, LeaderError, Leadership};
use crate::metrics::Metrics;
use crate::queue::{Backoff, WorkQueue};
use crate::reconcile::{Context, ReconcileError, reconcile};
use crate::render::{GATEWAY_NAME, GATEWAY_NAMESPACE_LABEL, OWNED_SELECTOR, binding_name};
use crate::settings::Settings;
use crate::telemetry;
use crate::watch_backoff::WatchBackoff;

/// Longest a single reconcile may take before it counts as failed (and is retried).
const RECONCILE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// Leader election failed or the Lease was lost.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// A watch task ended, which it never does on its own.
    #[error("the watch of {0} ended")]
    WatchEnded(&'static str),
}

/// Counts the watches that have not listed their objects yet.
#[derive(Debug, Default)]
struct Sync {
    pending: AtomicUsize,
    done: Notify,
}

impl Sync {
    fn synced_one(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.done.notify_waiters();
        }
    }

    async fn all_synced(&self) {
        loop {
            let notified = self.done.notified();
            if self.pending.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// What every watch task shares.
#[derive(Clone)]
struct Feed {
    index: Arc<RwLock<Index>>,
    queue: Arc<WorkQueue>,
    metrics: Arc<Metrics>,
    sync: Arc<Sync>,
    /// Enqueue preset keys (only an unrestricted operator writes DialectPreset status).
    presets: bool,
}

/// One watch event, as the index takes it.
enum Change<K> {
    Apply(K),
    Delete(K),
    Reset(Vec<K>),
}

impl Feed {
    /// Count one more watch toward [`Sync`] and drive it in `tasks`.
    fn spawn<K: Send + 'static>(
        &self,
        tasks: &mut JoinSet<&'static str>,
        resource: &'static str,
        stream: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static,
        scope: Option<String>,
        apply: impl Fn(&mut Index, Change<K>, Option<&str>) -> Vec<Key> + Send + 'static,
    ) {
        self.sync.pending.fetch_add(1, Ordering::SeqCst);
        tasks.spawn(self.clone().run(resource, stream, scope, apply));
    }

    /// Drive one watch stream into the index until it ends; `scope` is the namespace it covers.
    async fn run<K>(
        self,
        resource: &'static str,
        stream: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send,
        scope: Option<String>,
        apply: impl Fn(&mut Index, Change<K>, Option<&str>) -> Vec<Key> + Send,
    ) -> &'static str {
        let mut stream = std::pin::pin!(stream.backoff(WatchBackoff::default()));
        let mut buffer = Vec::new();
        let mut synced = false;
        while let Some(event) = stream.next().await {
            let change = match event {
                Ok(Event::Apply(object)) => Change::Apply(object),
                Ok(Event::Delete(object)) => Change::Delete(object),
                Ok(Event::Init) => {
                    buffer.clear();
                    continue;
                }
                Ok(Event::InitApply(object)) => {
                    buffer.push(object);
                    continue;
                }
                Ok(Event::InitDone) => Change::Reset(std::mem::take(&mut buffer)),
                Err(error) => {
                    self.metrics.watch_failed(resource);
                    tracing::warn!(resource, error = %error, "watch failed; retrying with backoff");
                    continue;
                }
            };
            let is_reset = matches!(change, Change::Reset(_));
            let keys = {
                let mut index = self.index.write().unwrap_or_else(std::sync::PoisonError::into_inner);
                apply(&mut index, change, scope.as_deref())
            };
            for key in keys {
                if self.presets || matches!(key, Key::Namespace(_)) {
                    self.queue.add(key);
                }
            }
            if is_reset && !synced {
                synced = true;
                tracing::info!(resource, scope = scope.as_deref().unwrap_or("*"), "watch synced");
                self.sync.synced_one();
            }
        }
        resource
    }
}

fn name_of<K: Resource>(object: &K) -> (String, String) {
    let meta = object.meta();
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

fn version_of<K: Resource>(object: &K) -> Option<String> {
    object.meta().resource_version.clone()
}

/// Namespaced API of `K` for `scope`, or across every namespace.
fn scoped<K>(client: &Client, scope: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match scope {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

fn scoped_dynamic(client: &Client, scope: Option<&str>, resource: &ApiResource) -> Api<DynamicObject> {
    match scope {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// Start every watch; returns the tasks (each ends only if its stream does). Owned kinds are
/// watched as [`OwnedKind::info`] says; every watch counts itself toward [`Sync`].
fn spawn_watches(client: &Client, settings: &Settings, feed: &Feed, tasks: &mut JoinSet<&'static str>) {
    let scopes: Vec<Option<String>> = match &settings.watch_namespaces {
        Some(namespaces) => namespaces.iter().cloned().map(Some).collect(),
        None => vec![None],
    };
    // Held until every watch is spawned, so that a watch synced early cannot count as "all".
    feed.sync.pending.store(1, Ordering::SeqCst);

    for scope in &scopes {
        let s = scope.as_deref();
        let providers = ApiResource::erase::<MemoryProvider>(&());
        let stream = watcher::watcher(scoped_dynamic(client, s, &providers), watcher::Config::default());
        feed.spawn(tasks, "memoryproviders", stream, scope.clone(), |index, change, scope| match change {
            Change::Apply(o) => ProviderEntry::from_dynamic(&o).map(|e| index.apply_provider(e)).unwrap_or_default(),
            Change::Delete(o) => {
                let (ns, name) = name_of(&o);
                index.delete_provider(&ns, &name)
            }
            Change::Reset(list) => {
                index.reset_providers(scope, list.iter().filter_map(ProviderEntry::from_dynamic).collect())
            }
        });
        let gateways = ApiResource::erase::<MemoryGateway>(&());
        let stream = watcher::watcher(scoped_dynamic(client, s, &gateways), watcher::Config::default());
        feed.spawn(tasks, "memorygateways", stream, scope.clone(), |index, change, scope| match change {
            Change::Apply(o) => GatewayEntry::from_dynamic(&o).map(|e| index.apply_gateway(e)).unwrap_or_default(),
            Change::Delete(o) => {
                let (ns, name) = name_of(&o);
                index.delete_gateway(&ns, &name)
            }
            Change::Reset(list) => {
                index.reset_gateways(scope, list.iter().filter_map(GatewayEntry::from_dynamic).collect())
            }
        });
        // Only Secrets a platform team labelled as memgate credentials: no other Secret's metadata
        // (annotations can hold kubectl's copy of its values) is ever held.
        let credentials = (scoped(client, s), watcher::Config::default().labels(CREDENTIAL_SELECTOR));
        let secret_changes: (Versioned, VersionedReset) = (Index::secret, Index::reset_secrets);
        spawn_metadata::<Secret>(tasks, feed, "secrets", credentials, scope, secret_changes);
        let claims = (scoped(client, s), watcher::Config::default());
        let claim_changes: (Versioned, VersionedReset) = (Index::claim, Index::reset_claims);
        spawn_metadata::<PersistentVolumeClaim>(tasks, feed, "persistentvolumeclaims", claims, scope, claim_changes);
        for kind in OwnedKind::APPLY_ORDER.into_iter().filter(|k| !k.info().cluster_scoped) {
            spawn_owned_kind(kind, client, s, feed, scope, tasks);
        }
    }

    let presets = ApiResource::erase::<DialectPreset>(&());
    let stream = watcher::watcher(Api::<DynamicObject>::all_with(client.clone(), &presets), watcher::Config::default());
    feed.spawn(tasks, "dialectpresets", stream, None, |index, change, _| match change {
        Change::Apply(o) => PresetEntry::from_dynamic(&o).map(|e| index.apply_preset(e)).unwrap_or_default(),
        Change::Delete(o) => index.delete_preset(&name_of(&o).1),
        Change::Reset(list) => index.reset_presets(list.iter().filter_map(PresetEntry::from_dynamic).collect()),
    });
    for kind in OwnedKind::APPLY_ORDER.into_iter().filter(|k| k.info().cluster_scoped) {
        spawn_cluster_owned(kind, client, settings, feed, tasks);
    }
    feed.sync.synced_one();
}

/// The watch of one namespaced owned kind in `scope`.
fn spawn_owned_kind(
    kind: OwnedKind,
    client: &Client,
    s: Option<&str>,
    feed: &Feed,
    scope: &Option<String>,
    tasks: &mut JoinSet<&'static str>,
) {
    let owned = watcher::Config::default().labels(OWNED_SELECTOR);
    let resource = kind.info().plural;
    match kind {
        OwnedKind::ConfigMap => spawn_owned::<ConfigMap>(tasks, feed, resource, kind, scoped(client, s), &owned, scope),
        OwnedKind::Service => spawn_owned::<Service>(tasks, feed, resource, kind, scoped(client, s), &owned, scope),
        OwnedKind::ServiceAccount => {
            spawn_owned::<ServiceAccount>(tasks, feed, resource, kind, scoped(client, s), &owned, scope)
        }
        OwnedKind::NetworkPolicy => {
            spawn_owned::<NetworkPolicy>(tasks, feed, resource, kind, scoped(client, s), &owned, scope)
        }
        OwnedKind::PodDisruptionBudget => {
            spawn_owned::<PodDisruptionBudget>(tasks, feed, resource, kind, scoped(client, s), &owned, scope)
        }
        OwnedKind::HorizontalPodAutoscaler => {
            spawn_owned::<HorizontalPodAutoscaler>(tasks, feed, resource, kind, scoped(client, s), &owned, scope)
        }
        OwnedKind::Deployment => {
            // Whole objects: the rollout status is read from them.
            let stream = watcher::watcher(scoped::<Deployment>(client, s), owned);
            feed.spawn(tasks, resource, stream, scope.clone(), |index, change, scope| match change {
                Change::Apply(d) => match name_of(&d) {
                    (ns, name) if name == GATEWAY_NAME => index.deployment(&ns, Some(d)),
                    _ => Vec::new(),
                },
                Change::Delete(d) => match name_of(&d) {
                    (ns, name) if name == GATEWAY_NAME => index.deployment(&ns, None),
                    _ => Vec::new(),
                },
                Change::Reset(list) => {
                    let ours = list.into_iter().filter_map(|d| match name_of(&d) {
                        (ns, name) if name == GATEWAY_NAME => Some((ns, d)),
                        _ => None,
                    });
                    index.reset_deployments(scope, ours.collect())
                }
            });
        }
        OwnedKind::ClusterRoleBinding => {}
    }
}

/// The watch of a cluster-scoped owned kind (the TokenReview binding): one per gateway namespace,
/// named after it and labelled with it; restricted to the watched namespaces' labels when the
/// operator is.
fn spawn_cluster_owned(
    kind: OwnedKind,
    client: &Client,
    settings: &Settings,
    feed: &Feed,
    tasks: &mut JoinSet<&'static str>,
) {
    let OwnedKind::ClusterRoleBinding = kind else { return };
    let mut bindings = OWNED_SELECTOR.to_string();
    if let Some(namespaces) = &settings.watch_namespaces {
        let list: Vec<&str> = namespaces.iter().map(String::as_str).collect();
        bindings.push_str(&format!(",{GATEWAY_NAMESPACE_LABEL} in ({})", list.join(",")));
    }
    let stream = watcher::watcher(
        Api::<PartialObjectMeta<ClusterRoleBinding>>::all(client.clone()),
        watcher::Config::default().labels(&bindings),
    );
    feed.spawn(tasks, kind.info().plural, stream, None, move |index, change, _| {
        let gateway_namespace = |o: &PartialObjectMeta<ClusterRoleBinding>| {
            let ns = o.metadata.labels.as_ref()?.get(GATEWAY_NAMESPACE_LABEL)?.clone();
            (o.metadata.name.as_deref() == Some(binding_name(&ns).as_str())).then_some(ns)
        };
        match change {
            Change::Apply(o) => {
                gateway_namespace(&o).map(|ns| index.owned(kind, &ns, version_of(&o))).unwrap_or_default()
            }
            Change::Delete(o) => gateway_namespace(&o).map(|ns| index.owned(kind, &ns, None)).unwrap_or_default(),
            Change::Reset(list) => {
                let listed =
                    list.iter().filter_map(|o| Some((gateway_namespace(o)?, version_of(o).unwrap_or_default())));
                index.reset_owned(kind, None, listed.collect())
            }
        }
    });
}

fn versions<K: Resource>(list: &[K]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|o| {
            let (ns, name) = name_of(o);
            (ns, name, version_of(o).unwrap_or_default())
        })
        .collect()
}

/// How the index takes one referenced object's metadata: `(namespace, name, version or deleted)`.
type Versioned = fn(&mut Index, &str, &str, Option<String>) -> Vec<Key>;
/// How the index takes a relist of them: `(scope, [(namespace, name, version)])`.
type VersionedReset = fn(&mut Index, Option<&str>, Vec<(String, String, String)>) -> Vec<Key>;

/// A metadata watch of a kind the providers refer to (Secrets, claims): only versions are kept.
/// `(change, reset)` are how the index takes one change and a relist.
fn spawn_metadata<K>(
    tasks: &mut JoinSet<&'static str>,
    feed: &Feed,
    resource: &'static str,
    (api, config): (Api<PartialObjectMeta<K>>, watcher::Config),
    scope: &Option<String>,
    (change, reset): (Versioned, VersionedReset),
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher::watcher(api, config);
    feed.spawn(tasks, resource, stream, scope.clone(), move |index, event, scope| match event {
        Change::Apply(o) => {
            let (ns, name) = name_of(&o);
            change(index, &ns, &name, version_of(&o))
        }
        Change::Delete(o) => {
            let (ns, name) = name_of(&o);
            change(index, &ns, &name, None)
        }
        Change::Reset(list) => reset(index, scope, versions(&list)),
    });
}

/// A metadata watch of one owned namespaced kind.
fn spawn_owned<K>(
    tasks: &mut JoinSet<&'static str>,
    feed: &Feed,
    resource: &'static str,
    kind: OwnedKind,
    api: Api<PartialObjectMeta<K>>,
    config: &watcher::Config,
    scope: &Option<String>,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let stream = watcher::watcher(api, config.clone());
    feed.spawn(tasks, resource, stream, scope.clone(), move |index, change, scope| match change {
        Change::Apply(o) => match name_of(&o) {
            (ns, name) if name == GATEWAY_NAME => index.owned(kind, &ns, version_of(&o)),
            _ => Vec::new(),
        },
        Change::Delete(o) => match name_of(&o) {
            (ns, name) if name == GATEWAY_NAME => index.owned(kind, &ns, None),
            _ => Vec::new(),
        },
        Change::Reset(list) => {
            let ours = list.iter().filter_map(|o| match name_of(o) {
                (ns, name) if name == GATEWAY_NAME => Some((ns, version_of(o).unwrap_or_default())),
                _ => None,
            });
            index.reset_owned(kind, scope, ours.collect())
        }
    });
}

/// Run the operator until `shutdown` resolves (Ok) or leadership is lost (Err).
pub async fn run(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ControllerError> {
    let settings = Arc::new(settings);
    let ledger_secret = settings.gateway.ledger.as_ref().map(|l| l.name.clone());
    let index = Arc::new(RwLock::new(Index::new(ledger_secret, settings.gateway.default_plugin_claim.clone())));
    let queue = Arc::new(WorkQueue::new(Backoff::default()));
    let identity = settings.leader.as_ref().map(|l| l.identity.clone());
    let ctx = Arc::new(Context {
        client: client.clone(),
        index: Arc::clone(&index),
        settings: Arc::clone(&settings),
        applier: Applier::default(),
        events: Events::new(client.clone(), identity),
        metrics: Arc::clone(&metrics),
    });
    let feed = Feed {
        index: Arc::clone(&index),
        queue: Arc::clone(&queue),
        metrics: Arc::clone(&metrics),
        sync: Arc::new(Sync::default()),
        presets: settings.cluster_wide(),
    };
    let mut watches = JoinSet::new();
    spawn_watches(&client, &settings, &feed, &mut watches);
    let mut shutdown = std::pin::pin!(shutdown);
    // Ready once every watch listed its objects, leader or standby alike.
    let sync = Arc::clone(&feed.sync);
    let readiness = tokio::spawn(async move {
        sync.all_synced().await;
        health.set_synced();
    });

    let (mut leadership, gate) = match &settings.leader {
        Some(leader) => {
            let mut leadership = Leadership::join(client.clone(), leader).await?;
            tracing::info!(lease = %leader.lease, namespace = %leader.namespace, identity = %leader.identity, "waiting for the leader Lease");
            let gate = tokio::select! {
                acquired = leadership.acquired() => acquired?,
                () = &mut shutdown => {
                    leadership.release().await;
                    return Ok(());
                }
            };
            tracing::info!(identity = %leader.identity, "leading");
            (Some(leadership), gate)
        }
        None => (None, Gate::open()),
    };
    let mut workers = JoinSet::new();
    workers.spawn(follow(gate.clone(), Arc::clone(&index), Arc::clone(&queue), Arc::clone(&metrics), feed.presets));

    tokio::select! {
        () = feed.sync.all_synced() => {}
        () = &mut shutdown => return stop(leadership).await,
    }
    tracing::info!("every watch synced; reconciling");
    enqueue_all(&index, &queue, feed.presets);

    for _ in 0..settings.concurrency {
        workers.spawn(work(Arc::clone(&ctx), Arc::clone(&queue), gate.clone()));
    }
    workers.spawn(resync(Arc::clone(&index), Arc::clone(&queue), Arc::clone(&metrics), settings.resync, feed.presets));

    let lost = async {
        match leadership.as_mut() {
            Some(l) => l.lost().await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        () = &mut shutdown => Ok(()),
        error = lost => Err(ControllerError::Leader(error)),
        Some(ended) = watches.join_next() => Err(ControllerError::WatchEnded(ended.unwrap_or("a watch"))),
    };
    workers.abort_all();
    metrics.leader(false);
    watches.abort_all();
    readiness.abort();
    match result {
        Ok(()) => stop(leadership).await,
        Err(error) => Err(error),
    }
}

async fn stop(leadership: Option<Leadership>) -> Result<(), ControllerError> {
    if let Some(leadership) = leadership {
        leadership.release().await;
    }
    Ok(())
}

/// Enqueue every key (namespaces, and presets when `presets`).
fn enqueue_all(index: &RwLock<Index>, queue: &WorkQueue, presets: bool) {
    let keys = index.read().unwrap_or_else(std::sync::PoisonError::into_inner).all_keys();
    for key in keys.into_iter().filter(|k| presets || matches!(k, Key::Namespace(_))) {
        queue.add(key);
    }
}

/// Keep `memgate_operator_leader` equal to the gate, and enqueue every key each time it opens
/// again (what was skipped while it was closed runs then).
async fn follow(
    mut gate: Gate,
    index: Arc<RwLock<Index>>,
    queue: Arc<WorkQueue>,
    metrics: Arc<Metrics>,
    presets: bool,
) {
    let mut reopened = false;
    loop {
        gate.opened().await;
        metrics.leader(true);
        if reopened {
            enqueue_all(&index, &queue, presets);
            metrics.queue_depth(queue.depth());
        }
        gate.closed().await;
        metrics.leader(false);
        reopened = true;
    }
}

/// Reconcile `key` once within the time limit, traced.
async fn attempt(ctx: &Context, key: &Key, kind: &'static str, name: &str) -> Result<(), ReconcileError> {
    let span = telemetry::reconcile_span(kind, name);
    let attempt = tokio::time::timeout(RECONCILE_TIMEOUT, reconcile(ctx, key)).instrument(span.clone()).await;
    let result = match attempt {
        Ok(result) => result,
        Err(_) => Err(ReconcileError::Timeout(RECONCILE_TIMEOUT)),
    };
    telemetry::finish(&span, result.as_ref().err().map(ReconcileError::stage));
    result
}

/// One worker: take a key, reconcile it within the time limit while the gate is open, report.
/// A reconcile the gate closes on is dropped and started again once it opens.
async fn work(ctx: Arc<Context>, queue: Arc<WorkQueue>, mut gate: Gate) {
    loop {
        let key = queue.next().await;
        let (kind, name) = match &key {
            Key::Namespace(name) => ("namespace", name.as_str()),
            Key::Preset(name) => ("preset", name.as_str()),
        };
        let (result, started) = loop {
            gate.opened().await;
            let started = Instant::now();
            tokio::select! {
                biased;
                () = gate.closed() => tracing::debug!(key = %key, "reconcile dropped: standing down"),
                result = attempt(&ctx, &key, kind, name) => break (result, started),
            }
        };
        match &result {
            Ok(()) => tracing::debug!(key = %key, "reconciled"),
            Err(error) => {
                tracing::warn!(key = %key, stage = error.stage(), error = %error, "reconcile failed; retrying with backoff")
            }
        }
        ctx.metrics.reconciled(kind, result.as_ref().err().map(ReconcileError::stage), started.elapsed());
        queue.finish(&key, result.is_ok());
        ctx.metrics.queue_depth(queue.depth());
    }
}

/// Enqueue every key every `interval`, and keep the queue-depth gauge fresh.
async fn resync(
    index: Arc<RwLock<Index>>,
    queue: Arc<WorkQueue>,
    metrics: Arc<Metrics>,
    interval: Duration,
    presets: bool,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let keys = index.read().unwrap_or_else(std::sync::PoisonError::into_inner).all_keys();
        for key in keys.into_iter().filter(|k| presets || matches!(k, Key::Namespace(_))) {
            queue.add(key);
        }
        metrics.queue_depth(queue.depth());
    }
}
