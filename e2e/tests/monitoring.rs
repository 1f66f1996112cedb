//! The chart's monitoring objects against the real things (`e2e/prometheus-tools`,
//! `MEMGATE_PROMETHEUS_TOOLS`, never skipped): the operator's ServiceMonitor, the gateways'
//! PodMonitor, the PrometheusRule and the Grafana dashboard ConfigMap are rendered by the real Helm
//! and applied to a real API server that serves the real prometheus-operator CRDs (so their own
//! OpenAPI schemas judge them); the rules pass the checks of `promtool check rules`
//! (`promrules-check`, Prometheus' own rule-file, PromQL and template parsers), which the API server
//! does not do; and every memgate metric the rules and the dashboard query is one the code exports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use memgate_e2e::{self as helm, ControlPlane, Helm};
use serde_json::Value;

const MANAGER: &str = "memgate-e2e-monitoring";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

/// The folder of `promrules-check` and the prometheus-operator CRDs.
fn tools() -> Result<PathBuf> {
    let folder = std::env::var_os("MEMGATE_PROMETHEUS_TOOLS")
        .context("MEMGATE_PROMETHEUS_TOOLS is not set: run e2e/prometheus-tools/provide.sh (scripts/test.sh does)")?;
    let folder = PathBuf::from(folder);
    ensure!(folder.join("promrules-check").is_file(), "{} holds no promrules-check", folder.display());
    Ok(folder)
}

/// `promrules-check` on `file`: (exit code, output).
fn check_rules(file: &Path) -> Result<(i32, String)> {
    let output = Command::new(tools()?.join("promrules-check")).arg(file).output()?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Ok((output.status.code().unwrap_or(-1), text))
}

/// Every `memgate_…` metric name in `text`, without histogram suffixes.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("memgate_") {
        let tail = &rest[start..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let name = name.strip_suffix("_bucket").unwrap_or(name);
        names.insert(name.to_string());
        rest = &tail[end..];
    }
    names
}

#[tokio::test]
async fn monitoring_objects_apply_against_the_prometheus_operator_crds_and_the_rules_pass_promtool_checks() -> Result<()>
{
    let tools = tools()?;
    let cp = ControlPlane::shared().await?;
    let admin = cp.client()?;
    let namespace = cp.new_namespace("monitoring").await?;

    // The real prometheus-operator CRDs.
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut names = Vec::new();
    for file in ["servicemonitors", "podmonitors", "prometheusrules"] {
        let path = tools.join(format!("crds/monitoring.coreos.com_{file}.yaml"));
        for crd in helm::split_manifest(&std::fs::read_to_string(&path)?)? {
            let name = crd["metadata"]["name"].as_str().context("CRD name")?.to_string();
            crds.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&crd)).await?;
            names.push(name);
        }
    }
    for name in &names {
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

    // The chart's monitoring objects, every one turned on, applied for real.
    let set = [
        ("metrics.serviceMonitor.enabled", "true"),
        ("metrics.gatewayPodMonitor.enabled", "true"),
        ("metrics.prometheusRule.enabled", "true"),
        ("metrics.dashboard.enabled", "true"),
    ];
    let text = Helm::from_env()?.template(&repo("charts/memgate"), "memgate", &namespace, &[], &set, false)?;
    let objects = helm::split_manifest(&text)?;
    let monitoring: Vec<Value> = objects
        .iter()
        .filter(|o| {
            o["apiVersion"] == "monitoring.coreos.com/v1"
                || (o["kind"] == "ConfigMap" && o["metadata"]["name"] == "memgate-dashboard")
        })
        .cloned()
        .collect();
    let kinds: BTreeSet<String> = monitoring.iter().map(helm::describe).collect();
    ensure!(
        kinds
            == [
                format!("ConfigMap/{namespace}/memgate-dashboard"),
                format!("PodMonitor/{namespace}/memgate-gateways"),
                format!("PrometheusRule/{namespace}/memgate-alerts"),
                format!("ServiceMonitor/{namespace}/memgate-operator"),
            ]
            .into_iter()
            .collect::<BTreeSet<_>>(),
        "{kinds:?}"
    );
    helm::apply_manifest(&admin, &monitoring, MANAGER, false).await.context("the API server refused an object")?;

    // The PodMonitor scrapes what the operator renders: the gateway pods' label and admin port name.
    let pod_monitor = monitoring.iter().find(|o| o["kind"] == "PodMonitor").context("PodMonitor")?;
    ensure!(pod_monitor["spec"]["selector"]["matchLabels"]["memgate.io/gateway"] == "memgate-gateway");
    ensure!(pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "admin");

    // The rules pass promtool's checks; a broken rule does not (the check can fail).
    let work = tempfile::tempdir()?;
    let rule = monitoring.iter().find(|o| o["kind"] == "PrometheusRule").context("PrometheusRule")?;
    let rules = work.path().join("rules.yaml");
    std::fs::write(&rules, serde_json::to_string_pretty(&rule["spec"])?)?;
    let (code, said) = check_rules(&rules)?;
    ensure!(code == 0, "promrules-check refused the chart's rules:\n{said}");
    ensure!(said.contains("SUCCESS"), "{said}");
    let broken = work.path().join("broken.yaml");
    std::fs::write(&broken, "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: sum(rate(x[5m])\n")?;
    ensure!(check_rules(&broken)?.0 == 1, "a rule that does not parse is refused");

    // Every metric they query exists.
    let dashboard = monitoring.iter().find(|o| o["kind"] == "ConfigMap").context("dashboard")?;
    let json: Value = serde_json::from_str(dashboard["data"]["memgate.json"].as_str().context("memgate.json")?)?;
    ensure!(json["panels"].as_array().is_some_and(|p| p.len() >= 6), "the dashboard has panels");
    let exported = format!(
        "{}{}",
        std::fs::read_to_string(repo("gateway/src/metrics.rs"))?,
        std::fs::read_to_string(repo("operator/src/metrics.rs"))?
    );
    let queried = metric_names(&format!("{}{}", rule["spec"], json));
    ensure!(queried.len() >= 6, "{queried:?}");
    for name in &queried {
        ensure!(exported.contains(&format!("`{name}`")), "{name} is queried but not a documented memgate metric");
    }
    Ok(())
}
