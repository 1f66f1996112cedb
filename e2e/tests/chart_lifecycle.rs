//! The chart's life on a real API server, with the real Helm (`helm install`, `upgrade`,
//! `uninstall` talking to the test control plane; `MEMGATE_HELM`):
//!
//! 1. `helm install` of the previous chart version: `e2e/testdata/memgate-chart-previous.tgz`, the
//!    package (`helm package`) of `charts/memgate` as of commit a0fafc0, before MemoryGateway, as a
//!    release would have published it; a MemoryProvider applied under it.
//! 2. The upgrade as the README says: the new CRDs applied server-side first (Helm never upgrades
//!    `crds/`), then `helm upgrade --reset-then-reuse-values` of the current chart. The provider
//!    written before is kept as written, the new CRD (MemoryGateway) is served, and the upgraded
//!    release's operator (its Deployment as the API server holds it, run by the kubelet stand-in as
//!    its ServiceAccount) serves the provider: Ready, with a gateway Deployment.
//! 3. Uninstall as the README says: the providers deleted first (the operator removes every gateway
//!    object, the cluster-scoped TokenReview binding included), then `helm uninstall`. Afterwards no
//!    object labelled as memgate's (`app.kubernetes.io/part-of=memgate`, the chart's, or
//!    `app.kubernetes.io/managed-by=memgate-operator`, the operator's) is left of any kind the two
//!    create; only the CRDs stay (with the custom resources), as the README says.
//!
//! A control plane of its own: an operator watching every namespace must not meet another test's.

mod platform_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use memgate_crds::MemoryProvider;
use memgate_e2e::{self as helm, ControlPlane, Helm};
use platform_support::{eventually, run_operator_pod};
use serde_json::json;

const RELEASE: &str = "memgate";
const MANAGER: &str = "memgate-e2e-lifecycle";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// Run the real helm against the control plane; its stdout.
fn helm_run(cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let helm = Helm::from_env()?;
    let output = Command::new(helm.binary())
        .args(args)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .env("HELM_CACHE_HOME", cp.dir().join("helm-cache"))
        .env("HELM_CONFIG_HOME", cp.dir().join("helm-config"))
        .env("HELM_DATA_HOME", cp.dir().join("helm-data"))
        .output()
        .context("running helm")?;
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    ensure!(output.status.success(), "helm {args:?} failed:\n{stdout}\n{stderr}");
    Ok(format!("{stdout}{stderr}"))
}

/// Every object of the kinds the chart and the operator create that carries `selector`, in any
/// namespace: `Kind/namespace/name`.
async fn labelled(admin: &Client, selector: &str) -> Result<Vec<String>> {
    use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
    use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let kinds = [
        ApiResource::erase::<ServiceAccount>(&()),
        ApiResource::erase::<ConfigMap>(&()),
        ApiResource::erase::<Service>(&()),
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<NetworkPolicy>(&()),
        ApiResource::erase::<PodDisruptionBudget>(&()),
        ApiResource::erase::<HorizontalPodAutoscaler>(&()),
        ApiResource::erase::<Role>(&()),
        ApiResource::erase::<RoleBinding>(&()),
        ApiResource::erase::<ClusterRole>(&()),
        ApiResource::erase::<ClusterRoleBinding>(&()),
    ];
    let mut found = Vec::new();
    for kind in kinds {
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &kind);
        for object in api.list(&ListParams::default().labels(selector)).await?.items {
            let namespace = object.metadata.namespace.clone().unwrap_or_default();
            found.push(format!("{}/{namespace}/{}", kind.kind, object.metadata.name.clone().unwrap_or_default()));
        }
    }
    Ok(found)
}

fn condition(object: &DynamicObject, type_: &str) -> Option<(String, String)> {
    let conditions = object.data.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
}

#[tokio::test]
async fn the_previous_chart_upgrades_in_place_and_uninstall_leaves_only_the_crds() -> Result<()> {
    let cp = ControlPlane::start().await?;
    let admin = cp.client()?;
    let work = tempfile::tempdir()?;
    let system = "memgate-system";
    let agents = cp.new_namespace("lifecycle-agents").await?;

    // 1. The previous version, installed by Helm, and a provider under it.
    let previous = repo("e2e/testdata/memgate-chart-previous.tgz");
    let previous = previous.to_string_lossy();
    helm_run(&cp, &["install", RELEASE, &previous, "--namespace", system, "--create-namespace"])?;
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    ensure!(crds.get_opt("memorygateways.memgate.io").await?.is_none(), "the previous chart has no MemoryGateway");
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "mem0-api", "namespace": agents, "labels": {"memgate.io/credential": "true"}},
        "stringData": {"api-key": "a-mem0-key"}});
    let provider = json!({"apiVersion": "memgate.io/v1alpha1", "kind": "MemoryProvider",
        "metadata": {"name": "team", "namespace": agents},
        "spec": {"dialect": {"builtin": "mem0-oss-rest-2026-08"},
                 "endpoint": {"origin": "https://mem0.example.com"},
                 "credentials": {"secretRef": {"name": "mem0-api", "key": "api-key"}},
                 "scope": {"userId": "u", "agentId": "a"},
                 "access": {"serviceAccounts": {"allowed": [{"namespace": agents}]}}}});
    helm::apply_manifest(&admin, &[secret, provider], MANAGER, false).await?;
    let providers: Api<DynamicObject> =
        Api::namespaced_with(admin.clone(), &agents, &ApiResource::erase::<MemoryProvider>(&()));
    let written = providers.get("team").await?;

    // 2. New CRDs first, then the release.
    for crd in helm::split_manifest(&std::fs::read_to_string(repo("charts/memgate/crds/memgate.io.yaml"))?)? {
        let name = crd["metadata"]["name"].as_str().context("CRD name")?.to_string();
        crds.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd)).await?;
    }
    let chart = repo("charts/memgate");
    let chart = chart.to_string_lossy();
    helm_run(&cp, &["upgrade", RELEASE, &chart, "--namespace", system, "--reset-then-reuse-values"])?;
    let status = helm_run(&cp, &["status", RELEASE, "--namespace", system])?;
    ensure!(status.contains("REVISION: 2") && status.contains("STATUS: deployed"), "{status}");
    ensure!(crds.get_opt("memorygateways.memgate.io").await?.is_some(), "the MemoryGateway CRD is served");
    let kept = providers.get("team").await?;
    ensure!(kept.data["spec"] == written.data["spec"], "the provider is kept as written");
    ensure!(kept.metadata.generation == written.metadata.generation);

    // The upgraded release's operator serves it.
    let deployment: Deployment = Api::namespaced(admin.clone(), system).get("memgate-operator").await?;
    let spec = deployment.spec.template.spec.context("operator pod spec")?;
    let (_pod, running) = run_operator_pod(&cp, &admin, system, spec, work.path()).await?;
    let log = || std::fs::read_to_string(&running[0].log).unwrap_or_default();
    eventually("the provider Ready under the upgraded release", || async {
        let gateways: Api<Deployment> = Api::namespaced(admin.clone(), &agents);
        let gateway = gateways.get_opt("memgate-gateway").await.ok()??;
        let replicas = gateway.spec.replicas.unwrap_or(1);
        let rolled = json!({"status": {"observedGeneration": gateway.metadata.generation, "replicas": replicas,
            "updatedReplicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas}});
        gateways.patch_status("memgate-gateway", &PatchParams::default(), &Patch::Merge(&rolled)).await.ok()?;
        let object = providers.get("team").await.ok()?;
        (condition(&object, "Ready")? == ("True".to_string(), "Ready".to_string())).then_some(())
    })
    .await
    .with_context(log)?;
    let operator_objects = labelled(&admin, "app.kubernetes.io/managed-by=memgate-operator").await?;
    ensure!(
        operator_objects.iter().any(|o| o.starts_with("ClusterRoleBinding//memgate-gateway-")),
        "the operator bound the gateway for TokenReview: {operator_objects:?}"
    );

    // 3. Providers first (the operator removes what it created), then the release.
    providers.delete("team", &Default::default()).await?;
    eventually("the operator's objects removed", || async {
        labelled(&admin, "app.kubernetes.io/managed-by=memgate-operator").await.ok()?.is_empty().then_some(())
    })
    .await
    .with_context(log)?;
    drop(running);
    let said = helm_run(&cp, &["uninstall", RELEASE, "--namespace", system])?;
    ensure!(said.contains("uninstalled"), "{said}");
    let left: Vec<String> = [
        labelled(&admin, "app.kubernetes.io/part-of=memgate").await?,
        labelled(&admin, "app.kubernetes.io/managed-by=memgate-operator").await?,
        labelled(&admin, &format!("app.kubernetes.io/instance={RELEASE}")).await?,
    ]
    .concat();
    ensure!(left.is_empty(), "left after helm uninstall: {left:?}");
    let remaining: Vec<String> = crds
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.ends_with(".memgate.io"))
        .collect();
    ensure!(
        remaining == ["dialectpresets.memgate.io", "memorygateways.memgate.io", "memoryproviders.memgate.io"],
        "the CRDs stay (Helm never deletes crds/): {remaining:?}"
    );
    Ok(())
}
