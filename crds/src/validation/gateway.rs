//! Rules of one `MemoryGateway`: the CEL rules' checks plus what CEL cannot say (quantities, label
//! keys, which volume sources and security settings a gateway pod may have).

use k8s_openapi::api::core::v1::{PodSecurityContext, SecurityContext, Volume};

use super::Violation;
use super::names::{
    is_dns_label, is_dns_subdomain, is_env_name, is_label_key, is_label_value, is_log_filter, is_quantity,
};
use crate::memory_gateway::{GatewayPodMetadata, GatewayPodSpec, MemoryGatewaySpec};

/// Environment variables memgate sets on the gateway container; a MemoryGateway cannot override them.
pub const RESERVED_ENV: [&str; 5] = [
    "RUST_LOG",
    "EXTERNAL_MEMORY_SEARCH_ENABLED",
    "EXTERNAL_MEMORY_INGEST_ENABLED",
    "MEMGATE_INGEST_LEDGER",
    "MEMGATE_INGEST_LEDGER_CA_FILE",
];

/// Folders of the gateway pod memgate mounts into; extra volumes go elsewhere.
pub const RESERVED_PATHS: [&str; 2] = ["/etc/memgate", "/var/lib/memgate"];

/// Volume name prefixes memgate uses in the gateway pod.
const RESERVED_VOLUMES: [&str; 4] = ["config", "secret-", "nexent-config-", "plugins-"];

/// Label keys memgate owns on the gateway pods.
fn reserved_key(key: &str) -> bool {
    key.starts_with("memgate.io/") || key == "app.kubernetes.io/name" || key == "app.kubernetes.io/managed-by"
}

/// Check everything a single MemoryGateway can be checked for.
pub fn memory_gateway(spec: &MemoryGatewaySpec) -> Vec<Violation> {
    let mut found = Vec::new();
    if let Some(url) = &spec.public_url {
        found.extend(check_public_url(url));
    }
    if spec.replicas.is_some_and(|r| !(1..=20).contains(&r)) {
        found.push(Violation::new("spec.replicas", "must be between 1 and 20"));
    }
    if let Some(autoscaling) = &spec.autoscaling {
        if spec.replicas.is_some() {
            found.push(Violation::new("spec", "set replicas or autoscaling, not both"));
        }
        for (field, value) in [("minReplicas", autoscaling.min_replicas), ("maxReplicas", autoscaling.max_replicas)] {
            if !(1..=50).contains(&value) {
                found.push(Violation::new(format!("spec.autoscaling.{field}"), "must be between 1 and 50"));
            }
        }
        if autoscaling.min_replicas > autoscaling.max_replicas {
            found.push(Violation::new("spec.autoscaling.minReplicas", "must not exceed maxReplicas"));
        }
        if !(10..=100).contains(&autoscaling.target_cpu_utilization_percentage) {
            found.push(Violation::new("spec.autoscaling.targetCPUUtilizationPercentage", "must be between 10 and 100"));
        }
    }
    if let Some(resources) = &spec.resources {
        for (part, quantities) in [("requests", &resources.requests), ("limits", &resources.limits)] {
            for (name, quantity) in quantities.iter().flatten() {
                let field = format!("spec.resources.{part}.{name}");
                if !matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") {
                    found.push(Violation::new(field, "must be cpu, memory or ephemeral-storage"));
                } else if !is_quantity(&quantity.0) {
                    found.push(Violation::new(field, "must be a quantity such as 500m, 1, 256Mi or 1Gi (a string)"));
                }
            }
        }
    }
    if let Some(listener) = &spec.listener {
        if listener.max_in_flight.is_some_and(|n| !(1..=100_000).contains(&n)) {
            found.push(Violation::new("spec.listener.maxInFlight", "must be between 1 and 100000"));
        }
        if listener.max_connections.is_some_and(|n| !(1..=1_000_000).contains(&n)) {
            found.push(Violation::new("spec.listener.maxConnections", "must be between 1 and 1000000"));
        }
    }
    if spec.log_level.as_deref().is_some_and(|l| !is_log_filter(l)) {
        found.push(Violation::new("spec.logLevel", "must be a log filter such as info or warn,memgate_gateway=debug"));
    }
    if let Some(template) = &spec.pod_template {
        if let Some(metadata) = &template.metadata {
            check_metadata(metadata, &mut found);
        }
        if let Some(pod) = &template.spec {
            check_pod(pod, &mut found);
        }
    }
    if let Some(policy) = &spec.network_policy {
        for (i, namespace) in policy.allowed_namespaces.iter().flatten().enumerate() {
            if !is_dns_label(namespace) {
                found.push(Violation::new(
                    format!("spec.networkPolicy.allowedNamespaces[{i}]"),
                    "must be a namespace name",
                ));
            }
        }
    }
    found
}

/// `spec.publicURL`: http(s), a host, an optional port and path; no user info, query or fragment.
fn check_public_url(url: &str) -> Option<Violation> {
    let bad = || {
        Some(Violation::new("spec.publicURL", "must be an http(s) URL with a host and no user info, query or fragment"))
    };
    if url.len() > 300 || url.contains(['?', '#', '@', '\\', '"']) {
        return bad();
    }
    let parsed = url::Url::parse(url).ok()?;
    let ok = matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some_and(|h| !h.is_empty());
    if ok { None } else { bad() }
}

fn check_metadata(metadata: &GatewayPodMetadata, found: &mut Vec<Violation>) {
    for (key, value) in &metadata.labels {
        let field = format!("spec.podTemplate.metadata.labels[{key}]");
        if !is_label_key(key) || !is_label_value(value) {
            found.push(Violation::new(field, "must be a label key and value (at most 63 characters each)"));
        } else if reserved_key(key) {
            found.push(Violation::new(field, "is memgate's own: the gateway's Service selects it"));
        }
    }
    for key in metadata.annotations.keys() {
        let field = format!("spec.podTemplate.metadata.annotations[{key}]");
        if !is_label_key(key) {
            found.push(Violation::new(field, "must be an annotation key"));
        } else if key.starts_with("memgate.io/") {
            found.push(Violation::new(field, "is memgate's own (the config hash rolls the pods)"));
        }
    }
}

fn check_pod(pod: &GatewayPodSpec, found: &mut Vec<Violation>) {
    const BASE: &str = "spec.podTemplate.spec";
    for (key, value) in &pod.node_selector {
        if !is_label_key(key) || !is_label_value(value) {
            found.push(Violation::new(format!("{BASE}.nodeSelector[{key}]"), "must be a label key and value"));
        }
    }
    if pod.priority_class_name.as_deref().is_some_and(|n| !is_dns_subdomain(n)) {
        found.push(Violation::new(format!("{BASE}.priorityClassName"), "must be a PriorityClass name"));
    }
    for (i, env) in pod.env.iter().enumerate() {
        let field = format!("{BASE}.env[{i}].name");
        if !is_env_name(&env.name) {
            found.push(Violation::new(field, "must be an environment variable name"));
        } else if RESERVED_ENV.contains(&env.name.as_str()) {
            found.push(Violation::new(
                field,
                format!("{} is set by memgate (use the MemoryGateway's own fields)", env.name),
            ));
        }
    }
    let mut names = Vec::new();
    for (i, volume) in pod.volumes.iter().enumerate() {
        let field = format!("{BASE}.volumes[{i}]");
        if !is_dns_label(&volume.name) || RESERVED_VOLUMES.iter().any(|r| volume.name.starts_with(r)) {
            found.push(Violation::new(
                format!("{field}.name"),
                "must be a DNS label not starting with config, secret-, nexent-config- or plugins- (memgate's volumes)",
            ));
        } else if names.contains(&volume.name) {
            found.push(Violation::new(format!("{field}.name"), "is declared twice"));
        }
        names.push(volume.name.clone());
        if !only_file_source(volume) {
            found.push(Violation::new(field, "may only be a configMap, secret, projected or emptyDir volume"));
        }
    }
    for (i, mount) in pod.volume_mounts.iter().enumerate() {
        let field = format!("{BASE}.volumeMounts[{i}]");
        if !names.contains(&mount.name) {
            found.push(Violation::new(format!("{field}.name"), "must name one of spec.podTemplate.spec.volumes"));
        }
        let path = mount.mount_path.trim_end_matches('/');
        let inside_memgate = RESERVED_PATHS.iter().any(|r| path == *r || path.starts_with(&format!("{r}/")));
        if !mount.mount_path.starts_with('/') || inside_memgate || path.split('/').any(|s| s == "..") {
            found.push(Violation::new(
                format!("{field}.mountPath"),
                "must be an absolute path outside /etc/memgate and /var/lib/memgate",
            ));
        }
        if mount.sub_path.as_deref().is_some_and(|p| p.split('/').any(|s| s == "..")) {
            found.push(Violation::new(format!("{field}.subPath"), "must not contain '..'"));
        }
    }
    if let Some(context) = &pod.security_context {
        check_pod_security(context, found);
    }
    if let Some(context) = &pod.container_security_context {
        check_container_security(context, found);
    }
}

fn only_file_source(volume: &Volume) -> bool {
    let sources =
        [volume.config_map.is_some(), volume.secret.is_some(), volume.projected.is_some(), volume.empty_dir.is_some()];
    let any_other = Volume {
        name: volume.name.clone(),
        config_map: None,
        secret: None,
        projected: None,
        empty_dir: None,
        ..volume.clone()
    } != Volume { name: volume.name.clone(), ..Volume::default() };
    sources.iter().filter(|s| **s).count() == 1 && !any_other
}

fn check_pod_security(context: &PodSecurityContext, found: &mut Vec<Violation>) {
    const FIELD: &str = "spec.podTemplate.spec.securityContext";
    if context.run_as_non_root == Some(false) {
        found
            .push(Violation::new(format!("{FIELD}.runAsNonRoot"), "must not be false: the gateway never runs as root"));
    }
    if context.run_as_user == Some(0) {
        found.push(Violation::new(format!("{FIELD}.runAsUser"), "must not be 0: the gateway never runs as root"));
    }
}

fn check_container_security(context: &SecurityContext, found: &mut Vec<Violation>) {
    const FIELD: &str = "spec.podTemplate.spec.containerSecurityContext";
    let checks = [
        (context.privileged == Some(true), "privileged", "must not be true"),
        (context.allow_privilege_escalation == Some(true), "allowPrivilegeEscalation", "must not be true"),
        (context.read_only_root_filesystem == Some(false), "readOnlyRootFilesystem", "must not be false"),
        (context.run_as_non_root == Some(false), "runAsNonRoot", "must not be false"),
        (context.run_as_user == Some(0), "runAsUser", "must not be 0"),
        (
            context.capabilities.as_ref().and_then(|c| c.add.as_ref()).is_some_and(|add| !add.is_empty()),
            "capabilities.add",
            "must be empty: the gateway needs no capability",
        ),
    ];
    for (bad, field, message) in checks {
        if bad {
            found.push(Violation::new(format!("{FIELD}.{field}"), message));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(value: serde_json::Value) -> MemoryGatewaySpec {
        serde_json::from_value(value).expect("a spec")
    }

    fn fields(found: &[Violation]) -> Vec<&str> {
        found.iter().map(|v| v.field.as_str()).collect()
    }

    #[test]
    fn the_issue_example_is_valid() {
        let example = spec(json!({
            "publicURL": "https://memory.example.com/team", "replicas": 3,
            "resources": {"limits": {"memory": "512Mi"}},
            "listener": {"maxInFlight": 1024, "maxConnections": 4096},
            "podTemplate": {"metadata": {"labels": {}, "annotations": {}},
                            "spec": {"nodeSelector": {"pool": "memory"}, "tolerations": [], "affinity": {}, "priorityClassName": "memory-critical"}}}));
        assert!(memory_gateway(&example).is_empty(), "{:?}", memory_gateway(&example));
        assert!(memory_gateway(&MemoryGatewaySpec::default()).is_empty(), "an empty spec: the operator's settings");
    }

    #[test]
    fn values_the_operator_would_refuse_are_refused_naming_the_field() {
        let bad = spec(json!({
            "publicURL": "https://user@memory.example.com/?x=1", "replicas": 30,
            "resources": {"limits": {"memory": "1.34217728e+08", "nvidia.com/gpu": "1"}},
            "logLevel": "info\nX=1",
            "listener": {"maxInFlight": 0},
        }));
        assert_eq!(
            fields(&memory_gateway(&bad)),
            [
                "spec.publicURL",
                "spec.replicas",
                "spec.resources.limits.memory",
                "spec.resources.limits.nvidia.com/gpu",
                "spec.listener.maxInFlight",
                "spec.logLevel"
            ]
        );
    }

    #[test]
    fn the_pod_stays_memgates_own_and_unprivileged() {
        let bad = spec(json!({"podTemplate": {
            "metadata": {"labels": {"app.kubernetes.io/name": "other", "memgate.io/gateway": "x"},
                         "annotations": {"memgate.io/config-hash": "x"}},
            "spec": {
                "env": [{"name": "RUST_LOG", "value": "trace"}, {"name": "SSL_CERT_FILE", "value": "/etc/ca/ca.crt"}],
                "volumes": [{"name": "host", "hostPath": {"path": "/"}}, {"name": "config-x", "emptyDir": {}},
                            {"name": "ca", "configMap": {"name": "corp-ca"}}],
                "volumeMounts": [{"name": "ca", "mountPath": "/etc/memgate/secrets"}, {"name": "nope", "mountPath": "/x"}],
                "securityContext": {"runAsUser": 0},
                "containerSecurityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN"]}}}}}));
        assert_eq!(
            fields(&memory_gateway(&bad)),
            [
                "spec.podTemplate.metadata.labels[app.kubernetes.io/name]",
                "spec.podTemplate.metadata.labels[memgate.io/gateway]",
                "spec.podTemplate.metadata.annotations[memgate.io/config-hash]",
                "spec.podTemplate.spec.env[0].name",
                "spec.podTemplate.spec.volumes[0]",
                "spec.podTemplate.spec.volumes[1].name",
                "spec.podTemplate.spec.volumeMounts[0].mountPath",
                "spec.podTemplate.spec.volumeMounts[1].name",
                "spec.podTemplate.spec.securityContext.runAsUser",
                "spec.podTemplate.spec.containerSecurityContext.privileged",
                "spec.podTemplate.spec.containerSecurityContext.capabilities.add",
            ]
        );
        let openshift = spec(json!({"podTemplate": {"spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containerSecurityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}}}));
        assert!(memory_gateway(&openshift).is_empty(), "OpenShift's restricted SCC: no runAsUser");
    }
}
