//! Rendering, tested on plain values: what a namespace's gateway is made of.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use memgate_crds::manifest::documents;
use memgate_crds::{DialectPresetSpec, MemoryProviderSpec};
use serde_json::{Value, json};

use super::*;
use crate::settings::{LedgerSecret, Listener, Resources};

fn settings() -> GatewaySettings {
    GatewaySettings {
        image: "registry.example/memgate:1".into(),
        image_pull_policy: "IfNotPresent".into(),
        replicas: 2,
        port: 8080,
        admin_port: 9090,
        resources: Resources {
            requests: BTreeMap::from([("cpu".into(), "50m".into()), ("memory".into(), "64Mi".into())]),
            limits: BTreeMap::from([("cpu".into(), "1".into()), ("memory".into(), "512Mi".into())]),
        },
        extra_allowed_hosts: vec!["memory.internal".into()],
        ledger: None,
        search_enabled: true,
        ingest_enabled: false,
        log_level: "info".into(),
        audit_log: Default::default(),
        network_policy: false,
        network_policy_namespaces: BTreeSet::new(),
        pod_disruption_budget: true,
        image_pull_secrets: Vec::new(),
        default_plugin_claim: "nexent-memory-plugins".into(),
        token_review_cluster_role: "memgate-gateway-token-review".into(),
        listener: Listener::default(),
        serve_flags: Default::default(),
        public_url: None,
        autoscaling: None,
        pod_template: Default::default(),
        network_policy_pods: Vec::new(),
    }
}

fn spec(extra: Value) -> MemoryProviderSpec {
    let mut value = json!({
        "dialect": {"builtin": "mem0-oss-rest-2026-08"},
        "endpoint": {"origin": "http://mem0.memory.svc:8888", "allowInsecureHttp": true},
        "credentials": {"secretRef": {"name": "mem0-api", "key": "api-key"}},
        "scope": {"userId": "repository-memory", "agentId": "qwen-code"},
        "access": {"anonymous": true},
    });
    if let (Some(base), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    serde_json::from_value(value).expect("valid spec")
}

fn preset() -> DialectPresetSpec {
    serde_json::from_value(json!({"dialectVersion": 1, "auth": "authorization-bearer",
        "search": {"method": "GET", "path": "/search", "queryLocation": "query", "userIdLocation": "query",
                   "agentIdLocation": "omit", "appIdLocation": "omit", "limitField": "limit"},
        "response": {"collection": "root-array", "idField": "id", "contentField": "text", "titleField": "omit",
                     "uriField": "omit", "scoreField": "omit", "updatedAtField": "omit"}}))
    .expect("preset")
}

fn input<'a>(served: Vec<ServedProvider<'a>>) -> GatewayInput<'a> {
    GatewayInput { namespace: "agents", served, owners: Vec::new(), ledger_available: false }
}

fn pod(gateway: &Gateway) -> &PodSpec {
    gateway.deployment.spec.template.spec.as_ref().expect("pod spec")
}

fn container<'a>(gateway: &'a Gateway, name: &str) -> &'a Container {
    let pod = pod(gateway);
    pod.containers.iter().chain(pod.init_containers.iter().flatten()).find(|c| c.name == name).expect(name)
}

#[test]
fn config_holds_the_served_providers_and_secret_mounts_but_no_value() {
    let a = spec(json!({}));
    let b = spec(json!({"access": {"bearerToken": {"secretRef": {"name": "callers", "key": "nexent"}}}}));
    let gateway = render(
        &input(vec![
            ServedProvider { name: "a", spec: &a, preset: None },
            ServedProvider { name: "b", spec: &b, preset: None },
        ]),
        &settings(),
    )
    .expect("renders");
    let text = &gateway.config_map.data.as_ref().expect("data")[CONFIG_KEY];
    let docs = documents(text).expect("the gateway can parse it");
    let kinds: Vec<(&str, &str)> = docs
        .iter()
        .map(|(_, d)| (d["kind"].as_str().unwrap_or(""), d["metadata"]["name"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        kinds,
        [("MemoryProvider", "a"), ("MemoryProvider", "b"), ("SecretMount", "callers"), ("SecretMount", "mem0-api")]
    );
    assert_eq!(docs[3].1["path"], "../secrets/mem0-api");
    assert_eq!(docs[0].1["metadata"], json!({"name": "a", "namespace": "agents"}), "no uid, status or managedFields");
}

#[test]
fn each_secret_is_mounted_read_only_with_only_the_referenced_keys() {
    let a = spec(json!({"access": {"bearerToken": {"secretRef": {"name": "mem0-api", "key": "caller"}}}}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let volumes = pod(&gateway).volumes.as_ref().expect("volumes");
    let secret = volumes.iter().find_map(|v| v.secret.as_ref()).expect("a Secret volume");
    assert_eq!(secret.secret_name.as_deref(), Some("mem0-api"));
    let keys: Vec<&str> = secret.items.iter().flatten().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["api-key", "caller"]);
    let mounts = container(&gateway, "gateway").volume_mounts.as_ref().expect("mounts");
    let mount = mounts.iter().find(|m| m.mount_path == "/etc/memgate/secrets/mem0-api").expect("mounted");
    assert_eq!(mount.read_only, Some(true));
    assert!(mounts.iter().all(|m| m.read_only == Some(true)));
}

#[test]
fn serve_args_allow_every_in_cluster_name_and_the_extras() {
    let a = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let args = container(&gateway, "gateway").args.clone().expect("args");
    let hosts: Vec<&str> = args.windows(2).filter(|w| w[0] == "--allowed-host").map(|w| w[1].as_str()).collect();
    assert_eq!(
        hosts,
        [
            "memgate-gateway",
            "memgate-gateway.agents",
            "memgate-gateway.agents.svc",
            "memgate-gateway.agents.svc.cluster.local",
            "memory.internal"
        ]
    );
    assert_eq!(&args[..5], ["serve", "--config", CONFIG_DIR, "--listen", "0.0.0.0:8080"]);
}

#[test]
fn pods_are_locked_down_and_probed() {
    let a = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let pod = pod(&gateway);
    let security = pod.security_context.as_ref().expect("pod security");
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(security.seccomp_profile.as_ref().map(|p| p.type_.as_str()), Some("RuntimeDefault"));
    assert_eq!(pod.automount_service_account_token, Some(false), "no token without ServiceAccount callers");
    let c = container(&gateway, "gateway");
    let cs = c.security_context.as_ref().expect("container security");
    assert_eq!((cs.allow_privilege_escalation, cs.read_only_root_filesystem), (Some(false), Some(true)));
    assert_eq!(cs.capabilities.as_ref().and_then(|c| c.drop.clone()), Some(vec!["ALL".to_string()]));
    let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone())
    };
    assert_eq!(path(&c.liveness_probe).as_deref(), Some("/healthz"));
    assert_eq!(path(&c.readiness_probe).as_deref(), Some("/readyz"));
    let resources = c.resources.as_ref().expect("resources");
    assert!(resources.requests.is_some() && resources.limits.is_some());
    assert!(gateway.binding.is_none());
}

#[test]
fn service_account_callers_get_the_token_and_only_the_auth_delegator_binding() {
    let a = spec(json!({"access": {"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": "agents"}]}}}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let binding = gateway.binding.as_ref().expect("binding");
    assert_eq!(
        binding.role_ref.name, "memgate-gateway-token-review",
        "tokenreviews: create only, not system:auth-delegator"
    );
    assert_eq!(binding.metadata.name.as_deref(), Some("memgate-gateway-agents"));
    let subjects = binding.subjects.as_ref().expect("subjects");
    assert_eq!((subjects[0].name.as_str(), subjects[0].namespace.as_deref()), ("memgate-gateway", Some("agents")));
    assert_eq!(pod(&gateway).automount_service_account_token, Some(true));
}

#[test]
fn offline_service_account_verification_gets_the_token_but_no_token_review_binding() {
    let a = spec(json!({"access": {"serviceAccounts": {"audience": "memgate", "verification": "jwks",
        "allowed": [{"namespace": "agents"}]}}}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    assert!(gateway.binding.is_none(), "jwks verification reads public keys only: no TokenReview binding");
    assert_eq!(pod(&gateway).automount_service_account_token, Some(true));
    // One provider reviewing tokens is enough for the binding.
    let b = spec(json!({"access": {"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": "agents"}]}}}));
    let both = render(
        &input(vec![
            ServedProvider { name: "a", spec: &a, preset: None },
            ServedProvider { name: "b", spec: &b, preset: None },
        ]),
        &settings(),
    )
    .expect("renders");
    assert!(both.binding.is_some());
}

#[test]
fn serve_args_name_the_public_url_tenants_use() {
    let a = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let args = container(&gateway, "gateway").args.clone().unwrap_or_default();
    let at = args.iter().position(|a| a == "--public-url").expect("--public-url");
    assert_eq!(args[at + 1], "http://memgate-gateway.agents.svc:8080");
}

#[test]
fn probes_and_scrapes_use_the_admin_port_which_the_service_never_exposes() {
    let a = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let serving = container(&gateway, "gateway");
    let args = serving.args.clone().unwrap_or_default();
    let at = args.iter().position(|a| a == "--admin-listen").expect("--admin-listen");
    assert_eq!(args[at + 1], "0.0.0.0:9090");
    let ports: Vec<(Option<String>, i32)> =
        serving.ports.iter().flatten().map(|p| (p.name.clone(), p.container_port)).collect();
    assert_eq!(ports, [(Some("http".into()), 8080), (Some("admin".into()), 9090)]);
    for probe in [&serving.readiness_probe, &serving.liveness_probe] {
        let port = probe.as_ref().and_then(|p| p.http_get.as_ref()).map(|g| g.port.clone());
        assert_eq!(port, Some(IntOrString::String("admin".into())));
    }
    let annotations = pod_template_annotations(&gateway);
    assert_eq!(annotations.get("prometheus.io/port").map(String::as_str), Some("9090"));
    let service_ports: Vec<i32> =
        gateway.service.spec.iter().flat_map(|s| s.ports.iter().flatten()).map(|p| p.port).collect();
    assert_eq!(service_ports, [8080]);
}

#[test]
fn the_pod_grace_period_outlasts_the_gateway_drain() {
    let a = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings()).expect("renders");
    let args = container(&gateway, "gateway").args.clone().unwrap_or_default();
    let at = args.iter().position(|a| a == "--shutdown-timeout-ms").expect("--shutdown-timeout-ms");
    let drain_ms: i64 = args[at + 1].parse().expect("a number");
    let grace = pod(&gateway).termination_grace_period_seconds.expect("grace period");
    assert!(grace * 1000 > drain_ms, "grace {grace}s must outlast the {drain_ms}ms drain");
}

fn pod_template_annotations(gateway: &Gateway) -> BTreeMap<String, String> {
    gateway.deployment.spec.template.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default()
}

#[test]
fn nexent_claims_get_their_own_init_container_and_config() {
    let a = spec(json!({"nexent": {"search": true}}));
    let b = spec(json!({"nexent": {"search": true, "pluginClaim": "other-plugins"}}));
    let c = spec(json!({}));
    let gateway = render(
        &input(vec![
            ServedProvider { name: "a", spec: &a, preset: None },
            ServedProvider { name: "b", spec: &b, preset: None },
            ServedProvider { name: "c", spec: &c, preset: None },
        ]),
        &settings(),
    )
    .expect("renders");
    let data = gateway.config_map.data.as_ref().expect("data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["gateway.yaml", "nexent-0.yaml", "nexent-1.yaml"]);
    let names = |key: &str| -> Vec<String> {
        documents(&data[key])
            .expect("yaml")
            .iter()
            .filter(|(_, d)| d["kind"] == "MemoryProvider")
            .map(|(_, d)| d["metadata"]["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names("nexent-0.yaml"), ["a"], "nexent-memory-plugins sorts first");
    assert_eq!(names("nexent-1.yaml"), ["b"]);
    let init = container(&gateway, "nexent-plugins-0");
    let args = init.args.clone().expect("args");
    assert_eq!(
        args,
        [
            "write-nexent-plugins",
            "--config",
            "/etc/memgate/nexent-0",
            "--dest",
            "/var/lib/memgate/plugins-0",
            "--gateway-url",
            "http://memgate-gateway.agents.svc:8080"
        ]
    );
    let claims: Vec<&str> = pod(&gateway)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect();
    assert_eq!(claims, ["nexent-memory-plugins", "other-plugins"]);
}

#[test]
fn ingest_without_a_shared_ledger_runs_one_replica_and_never_two_pods_at_once() {
    let a = spec(json!({"nexent": {"search": true, "ingest": true}}));
    let served = || vec![ServedProvider { name: "a", spec: &a, preset: None }];
    let gateway = render(&input(served()), &settings()).expect("renders");
    assert_eq!(gateway.replicas, 1);
    assert_eq!(gateway.deployment.spec.replicas, Some(1));
    assert_eq!(gateway.deployment.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()), Some("Recreate"));
    assert!(gateway.replica_note.as_deref().is_some_and(|n| n.contains("--gateway-ledger-secret")));

    let mut with_ledger = settings();
    with_ledger.ledger = Some(LedgerSecret { name: "memgate-ledger".into(), key: "url".into() });
    let shared = GatewayInput { ledger_available: true, ..input(served()) };
    let gateway = render(&shared, &with_ledger).expect("renders");
    assert_eq!(gateway.replicas, 2);
    let strategy = gateway.deployment.spec.strategy.clone().expect("an explicit strategy");
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert!(strategy.rolling_update.is_some(), "owned by the operator, so a switch to Recreate can drop it");
    let env = container(&gateway, "gateway").env.clone().expect("env");
    let ledger = env.iter().find(|e| e.name == "MEMGATE_INGEST_LEDGER").expect("ledger env");
    assert!(ledger.value.is_none(), "the URL is never rendered: only its Secret reference");
    let selector = ledger.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()).expect("secretKeyRef");
    assert_eq!((selector.name.as_str(), selector.key.as_str()), ("memgate-ledger", "url"));

    let missing = GatewayInput { ledger_available: false, ..input(served()) };
    let gateway = render(&missing, &with_ledger).expect("renders");
    assert_eq!(gateway.replicas, 1);
    assert!(gateway.replica_note.as_deref().is_some_and(|n| n.contains("memgate-ledger")));
}

#[test]
fn rate_limits_share_the_redis_store_even_without_ingest() {
    let mut with_ledger = settings();
    with_ledger.ledger = Some(LedgerSecret { name: "memgate-ledger".into(), key: "url".into() });
    let has_ledger_env = |limits: Value| {
        let a = spec(json!({"nexent": {"search": true}, "limits": limits}));
        let shared = GatewayInput {
            ledger_available: true,
            ..input(vec![ServedProvider { name: "a", spec: &a, preset: None }])
        };
        let gateway = render(&shared, &with_ledger).expect("renders");
        assert_eq!(gateway.replicas, 2, "search only: never pinned to one replica");
        container(&gateway, "gateway").env.clone().expect("env").iter().any(|e| e.name == "MEMGATE_INGEST_LEDGER")
    };
    assert!(has_ledger_env(json!({"perCaller": {"requestsPerMinute": 60}})));
    assert!(has_ledger_env(json!({"upstream": {"requestsPerSecond": 5}})));
    assert!(!has_ledger_env(json!({"upstream": {"maxInFlight": 4}})), "per replica: nothing to share");
    assert!(!has_ledger_env(json!({})));
}

#[test]
fn config_hash_follows_the_config_and_the_mounted_set_only() {
    let a = spec(json!({}));
    let render_with = |s: &MemoryProviderSpec| {
        render(&input(vec![ServedProvider { name: "a", spec: s, preset: None }]), &settings()).expect("renders")
    };
    let first = render_with(&a);
    assert_eq!(first, render_with(&a), "rendering is deterministic");
    let annotation = |g: &Gateway| {
        g.deployment.spec.template.metadata.as_ref().and_then(|m| m.annotations.clone()).unwrap_or_default()
            [CONFIG_HASH_ANNOTATION]
            .clone()
    };
    assert_eq!(annotation(&first), first.config_hash);
    let changed = render_with(&spec(json!({"scope": {"userId": "other", "agentId": "qwen-code"}})));
    assert_ne!(changed.config_hash, first.config_hash);
}

#[test]
fn preset_providers_carry_their_dialect_into_the_config() {
    let preset = preset();
    let a = spec(json!({"dialect": {"presetRef": "team-search"}, "scope": {"userId": "u"}}));
    let gateway = render(
        &input(vec![ServedProvider { name: "a", spec: &a, preset: Some(("team-search", &preset)) }]),
        &settings(),
    )
    .expect("renders");
    let text = &gateway.config_map.data.as_ref().expect("data")[CONFIG_KEY];
    let docs = documents(text).expect("yaml");
    assert_eq!(docs[0].1["kind"], "DialectPreset");
    assert_eq!(docs[0].1["metadata"], json!({"name": "team-search"}));
}

#[test]
fn nothing_served_renders_an_empty_config_the_gateway_accepts() {
    let gateway = render(&input(Vec::new()), &settings()).expect("renders");
    let text = &gateway.config_map.data.as_ref().expect("data")[CONFIG_KEY];
    assert!(documents(text).expect("yaml").is_empty());
    assert_eq!(gateway.config_map.data.as_ref().map(BTreeMap::len), Some(1));
}

#[test]
fn network_policy_admits_only_the_own_and_listed_namespaces_to_both_ports() {
    let a = spec(json!({}));
    let served = || vec![ServedProvider { name: "a", spec: &a, preset: None }];
    assert!(render(&input(served()), &settings()).expect("renders").network_policy.is_none(), "off by default");
    let mut with_policy = settings();
    with_policy.network_policy = true;
    with_policy.network_policy_namespaces = ["monitoring", "agents", "ingress"].map(String::from).into();
    let gateway = render(&input(served()), &with_policy).expect("renders");
    let policy = gateway.network_policy.expect("a NetworkPolicy");
    assert_eq!(policy.metadata.name.as_deref(), Some(GATEWAY_NAME));
    assert_eq!(policy.metadata.namespace.as_deref(), Some("agents"));
    assert_eq!(policy.metadata.labels, Some(labels("agents")));
    let spec = serde_json::to_value(policy.spec.expect("spec")).expect("json");
    assert_eq!(
        spec,
        json!({
            "podSelector": {"matchLabels": selector_labels()},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In",
                    "values": ["agents", "ingress", "monitoring"],
                }]}}],
                "ports": [{"protocol": "TCP", "port": 8080}, {"protocol": "TCP", "port": 9090}],
            }],
        }),
        "own namespace included once, sorted; serving and admin port only"
    );
    assert_eq!(
        gateway.deployment.spec.selector.match_labels,
        Some(selector_labels()),
        "the policy selects exactly the Deployment's pods"
    );
}

#[test]
fn network_policy_without_listed_namespaces_admits_the_own_namespace() {
    let a = spec(json!({}));
    let mut with_policy = settings();
    with_policy.network_policy = true;
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &with_policy).expect("renders");
    let spec = serde_json::to_value(gateway.network_policy.and_then(|p| p.spec)).expect("json");
    assert_eq!(spec.pointer("/ingress/0/from/0/namespaceSelector/matchExpressions/0/values"), Some(&json!(["agents"])));
}

#[test]
fn disruption_budget_only_for_more_than_one_replica_and_when_enabled() {
    let search = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &search, preset: None }]), &settings()).expect("renders");
    assert_eq!(gateway.replicas, 2);
    let budget = gateway.pod_disruption_budget.expect("a PodDisruptionBudget for 2 replicas");
    assert_eq!(budget.metadata.name.as_deref(), Some(GATEWAY_NAME));
    let budget_spec = budget.spec.expect("spec");
    assert_eq!(budget_spec.max_unavailable, Some(IntOrString::Int(1)));
    assert!(budget_spec.min_available.is_none());
    assert_eq!(
        budget_spec.selector.and_then(|s| s.match_labels),
        gateway.deployment.spec.selector.match_labels,
        "the Deployment's pods"
    );
    assert_eq!(budget_spec.unhealthy_pod_eviction_policy.as_deref(), Some("AlwaysAllow"));

    let ingest = spec(json!({"nexent": {"search": true, "ingest": true}}));
    let single =
        render(&input(vec![ServedProvider { name: "a", spec: &ingest, preset: None }]), &settings()).expect("renders");
    assert_eq!(single.replicas, 1);
    assert!(single.pod_disruption_budget.is_none(), "one replica: no budget");

    let mut off = settings();
    off.pod_disruption_budget = false;
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &search, preset: None }]), &off).expect("renders");
    assert!(gateway.pod_disruption_budget.is_none(), "turned off");
}

#[test]
fn image_pull_secrets_are_named_in_the_pod_spec() {
    let a = spec(json!({}));
    let served = || vec![ServedProvider { name: "a", spec: &a, preset: None }];
    assert!(pod(&render(&input(served()), &settings()).expect("renders")).image_pull_secrets.is_none());
    let mut with_secrets = settings();
    with_secrets.image_pull_secrets = vec!["regcred".into(), "mirror".into()];
    let gateway = render(&input(served()), &with_secrets).expect("renders");
    let names: Vec<&str> = pod(&gateway).image_pull_secrets.iter().flatten().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["regcred", "mirror"]);
}

#[test]
fn an_unnamed_plugin_claim_is_the_configured_default_and_a_named_one_wins() {
    let unnamed = spec(json!({"nexent": {"search": true}}));
    let named = spec(json!({"nexent": {"search": true, "pluginClaim": "own-plugins"}}));
    let mut team = settings();
    team.default_plugin_claim = "team-plugins".into();
    let gateway = render(
        &input(vec![
            ServedProvider { name: "a", spec: &unnamed, preset: None },
            ServedProvider { name: "b", spec: &named, preset: None },
        ]),
        &team,
    )
    .expect("renders");
    let claims: Vec<&str> = pod(&gateway)
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
        .collect();
    assert_eq!(claims, ["own-plugins", "team-plugins"]);
    let text = &gateway.config_map.data.as_ref().expect("data")["nexent-1.yaml"];
    assert!(text.contains("name: a\n"), "provider a writes into the default claim:\n{text}");
    assert!(!text.contains("pluginClaim"), "the spec is rendered as written, not defaulted");
}

#[test]
fn the_service_selects_pods_by_memgate_own_label_and_the_gateway_runs_as_a_cluster_pod() {
    let gateway = render(&input(vec![ServedProvider { name: "p", spec: &spec(json!({})), preset: None }]), &settings())
        .expect("renders");
    let selector = gateway.service.spec.as_ref().and_then(|s| s.selector.clone()).expect("selector");
    assert_eq!(selector.get(GATEWAY_POD_LABEL).map(String::as_str), Some(GATEWAY_NAME), "{selector:?}");
    let pod_labels = gateway.deployment.spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).expect("labels");
    assert!(selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)), "the pods carry every selected label");
    assert_eq!(
        gateway.deployment.spec.selector.match_labels,
        Some(selector_labels()),
        "the Deployment selector is unchanged"
    );
    let args = container(&gateway, "gateway").args.clone().unwrap_or_default();
    assert!(args.windows(2).any(|w| w == ["--placement", "cluster"]), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--gateway-id", "agents/memgate-gateway"]), "{args:?}");
}

mod shaped;
