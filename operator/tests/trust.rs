//! The operator's side of the trust model (SECURITY.md), on the real kube-apiserver + etcd, the
//! operator as a real process bound to exactly `operator/rbac/operator-rbac.yaml`:
//!
//! - a provider author names Secrets the platform team did not label: absent, unlabelled and
//!   "unlabelled with a key that does not exist" are one and the same reason and message; nothing of
//!   the Secret reaches any object, Event, log or metric; labelling it heals the provider without a
//!   restart;
//! - destinations a gateway must never reach are refused (cloud metadata by address and name,
//!   loopback and the API server in a cluster), and the platform team's allow-list holds
//!   (`OriginNotAllowed`, for the origin and the OIDC issuer).

mod support;

use anyhow::{Context, Result, ensure};
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::json;
use support::*;

async fn everything_written(admin: &kube::Client, namespace: &str, running: &Running) -> Result<Vec<(String, String)>> {
    let mut written = Vec::new();
    for kind in ["ConfigMap", "Deployment", "Service", "ServiceAccount", "MemoryProvider"] {
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), namespace, &resource(kind));
        for object in api.list(&ListParams::default()).await?.items {
            let name = object.metadata.name.clone().unwrap_or_default();
            written.push((format!("{kind}/{name}"), serde_json::to_string(&object)?));
        }
    }
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), namespace);
    for event in events.list(&ListParams::default()).await?.items {
        written.push(("Event".into(), serde_json::to_string(&event)?));
    }
    written.push(("operator log".into(), running.operator.log_text()));
    written.push(("operator metrics".into(), running.operator.get("/metrics").await?));
    Ok(written)
}

#[tokio::test]
async fn a_provider_author_cannot_use_a_secret_the_platform_team_did_not_label() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-trust").await?;
    let ns = cp.new_namespace("trust").await?;
    let mut running = start_operator(cp, &admin, &home, &[&ns], &[]).await?;
    let planted = format!("PLANTED-DB-PASSWORD-{ns}");

    // Another team's database password: in the namespace, not labelled for memgate.
    apply(&admin, unlabelled_secret(&ns, "db-password", &[("api-key", &planted), ("password", &planted)])).await?;
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "a-real-mem0-key")])).await?;
    // The author points a provider at it (with an origin of their own choosing), probes a key that
    // does not exist in it, and a Secret that does not exist at all.
    let to_attacker = json!({"endpoint": {"origin": "https://collector.attacker.example"}});
    apply(&admin, provider(&ns, "thief", "db-password", to_attacker)).await?;
    let mut probe = provider(&ns, "key-probe", "db-password", json!({}));
    probe["spec"]["credentials"]["secretRef"]["key"] = json!("no-such-key");
    apply(&admin, probe).await?;
    apply(&admin, provider(&ns, "ghost", "no-such-secret", json!({}))).await?;
    apply(&admin, provider(&ns, "honest", "mem0-api", json!({}))).await?;

    let mut messages = Vec::new();
    for (name, secret) in [("thief", "db-password"), ("key-probe", "db-password"), ("ghost", "no-such-secret")] {
        let object = wait_condition(&admin, &ns, name, "ResolvedRefs", "False", "SecretNotPermitted").await?;
        let (_, _, message) = condition(&object, "ResolvedRefs").context("ResolvedRefs")?;
        ensure!(message.contains("memgate.io/credential=true"), "says how to opt in: {message}");
        messages.push(message.replace(secret, "<secret>"));
    }
    ensure!(
        messages.iter().all(|m| *m == messages[0]),
        "absent, unlabelled and unlabelled-without-the-key read alike, so nothing can be probed: {messages:#?}"
    );
    wait_condition(&admin, &ns, "honest", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let config = eventually("the gateway config serving `honest` only", || async {
        let map = get(&admin, "ConfigMap", Some(&ns), "memgate-gateway").await.ok()??;
        let text = map.data.pointer("/data/gateway.yaml")?.as_str()?.to_string();
        text.contains("name: honest").then_some(text)
    })
    .await?;
    ensure!(!config.contains("thief") && !config.contains("db-password"), "{config}");
    let deployment = get(&admin, "Deployment", Some(&ns), "memgate-gateway").await?.context("Deployment")?;
    ensure!(!serde_json::to_string(&deployment.data)?.contains("db-password"), "the unlabelled Secret is not mounted");
    for (what, text) in everything_written(&admin, &ns, &running).await? {
        ensure!(!text.contains(&planted), "{what} holds the unlabelled Secret's value");
    }

    // The platform team decides the Secret is a memgate credential after all: labelled, the
    // provider resolves with no restart of the operator.
    edit(
        &admin,
        "Secret",
        Some(&ns),
        "db-password",
        json!({"metadata": {"labels": {"memgate.io/credential": "true"}}}),
    )
    .await?;
    wait_condition(&admin, &ns, "thief", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let probed = wait_condition(&admin, &ns, "key-probe", "ResolvedRefs", "False", "SecretKeyMissing").await?;
    ensure!(condition(&probed, "ResolvedRefs").is_some_and(|c| c.2.contains("no-such-key")));
    eventually("the labelled Secret mounted", || async {
        let d = get(&admin, "Deployment", Some(&ns), "memgate-gateway").await.ok()??;
        serde_json::to_string(&d.data).ok()?.contains("db-password").then_some(())
    })
    .await?;
    ensure!(running.operator.is_running(), "no restart");
    for (what, text) in everything_written(&admin, &ns, &running).await? {
        ensure!(!text.contains(&planted), "{what} holds the Secret's value once it is used");
    }
    running.operator.kill().await?;
    Ok(())
}

#[tokio::test]
async fn destinations_a_gateway_must_never_reach_are_refused_and_the_allow_list_holds() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-origins").await?;
    let ns = cp.new_namespace("origins").await?;
    let allowed = ["--allowed-upstream-origin", "*.example.com", "--allowed-upstream-origin", "10.0.0.0/8"];
    let mut running = start_operator(cp, &admin, &home, &[&ns], &allowed).await?;
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "key")])).await?;
    let refused = [
        ("aws-metadata", "http://169.254.169.254", "link-local"),
        ("aws-metadata-v6", "http://[fd00:ec2::254]", "cloud metadata address"),
        ("gcp-metadata", "http://metadata.google.internal", "cloud metadata service name"),
        ("loopback", "http://127.0.0.1:8080", "loopback"),
        ("api-server", "https://kubernetes.default.svc", "API server"),
    ];
    for (name, origin, _) in refused {
        apply(
            &admin,
            provider(&ns, name, "mem0-api", json!({"endpoint": {"origin": origin, "allowInsecureHttp": true}})),
        )
        .await?;
    }
    apply(&admin, provider(&ns, "allowed", "mem0-api", json!({"endpoint": {"origin": "https://mem0.example.com"}})))
        .await?;
    apply(
        &admin,
        provider(
            &ns,
            "by-address",
            "mem0-api",
            json!({"endpoint": {"origin": "http://10.1.2.3:8888", "allowInsecureHttp": true}}),
        ),
    )
    .await?;
    apply(&admin, provider(&ns, "elsewhere", "mem0-api", json!({"endpoint": {"origin": "https://mem0.other.org"}})))
        .await?;
    let foreign_issuer = json!({"endpoint": {"origin": "https://mem0.example.com"},
        "access": {"oidc": {"issuer": "https://login.other.org"}}});
    apply(&admin, provider(&ns, "foreign-issuer", "mem0-api", foreign_issuer)).await?;

    for (name, _, why) in refused {
        let object = wait_condition(&admin, &ns, name, "Accepted", "False", "InvalidSpec").await?;
        let (_, _, message) = condition(&object, "Accepted").context("Accepted")?;
        ensure!(message.contains("spec.endpoint.origin: must not name") && message.contains(why), "{name}: {message}");
    }
    for name in ["allowed", "by-address"] {
        wait_condition(&admin, &ns, name, "ResolvedRefs", "True", "ResolvedRefs").await?;
    }
    let outside = wait_condition(&admin, &ns, "elsewhere", "Accepted", "False", "OriginNotAllowed").await?;
    ensure!(condition(&outside, "Accepted").is_some_and(|c| c.2.starts_with("spec.endpoint.origin: is outside")));
    let issuer = wait_condition(&admin, &ns, "foreign-issuer", "Accepted", "False", "OriginNotAllowed").await?;
    ensure!(condition(&issuer, "Accepted").is_some_and(|c| c.2.starts_with("spec.access.oidc.issuer: is outside")));
    let config = eventually("the gateway config", || async {
        let map = get(&admin, "ConfigMap", Some(&ns), "memgate-gateway").await.ok()??;
        map.data.pointer("/data/gateway.yaml")?.as_str().map(String::from).filter(|t| t.contains("name: by-address"))
    })
    .await?;
    for (name, _, _) in refused {
        ensure!(!config.contains(&format!("name: {name}")), "{name} must not be rendered:\n{config}");
    }
    ensure!(!config.contains("name: elsewhere") && !config.contains("name: foreign-issuer"), "{config}");
    let deployment = get(&admin, "Deployment", Some(&ns), "memgate-gateway").await?.context("Deployment")?;
    let args = deployment.data.pointer("/spec/template/spec/containers/0/args").cloned().unwrap_or_default();
    let args: Vec<String> = serde_json::from_value(args)?;
    ensure!(args.windows(2).any(|w| w == ["--placement", "cluster"]), "the gateway refuses loopback too: {args:?}");
    ensure!(args.windows(2).any(|w| w[0] == "--gateway-id" && w[1] == format!("{ns}/memgate-gateway")), "{args:?}");
    running.operator.kill().await?;
    Ok(())
}
