//! A namespace's MemoryGateway over the operator's settings, rendered.

use memgate_crds::memory_gateway::MemoryGatewaySpec;

use super::*;

fn gateway_spec(value: Value) -> MemoryGatewaySpec {
    serde_json::from_value(value).expect("a MemoryGateway spec")
}

fn shaped(value: Value) -> Gateway {
    let a = spec(json!({}));
    let settings = settings().shaped_by(&gateway_spec(value));
    render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings).expect("renders")
}

fn args(gateway: &Gateway) -> Vec<String> {
    container(gateway, "gateway").args.clone().expect("args")
}

fn flag<'a>(args: &'a [String], name: &str) -> Vec<&'a str> {
    args.windows(2).filter(|w| w[0] == name).map(|w| w[1].as_str()).collect()
}

#[test]
fn the_public_url_is_what_oauth_and_the_providers_name_and_its_host_is_accepted() {
    let gateway = shaped(json!({"publicURL": "https://memory.example.com/team/"}));
    let args = args(&gateway);
    assert_eq!(flag(&args, "--public-url"), ["https://memory.example.com/team"]);
    assert!(flag(&args, "--allowed-host").contains(&"memory.example.com"));
    assert_eq!(gateway.public_url, "https://memory.example.com/team");
    // Nexent's backend stays in the cluster: its plugin keeps the Service URL.
    let defaults = shaped(json!({}));
    assert_eq!(defaults.public_url, "http://memgate-gateway.agents.svc:8080");
    assert_eq!(flag(&super::shaped::args(&defaults), "--public-url"), ["http://memgate-gateway.agents.svc:8080"]);
}

#[test]
fn replicas_resources_listener_and_log_level_override_only_what_they_name() {
    let gateway = shaped(json!({
        "replicas": 3,
        "resources": {"limits": {"memory": "1Gi"}, "requests": {"ephemeral-storage": "1Gi"}},
        "listener": {"maxInFlight": 1024, "maxConnections": 4096},
        "logLevel": "debug",
    }));
    assert_eq!(gateway.deployment.spec.replicas, Some(3));
    let serving = container(&gateway, "gateway");
    let resources = serving.resources.as_ref().expect("resources");
    let limits = resources.limits.as_ref().expect("limits");
    assert_eq!(limits["memory"].0, "1Gi");
    assert_eq!(limits["cpu"].0, "1", "the operator's CPU limit stays");
    assert_eq!(resources.requests.as_ref().expect("requests")["ephemeral-storage"].0, "1Gi");
    let args = args(&gateway);
    assert_eq!(flag(&args, "--max-in-flight"), ["1024"]);
    assert_eq!(flag(&args, "--max-connections"), ["4096"]);
    let log = serving.env.iter().flatten().find(|e| e.name == "RUST_LOG").and_then(|e| e.value.as_deref());
    assert_eq!(log, Some("debug"));
    let defaults = shaped(json!({}));
    assert!(flag(&super::shaped::args(&defaults), "--max-in-flight").is_empty(), "the gateway's own default");
}

#[test]
fn autoscaling_hands_replicas_to_an_autoscaler_unless_one_writer_must_run() {
    let gateway = shaped(json!({"autoscaling": {"minReplicas": 2, "maxReplicas": 6}}));
    assert_eq!(gateway.deployment.spec.replicas, None, "the autoscaler owns replicas");
    let hpa = gateway.horizontal_pod_autoscaler.as_ref().expect("an autoscaler");
    assert_eq!((hpa.spec.min_replicas, hpa.spec.max_replicas), (Some(2), 6));
    assert_eq!(hpa.spec.scale_target_ref.name, GATEWAY_NAME);
    let target = hpa.spec.metrics.iter().flatten().find_map(|m| m.resource.as_ref()).expect("a CPU metric");
    assert_eq!((target.name.as_str(), target.target.average_utilization), ("cpu", Some(80)));
    assert!(gateway.kinds().contains(&OwnedKind::HorizontalPodAutoscaler));
    assert!(gateway.pod_disruption_budget.is_some());

    // A provider that ingests without a shared ledger: one pod, no autoscaler.
    let ingesting = spec(json!({"nexent": {"search": true, "ingest": true}}));
    let settings = settings().shaped_by(&gateway_spec(json!({"autoscaling": {"minReplicas": 2, "maxReplicas": 6}})));
    let single =
        render(&input(vec![ServedProvider { name: "a", spec: &ingesting, preset: None }]), &settings).expect("renders");
    assert_eq!(single.deployment.spec.replicas, Some(1));
    assert!(single.horizontal_pod_autoscaler.is_none());
}

#[test]
fn the_pod_template_is_merged_but_memgate_keeps_its_labels_env_and_hardening() {
    let gateway = shaped(json!({"podTemplate": {
        "metadata": {"labels": {"team": "memory", "memgate.io/gateway": "hijack"},
                     "annotations": {"sidecar.istio.io/inject": "true"}},
        "spec": {
            "nodeSelector": {"pool": "memory"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "memory", "effect": "NoSchedule"}],
            "priorityClassName": "memory-critical",
            "env": [{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel:4318"},
                    {"name": "RUST_LOG", "value": "trace"}],
            "volumes": [{"name": "ca", "configMap": {"name": "private-ca"}}],
            "volumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/private-ca"}],
            "securityContext": {"fsGroup": 1000},
            "containerSecurityContext": {"runAsUser": 1000700000, "allowPrivilegeEscalation": true},
        },
    }}));
    let template = &gateway.deployment.spec.template;
    let labels = template.metadata.as_ref().and_then(|m| m.labels.as_ref()).expect("labels");
    assert_eq!(labels["team"], "memory");
    assert_eq!(labels[GATEWAY_POD_LABEL], GATEWAY_NAME, "the Service's label cannot be taken away");
    let annotations = template.metadata.as_ref().and_then(|m| m.annotations.as_ref()).expect("annotations");
    assert_eq!(annotations["sidecar.istio.io/inject"], "true");
    assert!(annotations.contains_key(CONFIG_HASH_ANNOTATION));
    let pod = pod(&gateway);
    assert_eq!(pod.node_selector.as_ref().expect("nodeSelector")["pool"], "memory");
    assert_eq!(pod.tolerations.as_ref().map(Vec::len), Some(1));
    assert_eq!(pod.priority_class_name.as_deref(), Some("memory-critical"));
    let security = pod.security_context.as_ref().expect("pod security context");
    assert_eq!((security.fs_group, security.run_as_non_root, security.run_as_user), (Some(1000), Some(true), None));
    assert!(security.seccomp_profile.is_some(), "RuntimeDefault stays");
    let serving = container(&gateway, "gateway");
    let env: Vec<(&str, Option<&str>)> =
        serving.env.iter().flatten().map(|e| (e.name.as_str(), e.value.as_deref())).collect();
    assert!(env.contains(&("OTEL_EXPORTER_OTLP_ENDPOINT", Some("http://otel:4318"))));
    assert_eq!(env.iter().filter(|(name, _)| *name == "RUST_LOG").count(), 1, "memgate's RUST_LOG only");
    let mount = serving.volume_mounts.iter().flatten().find(|m| m.name == "ca").expect("the CA mount");
    assert_eq!(mount.read_only, Some(true));
    assert!(pod.volumes.iter().flatten().any(|v| v.name == "ca"));
    let context = serving.security_context.as_ref().expect("container security context");
    assert_eq!(context.run_as_user, Some(1000700000));
    assert_eq!(context.allow_privilege_escalation, Some(false), "memgate's hardening wins");
    assert_eq!(context.read_only_root_filesystem, Some(true));
}

#[test]
fn network_policy_and_disruption_budget_follow_the_gateway_resource() {
    let gateway = shaped(json!({
        "networkPolicy": {"enabled": true, "allowedNamespaces": ["tenants"],
                          "allowedPods": [{"matchLabels": {"memgate.io/client": "true"}}]},
        "podDisruptionBudget": {"enabled": false},
    }));
    let policy = gateway.network_policy.as_ref().expect("a NetworkPolicy");
    let peers = policy.spec.as_ref().and_then(|s| s.ingress.as_ref()).expect("ingress")[0].from.clone().expect("from");
    let namespaces = peers[0].namespace_selector.as_ref().and_then(|s| s.match_expressions.as_ref()).expect("names");
    assert_eq!(namespaces[0].values.as_deref(), Some(&["agents".to_string(), "tenants".to_string()][..]));
    assert_eq!(peers[1].namespace_selector, Some(Default::default()), "the pods of any namespace");
    let pods = peers[1].pod_selector.as_ref().and_then(|s| s.match_labels.as_ref()).expect("pod labels");
    assert_eq!(pods["memgate.io/client"], "true");
    assert!(gateway.pod_disruption_budget.is_none(), "turned off");
}

#[test]
fn audit_events_go_to_standard_output_only_when_the_operator_says_so() {
    let off = render(&input(vec![ServedProvider { name: "a", spec: &spec(json!({})), preset: None }]), &settings())
        .expect("renders");
    assert!(flag(&args(&off), "--audit-log").is_empty(), "off by default");
    let mut on = settings();
    on.audit_log = crate::settings::gateway::AuditLog::Stdout;
    let audited =
        render(&input(vec![ServedProvider { name: "a", spec: &spec(json!({})), preset: None }]), &on).expect("renders");
    assert_eq!(flag(&args(&audited), "--audit-log"), ["-"]);
}

#[test]
fn pass_through_flags_reach_the_gateway_and_the_gateway_parser_accepts_every_rendered_argument() {
    use clap::Args;
    use memgate_gateway::serve_args::ServeArgs;

    let mut settings = settings();
    settings.serve_flags = crate::settings::ServeFlags::parse(&[
        "max-held-response-bytes=67108864".to_string(),
        "write-timeout-ms=20000".to_string(),
    ])
    .expect("valid pass-through flags");
    settings.listener = crate::settings::Listener { max_in_flight: Some(512), max_connections: Some(2048) };
    settings.audit_log = crate::settings::gateway::AuditLog::Stdout;
    let a = spec(json!({}));
    let gateway =
        render(&input(vec![ServedProvider { name: "a", spec: &a, preset: None }]), &settings).expect("renders");
    let args = args(&gateway);
    assert_eq!(flag(&args, "--max-held-response-bytes"), ["67108864"]);
    assert_eq!(flag(&args, "--write-timeout-ms"), ["20000"]);

    // The whole command line is one the gateway accepts, so no setting crash-loops a gateway.
    let command = ServeArgs::augment_args(clap::Command::new("serve"));
    let matches = command.try_get_matches_from(&args);
    assert!(matches.is_ok(), "{args:?}: {matches:?}");
    // What the operator renders itself is exactly what it refuses to pass through.
    let passed: Vec<String> = settings.serve_flags.args();
    let rendered_by_operator: BTreeSet<&str> =
        args.iter().filter(|a| !passed.contains(a)).filter_map(|a| a.strip_prefix("--")).collect();
    let refused: BTreeSet<&str> = crate::settings::serve_flags::NOT_PASSED_THROUGH
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| !["kubeconfig", "ledger-ca-file", "audit-query-digest-key-file"].contains(name))
        .collect();
    assert_eq!(rendered_by_operator, refused);
}
