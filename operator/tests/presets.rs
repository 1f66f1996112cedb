//! An unrestricted operator (no `--watch-namespaces`, exactly the documented RBAC) on its own
//! control plane: it owns DialectPreset status, since it alone sees every provider using a preset.

mod support;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use support::*;

fn preset_condition(object: &kube::api::DynamicObject) -> Option<(String, String, i64)> {
    let (status, reason, _) = condition(object, "Accepted")?;
    let providers = object.data.pointer("/status/providers")?.as_i64()?;
    Some((status, reason, providers))
}

#[tokio::test]
async fn dialect_presets_are_accepted_count_their_providers_and_a_replaced_preset_is_noticed() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-presets").await?;
    let a = cp.new_namespace("presets-a").await?;
    let b = cp.new_namespace("presets-b").await?;
    let name = format!("{a}-dialect");
    let _running = start_operator(cp, &admin, &home, &[], &[]).await?;

    apply(&admin, preset(&name, "/v1/search")).await?;
    let wait_preset = |users: i64| {
        let (admin, name) = (admin.clone(), name.clone());
        async move {
            eventually(&format!("DialectPreset {name} Accepted with {users} providers"), || async {
                let object = get(&admin, "DialectPreset", None, &name).await.ok()??;
                let (status, reason, providers) = preset_condition(&object)?;
                (status == "True" && reason == "Accepted" && providers == users).then_some(object)
            })
            .await
        }
    };
    wait_preset(0).await?;
    for namespace in [&a, &b] {
        apply(&admin, secret(namespace, "mem0-api", &[("api-key", "k")])).await?;
        let spec = json!({"dialect": {"presetRef": name}, "scope": {"userId": "u"}});
        apply(&admin, provider(namespace, "team", "mem0-api", spec)).await?;
    }
    wait_preset(2).await?;
    let before = wait_condition(&admin, &a, "team", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let pinned = before.data.pointer("/status/preset").cloned().context("pinned preset")?;

    // Deleted and re-created under the same name with another spec: noticed, re-rendered, announced.
    delete(&admin, "DialectPreset", None, &name).await?;
    wait_condition(&admin, &a, "team", "ResolvedRefs", "False", "DialectNotFound").await?;
    apply(&admin, preset(&name, "/v2/search")).await?;
    let after = eventually("the provider to pin the new preset", || async {
        let object = get(&admin, "MemoryProvider", Some(&a), "team").await.ok()??;
        let now = object.data.pointer("/status/preset")?.clone();
        (now["uid"] != pinned["uid"] && now["specHash"] != pinned["specHash"]).then_some(object)
    })
    .await?;
    ensure!(condition(&after, "ResolvedRefs").is_some_and(|c| c.0 == "True"));
    eventually("the config to carry the new path", || async {
        let config = get(&admin, "ConfigMap", Some(&a), "memgate-gateway").await.ok()??;
        let text = config.data.pointer("/data/gateway.yaml")?.as_str()?.to_string();
        text.contains("/v2/search").then_some(())
    })
    .await?;
    wait_preset(2).await?;
    delete(&admin, "MemoryProvider", Some(&b), "team").await?;
    wait_preset(1).await?;
    let events: Vec<Event> = Api::<Event>::namespaced(admin.clone(), &a).list(&ListParams::default()).await?.items;
    ensure!(
        events.iter().any(|e| e.reason.as_deref() == Some("DialectNotFound")),
        "the missing preset was announced: {:?}",
        events.iter().map(|e| e.reason.clone()).collect::<Vec<_>>()
    );
    Ok(())
}
