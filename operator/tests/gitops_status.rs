//! What GitOps tools conclude from the statuses the operator writes, on a real API server: every
//! reason the operator can write is produced on a real object, and each object's verdict is
//! computed by the real kstatus (`sigs.k8s.io/cli-utils`, what Flux, kpt and kubectl-based
//! pipelines use; `e2e/kube-tools`) and by the chart's Argo CD health check
//! (`charts/memgate/files/argocd-health.lua`, run in Lua 5.1 without standard libraries, as Argo CD
//! runs resource customizations), against the committed table `tests/gitops/verdicts.txt`. Then the
//! states a pipeline waits through: a Secret created late turns its provider from InProgress to
//! Current, and `kubectl wait` (the real kubectl) ends for the good path on `condition=Ready` and
//! for a failure on `jsonpath=...Stalled...=True`.
//!
//! A control plane of its own: to produce `DialectNotAccepted` the DialectPreset CRD is replaced by
//! one without its CEL rules (an older CRD beside a newer operator), since the current CRD refuses
//! such a preset at admission.

mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::*;

fn kube_tool(name: &str) -> Result<PathBuf> {
    let folder = std::env::var_os("MEMGATE_KUBE_TOOLS")
        .context("MEMGATE_KUBE_TOOLS is not set: run e2e/kube-tools/provide.sh (scripts/test.sh does)")?;
    let path = PathBuf::from(folder).join(name);
    ensure!(path.is_file(), "{} is missing", path.display());
    Ok(path)
}

/// kstatus's verdict on each object, by name.
async fn kstatus(objects: &[Value]) -> Result<BTreeMap<String, String>> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(kube_tool("kstatus")?)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    stdin.write_all(serde_json::to_string(objects)?.as_bytes()).await?;
    drop(stdin);
    let output = child.wait_with_output().await?;
    ensure!(output.status.success(), "kstatus: {}", String::from_utf8_lossy(&output.stderr));
    let mut verdicts = BTreeMap::new();
    for line in String::from_utf8(output.stdout)?.lines() {
        let verdict: Value = serde_json::from_str(line)?;
        let name = verdict["name"].as_str().context("name")?.to_string();
        verdicts.insert(name, verdict["status"].as_str().context("status")?.to_string());
    }
    Ok(verdicts)
}

/// The Argo CD health of `object` by the chart's Lua, in Lua 5.1 with only `base`, `table` and
/// `package` loaded (Argo CD's sandbox for `argocd-cm` scripts: no string, math or os library).
fn argocd_health(object: &Value) -> Result<(String, String)> {
    let script = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/memgate/files/argocd-health.lua"),
    )?;
    // mlua's errors are not Send: keep their text only.
    run_lua(&script, object).map_err(|e| anyhow::anyhow!("argocd-health.lua: {e}"))
}

fn run_lua(script: &str, object: &Value) -> mlua::Result<(String, String)> {
    use mlua::{Lua, LuaOptions, LuaSerdeExt, StdLib, Table};
    let lua = Lua::new_with(StdLib::TABLE | StdLib::PACKAGE, LuaOptions::default())?;
    let globals = lua.globals();
    for unsafe_name in ["dofile", "loadfile"] {
        globals.set(unsafe_name, mlua::Value::Nil)?;
    }
    // JSON null stays nil, arrays are plain tables (ipairs works), as Argo CD decodes objects.
    let options = mlua::serde::SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(false);
    globals.set("obj", lua.to_value_with(object, options)?)?;
    let health: Table = lua.load(script).set_name("argocd-health.lua").eval()?;
    Ok((health.get("status")?, health.get::<Option<String>>("message")?.unwrap_or_default()))
}

/// An object as `kubectl get -o json` shows it.
async fn fetch(admin: &kube::Client, kind: &str, namespace: Option<&str>, name: &str) -> Result<Value> {
    let object = get(admin, kind, namespace, name).await?.with_context(|| format!("{kind}/{name}"))?;
    let mut value = serde_json::to_value(&object)?;
    value["apiVersion"] = json!("memgate.io/v1alpha1");
    value["kind"] = json!(kind);
    Ok(value)
}

/// The Deployment of `namespace` reporting that its rollout exceeded its progress deadline.
async fn exceed_progress_deadline(admin: &kube::Client, namespace: &str) -> Result<()> {
    let deployment = get(admin, "Deployment", Some(namespace), "memgate-gateway").await?.context("Deployment")?;
    let generation = deployment.metadata.generation.unwrap_or(1);
    let status = json!({"status": {"observedGeneration": generation, "replicas": 2, "updatedReplicas": 1,
        "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                        "message": "ReplicaSet has timed out progressing."}]}});
    let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), namespace, &resource("Deployment"));
    api.patch_status("memgate-gateway", &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

/// The DialectPreset CRD without its CEL rules: what an older CRD would admit.
async fn loosen_preset_crd(admin: &kube::Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let mut crd = serde_json::to_value(memgate_crds::crd::all().remove(0))?;
    fn strip(value: &mut Value) {
        match value {
            Value::Object(map) => {
                map.remove("x-kubernetes-validations");
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut crd);
    ensure!(crd["metadata"]["name"] == "dialectpresets.memgate.io");
    crds.patch("dialectpresets.memgate.io", &PatchParams::apply("older-crd").force(), &Patch::Apply(&crd)).await?;
    eventually("the loosened DialectPreset CRD to admit an out-of-range threshold", || async {
        let probe = json!({"apiVersion": "memgate.io/v1alpha1", "kind": "DialectPreset",
            "metadata": {"name": "probe-threshold"}, "spec": dialect(Some(1.5))});
        let params = PatchParams::apply("tester").dry_run();
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &resource("DialectPreset"));
        api.patch("probe-threshold", &params, &Patch::Apply(&serde_json::from_value::<DynamicObject>(probe).ok()?))
            .await
            .ok()
    })
    .await?;
    Ok(())
}

fn dialect(threshold: Option<f64>) -> Value {
    let mut search = json!({"method": "POST", "path": "/search", "queryLocation": "json", "userIdLocation": "json",
        "agentIdLocation": "omit", "appIdLocation": "omit", "limitField": "limit"});
    if let Some(threshold) = threshold {
        search["threshold"] = json!(threshold);
    }
    json!({"dialectVersion": 1, "auth": "authorization-bearer", "search": search,
        "response": {"collection": "results", "idField": "id", "contentField": "memory", "titleField": "omit",
                     "uriField": "omit", "scoreField": "score", "updatedAtField": "omit"}})
}

/// `kind/name reason kstatus argocd` lines of the committed table.
fn committed() -> Result<BTreeMap<String, (String, String, String)>> {
    let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/gitops/verdicts.txt"))?;
    let mut table = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [object, reason, kstatus, argocd] = fields[..] else { bail!("a table line has four fields: {line}") };
        table.insert(object.to_string(), (reason.to_string(), kstatus.to_string(), argocd.to_string()));
    }
    Ok(table)
}

async fn kubectl_wait(cp: &memgate_e2e::ControlPlane, namespace: &str, name: &str, condition: &str) -> Result<bool> {
    let status = tokio::process::Command::new(kube_tool("kubectl")?)
        .arg("--kubeconfig")
        .arg(cp.kubeconfig_path())
        .args([
            "wait",
            "--namespace",
            namespace,
            &format!("memoryproviders.memgate.io/{name}"),
            condition,
            "--timeout=20s",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .await?;
    Ok(status.success())
}

#[tokio::test]
async fn gitops_tools_tell_done_failed_and_waiting_apart_for_every_reason() -> Result<()> {
    let (cp, admin) = dedicated_control_plane().await?;
    loosen_preset_crd(&admin).await?;
    let home = cp.new_namespace("op-gitops").await?;
    let main = cp.new_namespace("main").await?;
    let waiting = cp.new_namespace("waiting").await?;
    let stuck = cp.new_namespace("stuck").await?;
    let refused = cp.new_namespace("refused").await?;
    let idle = cp.new_namespace("idle").await?;
    // Every namespace (DialectPreset status is written by an operator that sees them all).
    let mut running = start_operator(&cp, &admin, &home, &[], &["--allowed-upstream-origin", "*.memory.svc"]).await?;

    apply(&admin, preset("valid-dialect", "/search")).await?;
    let invalid = json!({"apiVersion": "memgate.io/v1alpha1", "kind": "DialectPreset",
        "metadata": {"name": "invalid-dialect"}, "spec": dialect(Some(1.5))});
    apply(&admin, invalid).await?;
    for ns in [&main, &waiting, &stuck, &refused] {
        apply(&admin, secret(ns, "mem0-api", &[("api-key", "a-mem0-key"), ("blank", " ")])).await?;
    }
    // An admission policy of the cluster refuses every Deployment write in `refused`.
    apply(&admin, json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-deployments"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                     "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                 "validations": [{"expression": "false", "message": "no Deployments in this namespace (a test policy)"}]}}))
    .await?;
    apply(
        &admin,
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-deployments"},
        "spec": {"policyName": "no-deployments", "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": refused}}}}}),
    )
    .await?;
    // A policy takes effect a moment after it is stored: wait until a dry run is refused.
    eventually("the admission policy to refuse Deployments", || async {
        let probe: DynamicObject = serde_json::from_value(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "probe", "namespace": refused},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}))
        .ok()?;
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &refused, &resource("Deployment"));
        let result = api.patch("probe", &PatchParams::apply("tester").dry_run(), &Patch::Apply(&probe)).await;
        result.is_err().then_some(())
    })
    .await?;
    let providers: Vec<(&str, &str, Value)> = vec![
        (&main, "ready", json!({})),
        (&main, "disabled", json!({"enabled": false})),
        (&main, "invalid-spec", json!({"scope": {"userId": "u", "agentId": "a", "appId": "not-sent"}})),
        (&main, "origin-not-allowed", json!({"endpoint": {"origin": "https://mem0.example.com"}})),
        (&main, "dialect-not-found", json!({"dialect": {"presetRef": "no-such-dialect"}, "scope": {"userId": "u"}})),
        (&main, "dialect-not-accepted", json!({"dialect": {"presetRef": "invalid-dialect"}, "scope": {"userId": "u"}})),
        (&main, "secret-not-permitted", json!({"credentials": {"secretRef": {"name": "late-api", "key": "api-key"}}})),
        (&main, "secret-key-missing", json!({"credentials": {"secretRef": {"name": "mem0-api", "key": "absent"}}})),
        (&main, "secret-value-invalid", json!({"credentials": {"secretRef": {"name": "mem0-api", "key": "blank"}}})),
        (&main, "plugin-claim-not-found", json!({"nexent": {"search": true}})),
        (&waiting, "progressing", json!({})),
        (&stuck, "deadline-exceeded", json!({})),
        (&refused, "apply-failed", json!({})),
    ];
    for (ns, name, mut spec) in providers.clone() {
        if spec.get("endpoint").is_none() {
            spec["endpoint"] = json!({"origin": "http://mem0.memory.svc:8888", "allowInsecureHttp": true});
        }
        apply(&admin, provider(ns, name, "mem0-api", spec)).await?;
    }
    // MemoryGateways: the one shaping main's gateway, a second one there (refused), and one in a
    // namespace without providers. `gateway` sorts first, so it wins even within the same second.
    let gateways = [(&main, "gateway"), (&main, "gateway-second"), (&idle, "gateway-idle")];
    for (ns, name) in gateways {
        apply(
            &admin,
            json!({"apiVersion": "memgate.io/v1alpha1", "kind": "MemoryGateway",
            "metadata": {"name": name, "namespace": ns}, "spec": {"logLevel": "info"}}),
        )
        .await?;
    }
    let expected = committed()?;
    let reason_of = |name: &str| expected.get(&format!("MemoryProvider/{name}")).map(|e| e.0.clone());
    // The states the table names, simulating what the Deployment controller would report.
    for (ns, name, _) in &providers {
        if *name == "ready" || *name == "deadline-exceeded" {
            continue;
        }
        let reason = reason_of(name).with_context(|| format!("{name} is in the table"))?;
        eventually(&format!("{name} to be {reason}"), || async {
            let object = get(&admin, "MemoryProvider", Some(ns), name).await.ok()??;
            (condition(&object, "Ready")?.1 == reason).then_some(())
        })
        .await
        .with_context(|| running.operator.log_text())?;
    }
    eventually("the gateway of main rolled out and `ready` Ready", || async {
        simulate_rollout(&admin, &main).await.ok()?;
        let object = get(&admin, "MemoryProvider", Some(&main), "ready").await.ok()??;
        (condition(&object, "Ready")?.1 == "Ready").then_some(())
    })
    .await?;
    eventually("the deadline of stuck's gateway exceeded", || async {
        exceed_progress_deadline(&admin, &stuck).await.ok()?;
        let object = get(&admin, "MemoryProvider", Some(&stuck), "deadline-exceeded").await.ok()??;
        (condition(&object, "Ready")?.1 == "GatewayNotReady").then_some(())
    })
    .await?;
    for (ns, name) in gateways {
        let reason = expected.get(&format!("MemoryGateway/{name}")).map(|e| e.0.clone()).context("in the table")?;
        eventually(&format!("MemoryGateway {name} to be {reason}"), || async {
            simulate_rollout(&admin, &main).await.ok()?;
            let object = get(&admin, "MemoryGateway", Some(ns), name).await.ok()??;
            (condition(&object, "Ready")?.1 == reason).then_some(())
        })
        .await
        .with_context(|| running.operator.log_text())?;
    }
    for preset in ["valid-dialect", "invalid-dialect"] {
        eventually(&format!("{preset}'s status"), || async {
            let object = get(&admin, "DialectPreset", None, preset).await.ok()??;
            condition(&object, "Stalled").map(|_| ())
        })
        .await?;
    }

    // Every object, by the real kstatus and by the Argo CD health check.
    let mut objects = Vec::new();
    for (ns, name, _) in &providers {
        objects.push((format!("MemoryProvider/{name}"), fetch(&admin, "MemoryProvider", Some(ns), name).await?));
    }
    for (ns, name) in gateways {
        objects.push((format!("MemoryGateway/{name}"), fetch(&admin, "MemoryGateway", Some(ns), name).await?));
    }
    for preset in ["valid-dialect", "invalid-dialect"] {
        objects.push((format!("DialectPreset/{preset}"), fetch(&admin, "DialectPreset", None, preset).await?));
    }
    let values: Vec<Value> = objects.iter().map(|(_, v)| v.clone()).collect();
    let by_kstatus = kstatus(&values).await?;
    let mut found = Vec::new();
    let mut mismatches = Vec::new();
    for (id, object) in &objects {
        let name = object["metadata"]["name"].as_str().context("name")?;
        let reason = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready").and_then(|c| c["reason"].as_str()).map(String::from));
        let reason = reason.unwrap_or_else(|| "-".into());
        let (argocd, _) = argocd_health(object)?;
        let row = (reason, by_kstatus.get(name).cloned().unwrap_or_default(), argocd);
        found.push(format!("{id} {} {} {}", row.0, row.1, row.2));
        if expected.get(id) != Some(&row) {
            mismatches.push(format!("{id}: expected {:?}, found {row:?}", expected.get(id)));
        }
    }
    ensure!(expected.len() == objects.len(), "the table has {} rows for {} objects", expected.len(), objects.len());
    ensure!(mismatches.is_empty(), "{}\nall found:\n{}", mismatches.join("\n"), found.join("\n"));

    // Every reason the operator can write on Ready is in the table.
    let covered: std::collections::BTreeSet<&str> = expected.values().map(|e| e.0.as_str()).collect();
    for reason in memgate_operator::reasons::Reason::ALL {
        if reason.progress().is_some() {
            ensure!(covered.contains(reason.as_str()), "no object of the table has Ready reason {reason}");
        }
    }

    // kubectl wait: the good path on Ready, a failure on Stalled.
    ensure!(kubectl_wait(&cp, &main, "ready", "--for=condition=Ready").await?, "kubectl wait --for=condition=Ready");
    let stalled = "--for=jsonpath={.status.conditions[?(@.type==\"Stalled\")].status}=True";
    ensure!(kubectl_wait(&cp, &main, "invalid-spec", stalled).await?, "kubectl wait for Stalled=True");

    // A Secret that appears later: InProgress, then Current once the gateway serves it.
    let late = fetch(&admin, "MemoryProvider", Some(&main), "secret-not-permitted").await?;
    ensure!(kstatus(&[late]).await?.get("secret-not-permitted").map(String::as_str) == Some("InProgress"));
    apply(&admin, secret(&main, "late-api", &[("api-key", "a-late-key")])).await?;
    eventually("the late Secret's provider Ready", || async {
        simulate_rollout(&admin, &main).await.ok()?;
        let object = get(&admin, "MemoryProvider", Some(&main), "secret-not-permitted").await.ok()??;
        (condition(&object, "Ready")?.1 == "Ready").then_some(())
    })
    .await?;
    let healed = fetch(&admin, "MemoryProvider", Some(&main), "secret-not-permitted").await?;
    ensure!(
        kstatus(std::slice::from_ref(&healed)).await?.get("secret-not-permitted").map(String::as_str)
            == Some("Current")
    );
    ensure!(argocd_health(&healed)?.0 == "Healthy");
    running.operator.kill().await?;
    Ok(())
}
