//! The gateway Deployment: the serving container, one `write-nexent-plugins` init container per
//! plugin claim, the volumes they mount and the pod's security settings.
//!
//! The mount layout is [`super::layout`]; every path is read-only except the plugin claims.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, KeyToPath,
    LocalObjectReference, PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ResourceRequirements, SeccompProfile, SecretKeySelector, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::config::{ClaimFiles, Files};
use super::layout::{CONFIG_DIR, CONFIG_KEY, SECRETS_DIR, claim_config_dir, claim_plugins_dir};
use super::objects::Meta;
use super::{CONFIG_HASH_ANNOTATION, GATEWAY_NAME, gateway_url, pod_labels, selector_labels};
use crate::settings::GatewaySettings;
use crate::settings::gateway::AuditLog;
use memgate_crds::validation::RESERVED_ENV;

/// User and group the gateway runs as (the image must allow it; no root needed).
const RUN_AS: i64 = 65532;
/// Name of the serving container.
pub const GATEWAY_CONTAINER: &str = "gateway";

/// What the Deployment needs beyond the settings.
pub struct PodPlan<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// The rendered files and what they mount.
    pub files: &'a Files,
    /// Replicas (`None`: a HorizontalPodAutoscaler sets them).
    pub replicas: Option<i32>,
    /// Pass the shared ledger Secret as `MEMGATE_INGEST_LEDGER`.
    pub shared_ledger: bool,
    /// Ingest with an in-process ledger: never run two pods at once, not even during a rollout.
    pub single_writer: bool,
    /// Mount the ServiceAccount token: some provider verifies ServiceAccount callers (by
    /// TokenReview or against the cluster's keys).
    pub api_identity: bool,
}

/// The gateway Deployment.
pub fn deployment(meta: &Meta<'_>, plan: &PodPlan<'_>, config_hash: &str, settings: &GatewaySettings) -> Deployment {
    let extra = settings.pod_template.spec.clone().unwrap_or_default();
    let mut containers = vec![serving_container(plan, settings)];
    let mut mounts = serving_mounts(plan.files);
    mounts.extend(extra.volume_mounts.iter().map(|m| VolumeMount { read_only: Some(true), ..m.clone() }));
    containers[0].volume_mounts = Some(mounts);
    let init_containers: Vec<Container> =
        plan.files.claims.iter().enumerate().map(|(i, claim)| plugin_container(i, claim, plan, settings)).collect();
    let mut volumes = volumes(plan.files);
    volumes.extend(extra.volumes.iter().cloned());
    let (mut labels, mut annotations) = (pod_labels(), pod_annotations(config_hash, settings));
    if let Some(metadata) = settings.pod_template.metadata.as_ref() {
        // memgate's own keys win: a MemoryGateway adds, it never relabels the pods out of their Service.
        for (key, value) in &metadata.labels {
            labels.entry(key.clone()).or_insert_with(|| value.clone());
        }
        for (key, value) in &metadata.annotations {
            annotations.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    Deployment {
        metadata: meta.object(),
        spec: DeploymentSpec {
            replicas: plan.replicas,
            selector: LabelSelector { match_labels: Some(selector_labels()), ..LabelSelector::default() },
            strategy: Some(strategy(plan.single_writer)),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(GATEWAY_NAME.into()),
                    // Names only: the Secrets must exist in the gateway's namespace.
                    image_pull_secrets: (!settings.image_pull_secrets.is_empty()).then(|| {
                        settings
                            .image_pull_secrets
                            .iter()
                            .map(|name| LocalObjectReference { name: name.clone() })
                            .collect()
                    }),
                    automount_service_account_token: Some(plan.api_identity),
                    termination_grace_period_seconds: Some(DRAIN_SECONDS + 10),
                    security_context: Some(pod_security_context(extra.security_context.clone())),
                    init_containers: (!init_containers.is_empty()).then_some(init_containers),
                    containers,
                    volumes: Some(volumes),
                    node_selector: (!extra.node_selector.is_empty()).then(|| extra.node_selector.clone()),
                    tolerations: (!extra.tolerations.is_empty()).then(|| extra.tolerations.clone()),
                    affinity: extra.affinity.clone(),
                    topology_spread_constraints: (!extra.topology_spread_constraints.is_empty())
                        .then(|| extra.topology_spread_constraints.clone()),
                    priority_class_name: extra.priority_class_name.clone().filter(|name| !name.is_empty()),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    }
}

/// The pod's security context: memgate's (non-root user 65532, the runtime's default seccomp
/// profile), or a MemoryGateway's in its place (OpenShift's restricted SCC assigns the user itself),
/// which always keeps `runAsNonRoot`.
fn pod_security_context(custom: Option<PodSecurityContext>) -> PodSecurityContext {
    let mut context = custom.unwrap_or_else(|| PodSecurityContext {
        run_as_user: Some(RUN_AS),
        run_as_group: Some(RUN_AS),
        ..PodSecurityContext::default()
    });
    context.run_as_non_root = Some(true);
    // Pod Security's restricted level wants a seccomp profile; RuntimeDefault unless one is given.
    if context.seccomp_profile.is_none() {
        context.seccomp_profile = Some(SeccompProfile { type_: "RuntimeDefault".into(), ..SeccompProfile::default() });
    }
    context
}

/// `Recreate` for a single writer, otherwise a rolling update with Kubernetes' default bounds,
/// written out: the operator then owns `rollingUpdate` and leaves it out (server-side apply removes
/// it) when the namespace switches to `Recreate`. Left to the API server's defaulting, the field
/// would stay behind and the switch be refused ("may not be specified when strategy `type` is
/// 'Recreate'"), as the end-to-end test found when an ingesting provider resolved late.
fn strategy(single_writer: bool) -> DeploymentStrategy {
    if single_writer {
        return DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None };
    }
    DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::String("25%".into())),
            max_unavailable: Some(IntOrString::String("25%".into())),
        }),
    }
}

/// Seconds the gateway drains in-flight requests after SIGTERM (`--shutdown-timeout-ms`); the pod's
/// termination grace period is ten seconds longer.
pub const DRAIN_SECONDS: i64 = 25;

/// Pod-template annotations: the config hash that rolls the pods, and the conventional Prometheus
/// scrape hints pointing at the admin port.
fn pod_annotations(config_hash: &str, settings: &GatewaySettings) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CONFIG_HASH_ANNOTATION.to_string(), config_hash.to_string()),
        ("prometheus.io/scrape".to_string(), "true".to_string()),
        ("prometheus.io/port".to_string(), settings.admin_port.to_string()),
        ("prometheus.io/path".to_string(), "/metrics".to_string()),
    ])
}

/// The serving container: its command line, ports and probes are rendered here and only here
/// (the gateway's flags live in gateway/src/serve_args.rs; those rendered here are never passed
/// through, `settings::serve_flags::NOT_PASSED_THROUGH`).
fn serving_container(plan: &PodPlan<'_>, settings: &GatewaySettings) -> Container {
    let mut args: Vec<String> = ["serve", "--config", CONFIG_DIR, "--listen"].map(String::from).into_iter().collect();
    args.push(format!("0.0.0.0:{}", settings.port));
    // Probes and scrapes go to the admin listener, which has its own connection cap, so a saturated
    // serving port never fails a liveness probe.
    args.push("--admin-listen".into());
    args.push(format!("0.0.0.0:{}", settings.admin_port));
    // Drain in-flight requests for less than the kubelet waits before SIGKILL.
    args.push("--shutdown-timeout-ms".into());
    args.push((DRAIN_SECONDS * 1000).to_string());
    // The URL tenants use: the default audience of ServiceAccount tokens, and the default audience
    // and RFC 9728 resource of OIDC providers.
    args.push("--public-url".into());
    args.push(super::public_url(plan.namespace, settings));
    if let Some(max) = settings.listener.max_in_flight {
        args.extend(["--max-in-flight".to_string(), max.to_string()]);
    }
    if let Some(max) = settings.listener.max_connections {
        args.extend(["--max-connections".to_string(), max.to_string()]);
    }
    if settings.audit_log == AuditLog::Stdout {
        args.extend(["--audit-log".to_string(), "-".to_string()]);
    }
    // In a pod: loopback and the API server are refused destinations too.
    args.extend(["--placement".to_string(), "cluster".to_string()]);
    // Shared state (the Redis ledger's keys) and audit events are this gateway's own.
    args.extend(["--gateway-id".to_string(), format!("{}/{GATEWAY_NAME}", plan.namespace)]);
    let mut extra_hosts = settings.extra_allowed_hosts.clone();
    // Tenants behind an Ingress send the public URL's host (any port).
    extra_hosts.extend(settings.public_url.as_deref().and_then(url_host));
    for host in allowed_hosts(plan.namespace, &extra_hosts) {
        args.push("--allowed-host".into());
        args.push(host);
    }
    // Every other gateway setting the platform team gave (`--gateway-serve-flag`), already checked
    // by the gateway's own parser.
    args.extend(settings.serve_flags.args());
    let probe = |path: &str| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("admin".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(10),
        timeout_seconds: Some(2),
        ..Probe::default()
    };
    let mut env = vec![
        env_value("EXTERNAL_MEMORY_SEARCH_ENABLED", settings.search_enabled.to_string()),
        env_value("EXTERNAL_MEMORY_INGEST_ENABLED", settings.ingest_enabled.to_string()),
        env_value("RUST_LOG", settings.log_level.clone()),
    ];
    // A MemoryGateway's variables come after memgate's, and never in their place (validation
    // refuses the reserved names; this keeps them out even so).
    let extra_env = settings.pod_template.spec.iter().flat_map(|spec| spec.env.iter());
    let extra_env: Vec<EnvVar> = extra_env.filter(|e| !RESERVED_ENV.contains(&e.name.as_str())).cloned().collect();
    if let (true, Some(ledger)) = (plan.shared_ledger, &settings.ledger) {
        env.push(EnvVar {
            name: "MEMGATE_INGEST_LEDGER".into(),
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: ledger.name.clone(),
                    key: ledger.key.clone(),
                    optional: Some(false),
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        });
    }
    Container {
        name: GATEWAY_CONTAINER.into(),
        command: Some(vec!["memgate-gateway".into()]),
        args: Some(args),
        ports: Some(vec![
            ContainerPort {
                name: Some("http".into()),
                container_port: i32::from(settings.port),
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some("admin".into()),
                container_port: i32::from(settings.admin_port),
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
        ]),
        env: Some(env.into_iter().chain(extra_env).collect()),
        readiness_probe: Some(probe("/readyz")),
        liveness_probe: Some(probe("/healthz")),
        ..base_container(settings)
    }
}

/// The host of an http(s) URL (a MemoryGateway's `publicURL`, validated before).
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// `Host` names tenants use to reach the gateway, then the configured extras.
pub fn allowed_hosts(namespace: &str, extra: &[String]) -> Vec<String> {
    let mut hosts = vec![
        GATEWAY_NAME.to_string(),
        format!("{GATEWAY_NAME}.{namespace}"),
        format!("{GATEWAY_NAME}.{namespace}.svc"),
        format!("{GATEWAY_NAME}.{namespace}.svc.cluster.local"),
    ];
    for host in extra {
        if !hosts.contains(host) {
            hosts.push(host.clone());
        }
    }
    hosts
}

/// Init container `i`: writes the plugins of the providers using claim `i` into it.
fn plugin_container(i: usize, claim: &ClaimFiles, plan: &PodPlan<'_>, settings: &GatewaySettings) -> Container {
    let config = claim_config_dir(i);
    let dest = claim_plugins_dir(i);
    let mut mounts =
        vec![mount(&format!("nexent-config-{i}"), &config, true), mount(&format!("plugins-{i}"), &dest, false)];
    mounts.extend(secret_mounts(&claim.secrets, plan.files));
    Container {
        name: format!("nexent-plugins-{i}"),
        command: Some(vec!["memgate-gateway".into()]),
        args: Some(vec![
            "write-nexent-plugins".into(),
            "--config".into(),
            config,
            "--dest".into(),
            dest,
            "--gateway-url".into(),
            gateway_url(plan.namespace, settings.port),
        ]),
        env: Some(vec![env_value("RUST_LOG", settings.log_level.clone())]),
        volume_mounts: Some(mounts),
        ..base_container(settings)
    }
}

/// Image, resources and the restricted security context every container shares.
fn base_container(settings: &GatewaySettings) -> Container {
    let quantities = |named: &BTreeMap<String, String>| {
        Some(named.iter().map(|(name, quantity)| (name.clone(), Quantity(quantity.clone()))).collect())
    };
    let r = &settings.resources;
    let custom = settings.pod_template.spec.as_ref().and_then(|s| s.container_security_context.clone());
    Container {
        image: Some(settings.image.clone()),
        image_pull_policy: Some(settings.image_pull_policy.clone()),
        resources: Some(ResourceRequirements {
            requests: quantities(&r.requests),
            limits: quantities(&r.limits),
            ..ResourceRequirements::default()
        }),
        security_context: Some(container_security_context(custom)),
        ..Container::default()
    }
}

/// A container's security context: a MemoryGateway's (or none) with memgate's hardening on top:
/// never privileged, no privilege escalation, every capability dropped and none added, a read-only
/// root file system, a non-root user.
fn container_security_context(custom: Option<SecurityContext>) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: custom.as_ref().and_then(|c| c.privileged).map(|_| false),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
        ..custom.unwrap_or_default()
    }
}

fn env_value(name: &str, value: String) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value), ..EnvVar::default() }
}

fn mount(volume: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount { name: volume.into(), mount_path: path.into(), read_only: Some(read_only), ..VolumeMount::default() }
}

fn serving_mounts(files: &Files) -> Vec<VolumeMount> {
    let mut mounts = vec![mount("config", CONFIG_DIR, true)];
    mounts.extend(secret_mounts(&files.secrets, files));
    mounts
}

/// Volume name of each Secret, by its position among every mounted Secret.
fn secret_volume(files: &Files, name: &str) -> String {
    let index = files.secrets.keys().position(|n| n == name).unwrap_or_default();
    format!("secret-{index}")
}

fn secret_mounts(secrets: &BTreeMap<String, BTreeSet<String>>, files: &Files) -> Vec<VolumeMount> {
    secrets.keys().map(|name| mount(&secret_volume(files, name), &format!("{SECRETS_DIR}/{name}"), true)).collect()
}

fn volumes(files: &Files) -> Vec<Volume> {
    let config_items =
        |key: &str| Some(vec![KeyToPath { key: key.into(), path: CONFIG_KEY.into(), ..KeyToPath::default() }]);
    let config_volume = |name: String, key: &str| Volume {
        name,
        config_map: Some(ConfigMapVolumeSource {
            name: GATEWAY_NAME.into(),
            items: config_items(key),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mut volumes = vec![config_volume("config".into(), CONFIG_KEY)];
    for (name, keys) in &files.secrets {
        volumes.push(Volume {
            name: secret_volume(files, name),
            secret: Some(SecretVolumeSource {
                secret_name: Some(name.clone()),
                items: Some(
                    keys.iter()
                        .map(|k| KeyToPath { key: k.clone(), path: k.clone(), ..KeyToPath::default() })
                        .collect(),
                ),
                optional: Some(false),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    for (i, claim) in files.claims.iter().enumerate() {
        volumes.push(config_volume(format!("nexent-config-{i}"), &claim.key));
        volumes.push(Volume {
            name: format!("plugins-{i}"),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.claim.clone(),
                read_only: Some(false),
            }),
            ..Volume::default()
        });
    }
    volumes
}
