//! Every right the chart's ServiceAccounts hold, as the real API server computes them
//! (`kubectl auth can-i --list`, the real kubectl of `e2e/kube-tools`), against the committed
//! expectation of each chart mode: `charts/memgate/ci/access/cluster-wide.txt` (the operator
//! watches every namespace) and `namespaced.txt` (`operator.watchNamespaces` set: the operator may
//! read Secrets only there). In each mode the chart is installed (helm template + server-side apply),
//! its operator runs as the chart's ServiceAccount (the kubelet stand-in), and a provider with
//! ServiceAccount callers makes the operator create a gateway and bind it for TokenReview, so the
//! gateway's ServiceAccount is listed as the operator leaves it.
//!
//! A rights change is a change of these files: review it as a security change. To see what a run
//! found, it is printed in the failure message in the same format.

mod platform_support;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use memgate_e2e::{self as helm, ControlPlane, Helm};
use platform_support::{eventually, run_operator_pod};
use serde_json::json;

const MANAGER: &str = "memgate-e2e-access";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The real kubectl (`MEMGATE_KUBE_TOOLS`, from `e2e/kube-tools/provide.sh`; never skipped).
fn kubectl() -> Result<PathBuf> {
    let folder = std::env::var_os("MEMGATE_KUBE_TOOLS")
        .context("MEMGATE_KUBE_TOOLS is not set: run e2e/kube-tools/provide.sh (scripts/test.sh does)")?;
    let path = PathBuf::from(folder).join("kubectl");
    ensure!(path.is_file(), "{} is missing", path.display());
    Ok(path)
}

/// `kubectl auth can-i --list` of `user` in `namespace`, as the admin impersonating it.
async fn rights(cp: &ControlPlane, user: &str, namespace: &str) -> Result<String> {
    let output = tokio::process::Command::new(kubectl()?)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args(["auth", "can-i", "--list", "--namespace", namespace, "--as", user])
        .output()
        .await
        .context("running kubectl")?;
    ensure!(output.status.success(), "kubectl auth can-i: {}", String::from_utf8_lossy(&output.stderr));
    Ok(columns(&String::from_utf8(output.stdout)?))
}

/// kubectl's table with its padding (which depends on the longest name) turned into ` | `
/// separators, so that the committed files do not change with the release's name.
fn columns(table: &str) -> String {
    table
        .lines()
        .map(|line| {
            let cells: Vec<&str> = line.trim().split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
            cells.join(" | ") + "\n"
        })
        .collect()
}

/// One chart mode: install, run the operator, let it make a gateway, list every right.
async fn mode(cp: &ControlPlane, admin: &kube::Client, release: &str, restricted: bool) -> Result<String> {
    let work = tempfile::tempdir()?;
    let system = cp.new_namespace("access-system").await?;
    let agents = cp.new_namespace("access-agents").await?;
    let elsewhere = cp.new_namespace("access-elsewhere").await?;
    let watch = format!("{{{agents}}}");
    let set: Vec<(&str, &str)> = if restricted { vec![("operator.watchNamespaces", watch.as_str())] } else { vec![] };
    let rendered = Helm::from_env()?.template(&repo("charts/memgate"), release, &system, &[], &set, true)?;
    let objects = helm::split_manifest(&rendered)?;
    helm::apply_manifest(admin, &objects, MANAGER, false).await?;

    let deployment: Deployment =
        serde_json::from_value(objects.iter().find(|o| o["kind"] == "Deployment").context("Deployment")?.clone())?;
    let spec = deployment.spec.template.spec.context("pod spec")?;
    let account = spec.service_account_name.clone().context("serviceAccountName")?;
    let (_pod, running) = run_operator_pod(cp, admin, &system, spec, work.path()).await?;

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
    helm::apply_manifest(admin, &[secret, provider], MANAGER, false).await?;
    let binding = format!("memgate-gateway-{agents}");
    let bindings: kube::Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> = kube::Api::all(admin.clone());
    eventually("the gateway's TokenReview binding", || async { bindings.get_opt(&binding).await.ok()? })
        .await
        .with_context(|| std::fs::read_to_string(&running[0].log).unwrap_or_default())?;
    drop(running);

    let operator = format!("system:serviceaccount:{system}:{account}");
    let gateway = format!("system:serviceaccount:{agents}:memgate-gateway");
    let mut report = String::new();
    for (who, user, namespace, label) in [
        ("operator", &operator, &system, "its own namespace"),
        ("operator", &operator, &agents, "a namespace it serves"),
        ("operator", &operator, &elsewhere, "a namespace it does not serve"),
        ("gateway", &gateway, &agents, "its namespace"),
    ] {
        let listed = rights(cp, user, namespace).await?;
        report.push_str(&format!("## {who} in {label}\n{listed}\n"));
    }
    // Names that differ between runs: the release's objects and the namespaces.
    let report = report
        .replace(&format!("{release}-memgate-gateway-token-review"), "<release>-gateway-token-review")
        .replace(&system, "<system>")
        .replace(&agents, "<agents>")
        .replace(&elsewhere, "<elsewhere>");
    Ok(report)
}

#[tokio::test]
async fn each_service_account_holds_exactly_the_committed_rights_in_both_chart_modes() -> Result<()> {
    let cp = ControlPlane::shared().await?;
    let admin = cp.client()?;
    let mut failures = Vec::new();
    // One after the other: the cluster-wide operator would otherwise reconcile the other mode's namespaces.
    for (file, release, restricted) in [("cluster-wide.txt", "wide", false), ("namespaced.txt", "narrow", true)] {
        let found = mode(cp, &admin, release, restricted).await?;
        let path = repo("charts/memgate/ci/access").join(file);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        // The files open with `# ` comment lines saying what they are.
        let expected: String = committed.lines().filter(|l| !l.starts_with("# ")).map(|l| format!("{l}\n")).collect();
        if found.trim_end() != expected.trim_end() {
            failures.push(format!("{} differs from what the API server lists; it lists:\n{found}", path.display()));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n\n"));
    Ok(())
}
