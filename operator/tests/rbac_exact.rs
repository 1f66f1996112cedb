//! Every rule of `operator/rbac/operator-rbac.yaml` is needed, and together they are enough: the
//! operator runs once with all of them (nothing is forbidden, every code path ran) and once per rule
//! dropped, each time failing in a way that names what the rule grants. Its own control plane, so
//! no other operator does the work in its place.

mod support;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use support::*;

/// What the operator logs when a rule is missing, for a rule (`resources` and `verbs` of it).
fn failure_marker(rule: &Value) -> Vec<String> {
    let verbs: Vec<&str> = rule["verbs"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if verbs == ["bind"] {
        // The API server's escalation check: binding a ClusterRole needs `bind` on it.
        return vec!["attempting to grant RBAC permissions not currently held".into()];
    }
    rule["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|r| format!("\\\"{r}\\\""))
        .collect()
}

#[tokio::test]
async fn the_operator_needs_every_rule_of_its_documented_rbac_and_nothing_more() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let (cluster_role, role) = rbac()?;
    let cluster_rules = serde_json::to_value(&cluster_role.rules)?;
    let role_rules = serde_json::to_value(&role.rules)?;
    let cluster_rules = cluster_rules.as_array().context("rules")?.clone();
    let role_rules = role_rules.as_array().context("rules")?.clone();

    // One run with every rule (the control), then one run per rule dropped.
    let mut runs: Vec<(String, Option<Value>)> = vec![("all rules".into(), None)];
    for (i, rule) in cluster_rules.iter().enumerate() {
        runs.push((format!("ClusterRole rule {i} {rule}"), Some(json!({"cluster": i}))));
    }
    for (i, rule) in role_rules.iter().enumerate() {
        runs.push((format!("Role rule {i} {rule}"), Some(json!({"role": i}))));
    }
    let mut tasks = Vec::new();
    for (label, dropped) in runs {
        let (admin, mut cluster_role, mut role) = (admin.clone(), cluster_role.clone(), role.clone());
        let (cluster_rules, role_rules) = (cluster_rules.clone(), role_rules.clone());
        tasks.push(async move {
            let home = cp.new_namespace("op-rbac").await?;
            let ns = cp.new_namespace("rbac").await?;
            let marker = match &dropped {
                Some(d) if d.get("cluster").is_some() => {
                    let i = d["cluster"].as_u64().unwrap_or_default() as usize;
                    cluster_role.rules.as_mut().map(|r| r.remove(i));
                    failure_marker(&cluster_rules[i])
                }
                Some(d) => {
                    let i = d["role"].as_u64().unwrap_or_default() as usize;
                    role.rules.as_mut().map(|r| r.remove(i));
                    failure_marker(&role_rules[i])
                }
                None => Vec::new(),
            };
            let dir = tempfile::tempdir()?;
            let kubeconfig = operator_identity(cp, &admin, &home, cluster_role, role, dir.path()).await?;
            // Every code path: a Secret, a Nexent claim, ServiceAccount callers (the binding), Events,
            // the NetworkPolicy and (two replicas: nothing here ingests) the PodDisruptionBudget.
            apply(&admin, secret(&ns, "mem0-api", &[("api-key", "rbac-key")])).await?;
            apply(&admin, claim(&ns, "nexent-memory-plugins")).await?;
            let spec = json!({"nexent": {"search": true},
                "access": {"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": ns.clone()}]}}});
            apply(&admin, provider(&ns, "everything", "mem0-api", spec)).await?;
            // A MemoryGateway asking for autoscaling: its status, and the HorizontalPodAutoscaler.
            apply(
                &admin,
                json!({"apiVersion": "memgate.io/v1alpha1", "kind": "MemoryGateway",
                       "metadata": {"name": "shape", "namespace": ns.clone()},
                       "spec": {"autoscaling": {"minReplicas": 2, "maxReplicas": 4}}}),
            )
            .await?;
            let args: Vec<String> =
                ["--leader-election-namespace", &home, "--watch-namespaces", &ns, "--gateway-network-policy", "true"]
                    .map(String::from)
                    .into();
            let operator = Operator::start(&kubeconfig, dir.path().join("operator.log"), &args).await?;
            if marker.is_empty() {
                wait_condition(&admin, &ns, "everything", "ResolvedRefs", "True", "ResolvedRefs").await?;
                eventually("the binding", || async {
                    get(&admin, "ClusterRoleBinding", None, &format!("memgate-gateway-{ns}")).await.ok()?
                })
                .await?;
                for kind in ["NetworkPolicy", "PodDisruptionBudget", "HorizontalPodAutoscaler"] {
                    eventually(&format!("the {kind}"), || async {
                        get(&admin, kind, Some(&ns), "memgate-gateway").await.ok()?
                    })
                    .await?;
                }
                eventually("the MemoryGateway's status", || async {
                    let object = get(&admin, "MemoryGateway", Some(&ns), "shape").await.ok()??;
                    (condition(&object, "Accepted")?.0 == "True").then_some(())
                })
                .await?;
                eventually("the transition Events", || async {
                    let list = Api::<Event>::namespaced(admin.clone(), &ns).list(&ListParams::default()).await.ok()?;
                    (!list.items.is_empty()).then_some(())
                })
                .await?;
                let log = operator.log_text();
                ensure!(!log.to_lowercase().contains("forbidden"), "{label}: nothing may be forbidden:\n{log}");
            } else {
                eventually(&format!("a failure naming {marker:?} ({label})"), || async {
                    let log = operator.log_text();
                    log.lines()
                        .any(|line| {
                            (line.contains("forbidden") || line.contains("Forbidden"))
                                && marker.iter().any(|m| line.contains(m.as_str()))
                        })
                        .then_some(())
                })
                .await
                .with_context(|| format!("{label}:\n{}", operator.log_text()))?;
            }
            anyhow::Ok(label)
        });
    }
    let results = futures::future::join_all(tasks).await;
    let mut failed = Vec::new();
    for result in results {
        if let Err(error) = result {
            failed.push(format!("{error:#}"));
        }
    }
    ensure!(failed.is_empty(), "{}", failed.join("\n\n"));
    Ok(())
}
