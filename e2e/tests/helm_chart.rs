//! The Helm chart (`charts/memgate`) checked with the pinned helm binary (`MEMGATE_HELM`, from
//! `e2e/helm/provide.sh`; the tests fail, never skip, without it) and a real kube-apiserver:
//! strict lint; the default rendering (objects, names, the operator's command, environment, probes
//! and security context); every toggle of `ci/all-toggles-values.yaml` reaching the environment or
//! the objects; wrong values refused by `values.schema.json` naming the field; the chart's CRD and
//! RBAC copies equal to the files they copy; every value documented in the chart README; and the
//! default rendering, CRDs included, applied by server-side apply (`dryRun=All` first, then for
//! real), read back, and granting the operator's ServiceAccount its rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use memgate_e2e::{ControlPlane, Error, Helm, apply_manifest, describe, get_object, split_manifest};
use serde_json::{Value, json};

const RELEASE: &str = "memgate";
const NAMESPACE: &str = "memgate-system";

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative)
}

fn chart() -> PathBuf {
    repo("charts/memgate")
}

fn read(relative: &str) -> Result<String> {
    let path = repo(relative);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

fn all_toggles() -> PathBuf {
    chart().join("ci/all-toggles-values.yaml")
}

fn helm() -> Result<Helm> {
    Helm::from_env().context("the chart checks need helm (they never skip)")
}

fn render(values_files: &[&Path], set: &[(&str, &str)]) -> Result<Vec<Value>> {
    let text = helm()?.template(&chart(), RELEASE, NAMESPACE, values_files, set, false)?;
    Ok(split_manifest(&text)?)
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Result<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .with_context(|| format!("no {kind}/{name} among {:?}", objects.iter().map(describe).collect::<Vec<_>>()))
}

fn kinds_and_names(objects: &[Value]) -> BTreeSet<String> {
    objects.iter().map(describe).collect()
}

/// The operator container of the Deployment.
fn operator_container(objects: &[Value], deployment: &str) -> Result<Value> {
    let deployment = find(objects, "Deployment", deployment)?;
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().context("containers")?;
    ensure!(containers.len() == 1, "one container expected: {containers:?}");
    Ok(containers[0].clone())
}

/// `name -> value` of the container's environment (`valueFrom` entries as their JSON).
fn env_of(container: &Value) -> Result<BTreeMap<String, Value>> {
    let mut env = BTreeMap::new();
    for entry in container["env"].as_array().context("env")? {
        let name = entry["name"].as_str().context("env name")?.to_owned();
        let value = entry.get("value").cloned().or_else(|| entry.get("valueFrom").cloned()).unwrap_or(Value::Null);
        ensure!(env.insert(name.clone(), value).is_none(), "{name} is set twice");
    }
    Ok(env)
}

fn env_str<'a>(env: &'a BTreeMap<String, Value>, name: &str) -> Result<&'a str> {
    env.get(name).and_then(Value::as_str).with_context(|| format!("{name} not set as a plain value: {env:?}"))
}

/// The environment variable of every `memgate-operator run` flag, asked of clap itself.
fn operator_env_names() -> Result<BTreeSet<String>> {
    use clap::Args;
    let command = memgate_operator::settings::RunArgs::augment_args(clap::Command::new("run"));
    let names: BTreeSet<String> =
        command.get_arguments().filter_map(|arg| arg.get_env()).map(|env| env.to_string_lossy().into_owned()).collect();
    ensure!(names.len() > 10, "too few flags with an environment variable: {names:?}");
    Ok(names)
}

/// The text helm printed for a failed render.
fn refusal(set: &[(&str, &str)]) -> Result<String> {
    match helm()?.template(&chart(), RELEASE, NAMESPACE, &[], set, false) {
        Ok(_) => bail!("helm rendered the chart with {set:?}; the values should have been refused"),
        Err(error @ Error::Helm { .. }) => Ok(error.to_string()),
        Err(other) => Err(other).context("running helm"),
    }
}

#[test]
fn helm_is_the_pinned_version() -> Result<()> {
    let pinned = read("e2e/helm/versions.env")?;
    let version = pinned
        .lines()
        .find_map(|l| l.strip_prefix("HELM_VERSION="))
        .context("HELM_VERSION in e2e/helm/versions.env")?
        .trim();
    assert_eq!(helm()?.version()?, format!("v{version}"));
    Ok(())
}

#[test]
fn chart_metadata_follows_the_workspace_version() -> Result<()> {
    let meta: Value = serde_saphyr::from_str(&read("charts/memgate/Chart.yaml")?)?;
    assert_eq!(meta["apiVersion"], "v2", "Helm 3 and 4 chart format");
    assert_eq!(meta["name"], "memgate");
    assert_eq!(meta["version"], "0.1.0");
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"), "appVersion is the Cargo workspace version");
    Ok(())
}

#[test]
fn lint_is_clean_in_strict_mode_with_default_and_all_toggled_values() -> Result<()> {
    let helm = helm()?;
    for files in [vec![], vec![all_toggles()]] {
        let files: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
        let report = helm.lint(&chart(), &files, &[], true)?;
        assert!(report.contains("0 chart(s) failed"), "{report}");
        assert!(!report.contains("[WARNING]") && !report.contains("[ERROR]"), "{report}");
    }
    Ok(())
}

#[test]
fn default_values_render_the_operator_its_access_and_metrics_service() -> Result<()> {
    let objects = render(&[], &[])?;
    let expected: BTreeSet<String> = [
        "ServiceAccount/memgate-system/memgate-operator",
        "ClusterRole/memgate-operator",
        "ClusterRoleBinding/memgate-operator",
        // Watching every namespace: its Secret rights everywhere.
        "ClusterRole/memgate-operator-credentials",
        "ClusterRoleBinding/memgate-operator-credentials",
        "ClusterRole/memgate-gateway-token-review",
        "Role/memgate-system/memgate-operator-leader-election",
        "RoleBinding/memgate-system/memgate-operator-leader-election",
        "Service/memgate-system/memgate-operator-metrics",
        "Deployment/memgate-system/memgate-operator",
        // Two replicas: a drain never takes both.
        "PodDisruptionBudget/memgate-system/memgate-operator",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(kinds_and_names(&objects), expected);

    let version = env!("CARGO_PKG_VERSION");
    for object in &objects {
        let labels = &object["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/name"], "memgate", "{}", describe(object));
        assert_eq!(labels["app.kubernetes.io/instance"], RELEASE, "{}", describe(object));
        assert_eq!(labels["app.kubernetes.io/version"], version, "{}", describe(object));
        assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm", "{}", describe(object));
        assert_eq!(labels["helm.sh/chart"], format!("memgate-{version}"), "{}", describe(object));
    }

    let deployment = find(&objects, "Deployment", "memgate-operator")?;
    assert_eq!(deployment["spec"]["replicas"], 2, "two replicas, one leader");
    let pod = &deployment["spec"]["template"];
    let selector = &deployment["spec"]["selector"]["matchLabels"];
    for (key, value) in selector.as_object().context("selector")? {
        assert_eq!(&pod["metadata"]["labels"][key], value, "the pod template carries selector label {key}");
    }
    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "8081");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "memgate-operator");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert_eq!(spec["securityContext"]["runAsUser"], 65532);
    assert_eq!(spec["securityContext"]["runAsGroup"], 65532);
    assert_eq!(spec["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    assert!(spec.get("imagePullSecrets").is_none(), "no pull secrets by default");

    let container = operator_container(&objects, "memgate-operator")?;
    assert_eq!(container["image"], format!("memgate:{version}"), "the tag defaults to appVersion");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    assert_eq!(container["command"], json!(["/usr/local/bin/memgate-operator"]));
    assert_eq!(container["args"], json!(["run"]));
    let security = &container["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["runAsUser"], 65532);
    assert_eq!(security["runAsGroup"], 65532);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");
    assert!(
        container["resources"]["requests"]["cpu"].is_string() && container["resources"]["limits"]["memory"].is_string()
    );
    assert_eq!(container["ports"], json!([{"name": "http-metrics", "containerPort": 8081, "protocol": "TCP"}]));
    assert_eq!(container["livenessProbe"]["httpGet"], json!({"path": "/healthz", "port": "http-metrics"}));
    assert_eq!(container["readinessProbe"]["httpGet"], json!({"path": "/readyz", "port": "http-metrics"}));

    let env = env_of(&container)?;
    assert_eq!(env["POD_NAMESPACE"], json!({"fieldRef": {"fieldPath": "metadata.namespace"}}));
    assert_eq!(env["POD_NAME"], json!({"fieldRef": {"fieldPath": "metadata.name"}}));
    let expected_env = [
        ("RUST_LOG", "info"),
        ("MEMGATE_LEADER_ELECTION", "true"),
        ("MEMGATE_LEADER_ELECTION_LEASE", "memgate-operator"),
        ("MEMGATE_LEASE_DURATION_SECONDS", "15"),
        ("MEMGATE_LEASE_GRACE_SECONDS", "5"),
        ("MEMGATE_OPERATOR_LISTEN", "0.0.0.0:8081"),
        ("MEMGATE_RESYNC_SECONDS", "300"),
        ("MEMGATE_CONCURRENCY", "4"),
        ("MEMGATE_GATEWAY_SEARCH_ENABLED", "true"),
        ("MEMGATE_GATEWAY_INGEST_ENABLED", "true"),
        ("MEMGATE_GATEWAY_IMAGE", &format!("memgate:{version}")),
        ("MEMGATE_GATEWAY_IMAGE_PULL_POLICY", "IfNotPresent"),
        ("MEMGATE_GATEWAY_REPLICAS", "2"),
        ("MEMGATE_GATEWAY_PORT", "8080"),
        ("MEMGATE_GATEWAY_ADMIN_PORT", "9090"),
        ("MEMGATE_GATEWAY_LOG_LEVEL", "info"),
        ("MEMGATE_GATEWAY_CPU_REQUEST", "50m"),
        ("MEMGATE_GATEWAY_MEMORY_REQUEST", "64Mi"),
        ("MEMGATE_GATEWAY_CPU_LIMIT", "1"),
        ("MEMGATE_GATEWAY_MEMORY_LIMIT", "512Mi"),
        ("MEMGATE_GATEWAY_NETWORK_POLICY", "false"),
        ("MEMGATE_GATEWAY_POD_DISRUPTION_BUDGET", "true"),
        ("MEMGATE_GATEWAY_DEFAULT_PLUGIN_CLAIM", "nexent-memory-plugins"),
        ("MEMGATE_GATEWAY_TOKEN_REVIEW_CLUSTER_ROLE", "memgate-gateway-token-review"),
        ("MEMGATE_GATEWAY_AUDIT_LOG", "off"),
    ];
    for (name, value) in expected_env {
        assert_eq!(env_str(&env, name)?, value, "{name}");
    }
    // Optional settings stay unset (an empty value would be an invalid flag value, not "none").
    for name in [
        "MEMGATE_WATCH_NAMESPACES",
        "MEMGATE_GATEWAY_IMAGE_PULL_SECRETS",
        "MEMGATE_GATEWAY_EXTRA_ALLOWED_HOSTS",
        "MEMGATE_GATEWAY_MAX_IN_FLIGHT",
        "MEMGATE_GATEWAY_MAX_CONNECTIONS",
        "MEMGATE_GATEWAY_LEDGER_SECRET",
        "MEMGATE_GATEWAY_LEDGER_SECRET_KEY",
        "MEMGATE_GATEWAY_NETWORK_POLICY_ALLOWED_NAMESPACES",
        "MEMGATE_ALLOWED_UPSTREAM_ORIGINS",
    ] {
        assert!(!env.contains_key(name), "{name} is set by default: {env:?}");
    }
    assert_eq!(env.len(), expected_env.len() + 2, "no other variable: {env:?}");

    let service = find(&objects, "Service", "memgate-operator-metrics")?;
    assert_eq!(&service["spec"]["selector"], selector, "the metrics Service selects the operator pods");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "http-metrics", "port": 8081, "targetPort": "http-metrics", "protocol": "TCP"}])
    );
    Ok(())
}

#[test]
fn every_toggle_flipped_reaches_the_operator_environment_and_objects() -> Result<()> {
    let objects = render(&[&all_toggles()], &[])?;
    let expected: BTreeSet<String> = [
        "ServiceAccount/memgate-system/platform-memgate-operator",
        "ClusterRole/platform-memgate-operator",
        "ClusterRoleBinding/platform-memgate-operator",
        // watchNamespaces: Secret rights only in team-a and team-b.
        "Role/team-a/platform-memgate-operator-credentials",
        "RoleBinding/team-a/platform-memgate-operator-credentials",
        "Role/team-b/platform-memgate-operator-credentials",
        "RoleBinding/team-b/platform-memgate-operator-credentials",
        "ClusterRole/platform-memgate-gateway-token-review",
        "Role/memgate-system/platform-memgate-operator-leader-election",
        "RoleBinding/memgate-system/platform-memgate-operator-leader-election",
        "Service/memgate-system/platform-memgate-operator-metrics",
        "Deployment/memgate-system/platform-memgate-operator",
        "ServiceMonitor/memgate-system/platform-memgate-operator",
        "PodMonitor/memgate-system/platform-memgate-gateways",
        "PrometheusRule/memgate-system/platform-memgate-alerts",
        "ConfigMap/memgate-system/platform-memgate-dashboard",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(kinds_and_names(&objects), expected, "fullnameOverride names everything; the monitoring objects are on");

    let name = "platform-memgate-operator";
    let deployment = find(&objects, "Deployment", name)?;
    assert_eq!(deployment["spec"]["replicas"], 3);
    let pod = &deployment["spec"]["template"];
    assert_eq!(pod["metadata"]["annotations"], json!({"example.com/team": "platform"}), "no scrape annotations");
    assert_eq!(pod["metadata"]["labels"]["example.com/tier"], "control");
    let spec = &pod["spec"];
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "registry-operator"}]));
    assert_eq!(spec["priorityClassName"], "platform-critical");
    assert_eq!(spec["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(spec["tolerations"][0]["key"], "dedicated");
    assert!(spec["affinity"]["nodeAffinity"].is_object());
    assert_eq!(spec["topologySpreadConstraints"][0]["topologyKey"], "kubernetes.io/hostname");
    let service_account = find(&objects, "ServiceAccount", name)?;
    assert_eq!(service_account["metadata"]["annotations"], json!({"example.com/role": "memgate"}));

    let container = operator_container(&objects, name)?;
    assert_eq!(container["image"], "registry.example.com/platform/memgate:0.1.0-rc.1");
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(container["ports"][0]["containerPort"], 9100);
    assert_eq!(
        container["resources"],
        json!({"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}})
    );
    let env = env_of(&container)?;
    for (name, value) in [
        ("RUST_LOG", "warn,memgate_operator=debug"),
        ("MEMGATE_LEADER_ELECTION", "true"),
        ("MEMGATE_LEADER_ELECTION_LEASE", "platform-memgate-operator"),
        ("MEMGATE_LEASE_DURATION_SECONDS", "30"),
        ("MEMGATE_LEASE_GRACE_SECONDS", "10"),
        ("MEMGATE_OPERATOR_LISTEN", "0.0.0.0:9100"),
        ("MEMGATE_RESYNC_SECONDS", "600"),
        ("MEMGATE_CONCURRENCY", "8"),
        ("MEMGATE_WATCH_NAMESPACES", "team-a,team-b"),
        ("MEMGATE_GATEWAY_SEARCH_ENABLED", "false"),
        ("MEMGATE_GATEWAY_INGEST_ENABLED", "false"),
        ("MEMGATE_GATEWAY_IMAGE", "registry.example.com/platform/memgate-gateway:0.1.0-rc.2"),
        ("MEMGATE_GATEWAY_IMAGE_PULL_POLICY", "Never"),
        ("MEMGATE_GATEWAY_IMAGE_PULL_SECRETS", "registry-gateway,registry-mirror"),
        ("MEMGATE_GATEWAY_REPLICAS", "4"),
        ("MEMGATE_GATEWAY_PORT", "8443"),
        ("MEMGATE_GATEWAY_ADMIN_PORT", "9443"),
        ("MEMGATE_GATEWAY_LOG_LEVEL", "debug"),
        ("MEMGATE_GATEWAY_CPU_REQUEST", "200m"),
        ("MEMGATE_GATEWAY_MEMORY_REQUEST", "96Mi"),
        ("MEMGATE_GATEWAY_CPU_LIMIT", "1500m"),
        ("MEMGATE_GATEWAY_MEMORY_LIMIT", "1Gi"),
        ("MEMGATE_GATEWAY_MAX_IN_FLIGHT", "1024"),
        ("MEMGATE_GATEWAY_MAX_CONNECTIONS", "4096"),
        ("MEMGATE_GATEWAY_SERVE_FLAGS", "write-timeout-ms=20000"),
        ("MEMGATE_GATEWAY_AUDIT_LOG", "stdout"),
        ("MEMGATE_GATEWAY_EXTRA_ALLOWED_HOSTS", "memory.example.com,gw.internal:8443"),
        ("MEMGATE_GATEWAY_LEDGER_SECRET", "memgate-ledger"),
        ("MEMGATE_GATEWAY_LEDGER_SECRET_KEY", "redis-url"),
        ("MEMGATE_GATEWAY_NETWORK_POLICY", "true"),
        ("MEMGATE_GATEWAY_NETWORK_POLICY_ALLOWED_NAMESPACES", "agents,nexent"),
        ("MEMGATE_GATEWAY_POD_DISRUPTION_BUDGET", "false"),
        ("MEMGATE_GATEWAY_DEFAULT_PLUGIN_CLAIM", "team-plugins"),
        ("MEMGATE_GATEWAY_TOKEN_REVIEW_CLUSTER_ROLE", "platform-memgate-gateway-token-review"),
        ("MEMGATE_ALLOWED_UPSTREAM_ORIGINS", "*.memory.svc,mem0.example.com,10.0.0.0/8"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel-collector.observability.svc:4318"),
    ] {
        assert_eq!(env_str(&env, name)?, value, "{name}");
    }
    assert!(
        !env.values().any(|v| v.as_str().is_some_and(|s| s.contains("redis://"))),
        "the ledger is a Secret reference, never a URL"
    );

    let service = find(&objects, "Service", &format!("{name}-metrics"))?;
    assert_eq!(service["spec"]["ports"][0]["port"], 18081);
    let monitor = find(&objects, "ServiceMonitor", name)?;
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(monitor["spec"]["selector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"]);
    assert_eq!(monitor["spec"]["namespaceSelector"], json!({"matchNames": [NAMESPACE]}));
    assert_eq!(
        monitor["spec"]["endpoints"],
        json!([{"port": "http-metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "5s"}])
    );
    for binding in [
        find(&objects, "ClusterRoleBinding", name)?,
        find(&objects, "RoleBinding", &format!("{name}-leader-election"))?,
    ] {
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]));
    }
    Ok(())
}

#[test]
fn every_operator_flag_can_be_set_by_the_chart() -> Result<()> {
    let objects = render(&[&all_toggles()], &[])?;
    let env = env_of(&operator_container(&objects, "platform-memgate-operator")?)?;
    let missing: Vec<String> = operator_env_names()?.into_iter().filter(|name| !env.contains_key(name)).collect();
    assert!(missing.is_empty(), "flags of memgate-operator run the chart cannot set: {missing:?}");
    // And the other way round: the chart sets no variable the operator does not read (a typo would
    // be ignored silently). RUST_LOG is the log filter; OTEL_* comes from operator.extraEnv.
    let flags = operator_env_names()?;
    let unknown: Vec<&String> =
        env.keys().filter(|name| !flags.contains(*name) && *name != "RUST_LOG" && !name.starts_with("OTEL_")).collect();
    assert!(unknown.is_empty(), "variables memgate-operator run does not read: {unknown:?}");
    Ok(())
}

#[test]
fn wrong_values_are_refused_by_the_schema_naming_the_field() -> Result<()> {
    for (set, field) in [
        (("operator.replicas", "two"), "/operator/replicas"),
        (("replicas", "2"), "'replicas' not allowed"),
        (("image.pullPolicy", "Sometimes"), "/image/pullPolicy"),
        (("gateway.port", "-1"), "/gateway/port"),
        (("gateway.adminPort", "70000"), "/gateway/adminPort"),
        (("gateway.replicas", "21"), "/gateway/replicas"),
        (("gateway.resources.limits.cpu", "lots"), "/gateway/resources/limits/cpu"),
        (("operator.watchNamespaces[0]", "Team_A"), "/operator/watchNamespaces/0"),
        (("gateway.ledger.secretName", "Not_A_Name"), "/gateway/ledger/secretName"),
        (("gateway.networkPolicy.enabled", "yes"), "/gateway/networkPolicy/enabled"),
        (("killSwitches.searchEnabled", "off"), "/killSwitches/searchEnabled"),
        (("gateway.podDisruptionBudget.minAvailable", "1"), "'minAvailable' not allowed"),
        // Helm would hand the operator 1.34217728e+08, which is no quantity: strings only.
        (("gateway.resources.limits.memory", "134217728"), "/gateway/resources/limits/memory"),
        (("gateway.extraAllowedHosts[0]", "*.example.com"), "/gateway/extraAllowedHosts/0"),
        (("gateway.listener.maxInFlight", "0"), "/gateway/listener/maxInFlight"),
        (("gateway.serve.writeTimeoutMs", "5"), "/gateway/serve/writeTimeoutMs"),
        (("gateway.serve.listen", "0.0.0.0:1"), "'listen' not allowed"),
    ] {
        let message = refusal(&[set])?;
        assert!(message.contains("values don't meet the specifications of the schema"), "{set:?}: {message}");
        assert!(message.contains(field), "{set:?}: the message should name {field}: {message}");
    }
    Ok(())
}

#[test]
fn settings_that_relate_two_values_fail_the_render_with_a_message() -> Result<()> {
    let message = refusal(&[("gateway.adminPort", "8080")])?;
    assert!(message.contains("gateway.adminPort must differ from gateway.port"), "{message}");
    let message = refusal(&[("operator.leaseGraceSeconds", "15")])?;
    assert!(
        message.contains("operator.leaseGraceSeconds must be shorter than operator.leaseDurationSeconds"),
        "{message}"
    );
    Ok(())
}

#[test]
fn chart_crds_are_the_generated_crds() -> Result<()> {
    let generated = read("crds/memgate.io.yaml")?;
    let copy = read("charts/memgate/crds/memgate.io.yaml")?;
    assert!(
        copy == generated,
        "charts/memgate/crds/memgate.io.yaml differs from crds/memgate.io.yaml: \
         cp crds/memgate.io.yaml charts/memgate/crds/memgate.io.yaml"
    );
    let text = helm()?.template(&chart(), RELEASE, NAMESPACE, &[], &[], true)?;
    let rendered: Vec<Value> =
        split_manifest(&text)?.into_iter().filter(|o| o["kind"] == "CustomResourceDefinition").collect();
    assert_eq!(rendered, split_manifest(&generated)?, "--include-crds renders exactly the generated CRDs");
    Ok(())
}

#[test]
fn chart_rbac_rules_are_exactly_the_operator_rbac_file() -> Result<()> {
    let file = read("operator/rbac/operator-rbac.yaml")?;
    let copy = read("charts/memgate/files/operator-rbac.yaml")?;
    assert!(
        copy == file,
        "charts/memgate/files/operator-rbac.yaml differs from operator/rbac/operator-rbac.yaml: \
         cp operator/rbac/operator-rbac.yaml charts/memgate/files/operator-rbac.yaml"
    );
    let wanted = split_manifest(&file)?;
    let rules_of = |name: &str| -> Result<Value> {
        let found: Vec<&Value> = wanted.iter().filter(|o| o["metadata"]["name"] == name).collect();
        ensure!(found.len() == 1, "operator-rbac.yaml should hold one {name}");
        Ok(found[0]["rules"].clone())
    };
    for (values, prefix) in [(vec![], "memgate"), (vec![all_toggles()], "platform-memgate")] {
        let values: Vec<&Path> = values.iter().map(PathBuf::as_path).collect();
        let objects = render(&values, &[])?;
        // Every Role and ClusterRole of the chart is a document of the file, with its rules (the
        // token-review ClusterRole the operator may bind named as this release's).
        let roles: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role").collect();
        for role in &roles {
            let name = role["metadata"]["name"].as_str().context("name")?;
            let document = name.replacen(prefix, "memgate", 1);
            let mut wanted_rules = rules_of(&document)?;
            if document == "memgate-operator" {
                let text = wanted_rules
                    .to_string()
                    .replace("\"memgate-gateway-token-review\"", &format!("\"{prefix}-gateway-token-review\""));
                wanted_rules = serde_json::from_str(&text)?;
            }
            assert_eq!(role["rules"], wanted_rules, "the chart's {name} rules are the file's");
        }
        let documents: BTreeSet<String> =
            wanted.iter().filter_map(|o| o["metadata"]["name"].as_str().map(String::from)).collect();
        let rendered: BTreeSet<String> = roles
            .iter()
            .filter_map(|r| r["metadata"]["name"].as_str().map(|n| n.replacen(prefix, "memgate", 1)))
            .collect();
        assert_eq!(rendered, documents, "every document of the file is rendered");
    }
    Ok(())
}

/// Leaf keys of a values tree as dotted paths; an empty map or list is a leaf.
fn leaves(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value.as_object() {
        Some(map) if !map.is_empty() => {
            for (key, child) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                leaves(&path, child, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

#[test]
fn every_value_is_documented_in_the_chart_readme() -> Result<()> {
    let values: Value = serde_saphyr::from_str(&read("charts/memgate/values.yaml")?)?;
    let readme = read("charts/memgate/README.md")?;
    let mut paths = Vec::new();
    leaves("", &values, &mut paths);
    assert!(paths.len() > 40, "{paths:?}");
    let undocumented: Vec<&String> = paths.iter().filter(|p| !readme.contains(&format!("| `{p}` |"))).collect();
    assert!(undocumented.is_empty(), "values without a row in charts/memgate/README.md: {undocumented:?}");
    Ok(())
}

/// The MemoryProvider that NOTES.txt tells the user to apply, for namespace `namespace`.
fn notes_provider(namespace: &str) -> Result<Value> {
    let notes = read("charts/memgate/templates/NOTES.txt")?;
    let (_, rest) = notes.split_once("<<'YAML'\n").context("NOTES.txt has a YAML heredoc")?;
    let (block, _) = rest.split_once("\n   YAML").context("NOTES.txt's heredoc ends")?;
    let yaml: String = block
        .lines()
        .map(|l| l.strip_prefix("   ").unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("{{ $ns }}", namespace);
    ensure!(!yaml.contains("{{"), "NOTES.txt's example holds a template action this test does not fill: {yaml}");
    let mut objects = split_manifest(&yaml)?;
    ensure!(objects.len() == 1, "one object in NOTES.txt's example");
    Ok(objects.remove(0))
}

#[tokio::test]
async fn default_rendering_applies_to_a_real_api_server() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let client = control_plane.client()?;
    let namespace = control_plane.new_namespace("memgate-system").await?;
    let text = helm()?.template(&chart(), RELEASE, &namespace, &[], &[], true)?;
    let objects = split_manifest(&text)?;
    assert_eq!(objects.len(), 14, "3 CRDs + 11 objects: {:?}", objects.iter().map(describe).collect::<Vec<_>>());

    let dry = apply_manifest(&client, &objects, "memgate-e2e-helm", true).await?;
    assert_eq!(dry.len(), objects.len());
    for object in &objects {
        if object["kind"] == "CustomResourceDefinition" {
            continue; // the CRDs may already be installed by another test of this binary
        }
        match get_object(&client, object).await {
            Err(Error::Kube { source, .. }) if matches!(&*source, kube::Error::Api(s) if s.code == 404) => {}
            Err(other) => return Err(other).context("reading after the dry run"),
            Ok(_) => bail!("{} exists after a dry run", describe(object)),
        }
    }

    let applied = apply_manifest(&client, &objects, "memgate-e2e-helm", false).await?;
    for (object, answer) in objects.iter().zip(&applied) {
        let live = get_object(&client, object).await?;
        assert_eq!(live.metadata.uid, answer.metadata.uid, "{}", describe(object));
        if object["kind"] == "CustomResourceDefinition" {
            continue; // exactly the generated file: no chart labels
        }
        assert_eq!(
            live.metadata.labels.as_ref().and_then(|l| l.get("app.kubernetes.io/instance")).map(String::as_str),
            Some(RELEASE),
            "{}",
            describe(object)
        );
    }
    let deployment = get_object(&client, find(&objects, "Deployment", "memgate-operator")?).await?;
    let env = env_of(&deployment.data["spec"]["template"]["spec"]["containers"][0])?;
    assert_eq!(env_str(&env, "MEMGATE_LEADER_ELECTION_LEASE")?, "memgate-operator");
    assert_eq!(env["POD_NAMESPACE"]["fieldRef"]["fieldPath"], "metadata.namespace");

    // The CRDs are served, and the provider NOTES.txt suggests is admitted by them (CEL included).
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in ["dialectpresets.memgate.io", "memoryproviders.memgate.io", "memorygateways.memgate.io"] {
        let mut established = false;
        for _ in 0..100 {
            let crd = crds.get(name).await?;
            let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
            established = conditions.iter().any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        ensure!(established, "{name} never became Established");
    }
    let provider = notes_provider(&namespace)?;
    let spec: memgate_crds::MemoryProviderSpec = serde_json::from_value(provider["spec"].clone())?;
    let violations = memgate_crds::validation::memory_provider(&spec);
    assert!(violations.is_empty(), "NOTES.txt's MemoryProvider breaks memgate's rules: {violations:?}");
    apply_manifest(&client, std::slice::from_ref(&provider), "memgate-e2e-helm", true).await?;

    // The bindings give the operator's ServiceAccount the rules (checked by the API server's authorizer).
    let user = format!("system:serviceaccount:{namespace}:memgate-operator");
    let reviews: Api<SubjectAccessReview> = Api::all(client);
    for (group, resource, verb, in_namespace) in [
        ("coordination.k8s.io", "leases", "create", Some(namespace.as_str())),
        ("memgate.io", "memoryproviders", "watch", None),
        ("apps", "deployments", "patch", Some("agents")),
        ("coordination.k8s.io", "leases", "create", Some("agents")),
    ] {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    verb: Some(verb.into()),
                    namespace: in_namespace.map(String::from),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = reviews.create(&PostParams::default(), &review).await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        let expected = !(resource == "leases" && in_namespace == Some("agents"));
        assert_eq!(allowed, expected, "{verb} {group}/{resource} in {in_namespace:?} for {user}");
    }
    Ok(())
}

/// Helm allows release names of 53 characters: every name the chart gives an object, and every label
/// value, stays a valid DNS label / label value (63 characters at most) with one, in both value sets.
#[test]
fn every_name_and_label_fits_63_characters_with_a_53_character_release_name() -> Result<()> {
    let release = "a-fifty-three-character-release-name-for-the-platform";
    ensure!(release.len() == 53);
    for values in [vec![], vec![all_toggles()]] {
        let files: Vec<&Path> = values.iter().map(PathBuf::as_path).collect();
        let text = helm()?.template(&chart(), release, NAMESPACE, &files, &[], false)?;
        let objects = split_manifest(&text)?;
        ensure!(objects.len() > 5, "the chart rendered: {}", objects.len());
        for object in &objects {
            let name = object["metadata"]["name"].as_str().context("a name")?;
            ensure!(name.len() <= 63, "{} is {} characters", describe(object), name.len());
            ensure!(!name.ends_with('-'), "{} ends with '-'", describe(object));
            for (key, value) in object["metadata"]["labels"].as_object().into_iter().flatten() {
                let value = value.as_str().unwrap_or_default();
                ensure!(value.len() <= 63, "{}: label {key}={value} is too long", describe(object));
            }
        }
    }
    Ok(())
}

/// `image.digest` pins both the operator and (unless `gateway.image` is set) the gateways.
#[test]
fn an_image_digest_pins_the_operator_and_the_gateways() -> Result<()> {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let objects = render(&[], &[("image.repository", "registry.example/memgate"), ("image.digest", &digest)])?;
    let container = operator_container(&objects, "memgate-operator")?;
    let pinned = format!("registry.example/memgate@{digest}");
    assert_eq!(container["image"], json!(pinned));
    assert_eq!(env_str(&env_of(&container)?, "MEMGATE_GATEWAY_IMAGE")?, pinned);
    let message = refusal(&[("image.digest", "latest")])?;
    assert!(message.contains("/image/digest"), "{message}");
    Ok(())
}

/// `operator.serviceAccount.create: false` uses an existing ServiceAccount: none is rendered, and the
/// pods and every binding name the given one.
#[test]
fn an_existing_service_account_is_used_when_the_chart_creates_none() -> Result<()> {
    let objects =
        render(&[], &[("operator.serviceAccount.create", "false"), ("operator.serviceAccount.name", "platform-sa")])?;
    assert!(!objects.iter().any(|o| o["kind"] == "ServiceAccount"), "no ServiceAccount rendered");
    let deployment = find(&objects, "Deployment", "memgate-operator")?;
    assert_eq!(deployment["spec"]["template"]["spec"]["serviceAccountName"], "platform-sa");
    for binding in objects.iter().filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding") {
        assert_eq!(binding["subjects"][0]["name"], "platform-sa", "{}", describe(binding));
    }
    Ok(())
}

/// What the operator refuses at start, the schema refuses at `helm install`: each value below is
/// refused by both (the operator's flag parsed and validated as `memgate-operator run` does), so
/// no chart value turns into an operator crash loop.
#[test]
fn the_schema_refuses_what_the_operator_refuses() -> Result<()> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        run: memgate_operator::settings::RunArgs,
    }
    let operator_refuses = |flag: &str, value: &str| -> bool {
        match Cli::try_parse_from(["memgate-operator", flag, value]) {
            Err(_) => true,
            Ok(cli) => memgate_operator::settings::Settings::try_from(cli.run).is_err(),
        }
    };
    for (value, bad, flag) in [
        ("gateway.resources.limits.memory", "134217728", "--gateway-memory-limit"),
        ("gateway.resources.limits.cpu", "lots", "--gateway-cpu-limit"),
        ("gateway.logLevel", "info;rm", "--gateway-log-level"),
        ("gateway.replicas", "21", "--gateway-replicas"),
        ("gateway.extraAllowedHosts[0]", "*.example.com", "--gateway-extra-allowed-host"),
        ("gateway.extraAllowedHosts[0]", "user@host", "--gateway-extra-allowed-host"),
        ("gateway.networkPolicy.allowedNamespaces[0]", "Team_A", "--gateway-network-policy-allowed-namespace"),
        ("gateway.ledger.secretName", "Not_A_Name", "--gateway-ledger-secret"),
        ("gateway.defaultPluginClaim", "UPPER", "--gateway-default-plugin-claim"),
        ("gateway.listener.maxInFlight", "0", "--gateway-max-in-flight"),
        ("gateway.listener.maxConnections", "2000000", "--gateway-max-connections"),
        ("gateway.serve.writeTimeoutMs", "5", "--gateway-serve-flag"),
        ("operator.watchNamespaces[0]", "Team_A", "--watch-namespaces"),
        ("allowedOrigins[0]", "https://mem0.example.com/path", "--allowed-upstream-origin"),
    ] {
        let message = refusal(&[(value, bad)])?;
        let field = format!("/{}", value.replace(['.', '['], "/").replace(']', ""));
        assert!(message.contains(&field), "{value}={bad}: the schema should refuse it naming {field}: {message}");
        // Helm hands a number to the operator as its shortest float text (1.34217728e+08).
        // A gateway.serve value reaches it as name=value (the chart's kebab-case of the key).
        let as_operator_sees_it = match (bad, flag) {
            ("134217728", _) => "1.34217728e+08".to_owned(),
            (_, "--gateway-serve-flag") => format!("write-timeout-ms={bad}"),
            _ => bad.to_owned(),
        };
        assert!(operator_refuses(flag, &as_operator_sees_it), "{flag} {as_operator_sees_it}: the operator accepts it");
    }
    Ok(())
}

/// Every key the schema accepts under `gateway.serve`, set to its schema minimum, renders a flag the
/// operator passes through (the chart's kebab-case of the key is a gateway flag), so a key added to
/// values.yaml and the schema needs no change here.
#[test]
fn every_gateway_serve_key_of_the_schema_reaches_the_gateway_as_its_flag() -> Result<()> {
    let schema: Value = serde_json::from_str(&read("charts/memgate/values.schema.json")?)?;
    let keys = schema["properties"]["gateway"]["properties"]["serve"]["properties"]
        .as_object()
        .context("gateway.serve lists its keys")?;
    ensure!(!keys.is_empty());
    let set: Vec<(String, String)> = keys
        .iter()
        .map(|(key, rule)| {
            Ok((format!("gateway.serve.{key}"), rule["minimum"].as_u64().context("a minimum")?.to_string()))
        })
        .collect::<Result<_>>()?;
    let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let objects = render(&[], &set)?;
    let env = env_of(&operator_container(&objects, "memgate-operator")?)?;
    let entries: Vec<String> = env_str(&env, "MEMGATE_GATEWAY_SERVE_FLAGS")?.split(',').map(String::from).collect();
    ensure!(entries.len() == keys.len(), "one entry per key: {entries:?}");
    let flags = memgate_operator::settings::ServeFlags::parse(&entries).map_err(anyhow::Error::msg)?;
    for (key, value) in &set {
        let flag = entries.iter().find(|e| e.ends_with(&format!("={value}"))).context("rendered")?;
        ensure!(flags.args().iter().any(|a| a == value), "{key}: {flag} {flags:?}");
    }
    Ok(())
}

/// The operator starts with what the chart renders: every plain environment value of its container,
/// given as the flag that reads it, passes clap and the operator's own checks (the pass-through
/// gateway flags included, checked by the gateway's parser).
#[test]
fn the_operator_accepts_the_environment_the_chart_renders() -> Result<()> {
    use clap::{Args, FromArgMatches};
    let command = memgate_operator::settings::RunArgs::augment_args(clap::Command::new("run"));
    for values in [vec![], vec![all_toggles()]] {
        let files: Vec<&Path> = values.iter().map(PathBuf::as_path).collect();
        let objects = render(&files, &[])?;
        let deployment = if files.is_empty() { "memgate-operator" } else { "platform-memgate-operator" };
        let env = env_of(&operator_container(&objects, deployment)?)?;
        let mut argv = vec!["run".to_owned()];
        for arg in command.get_arguments() {
            let Some(name) = arg.get_env().map(|e| e.to_string_lossy().into_owned()) else { continue };
            if let (Some(value), Some(long)) = (env.get(&name).and_then(Value::as_str), arg.get_long()) {
                argv.extend([format!("--{long}"), value.to_owned()]);
            }
        }
        ensure!(argv.iter().any(|a| a == "--gateway-image"), "{argv:?}");
        let matches = command.clone().try_get_matches_from(&argv).with_context(|| format!("{argv:?}"))?;
        let args = memgate_operator::settings::RunArgs::from_arg_matches(&matches)?;
        let settings = memgate_operator::settings::Settings::try_from(args).with_context(|| format!("{argv:?}"))?;
        if !files.is_empty() {
            assert_eq!(settings.gateway.serve_flags.value("write-timeout-ms"), Some("20000"));
        }
    }
    Ok(())
}
