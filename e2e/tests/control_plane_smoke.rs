//! Smoke tests proving the test control plane is a real Kubernetes API server: objects are stored and defaulted,
//! CEL rules of CRDs are enforced, watches see updates, service account tokens are issued and reviewed.
//!
//! Most tests share one control plane (started by whichever test comes first) and each works in its own
//! namespace; the lifecycle tests start their own.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, Config, ResourceExt};
use memgate_e2e::{ControlPlane, Error, TEST_NAMESPACE_LABEL, pinned_versions};
use serde_json::json;

/// The shared control plane, a fresh namespace and a client for this test.
async fn setup(prefix: &str) -> Result<(&'static ControlPlane, String, Client)> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace(prefix).await?;
    Ok((control_plane, namespace, control_plane.client()?))
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() }
}

#[tokio::test]
async fn namespace_secret_configmap_and_deployment_are_stored_and_defaulted() -> Result<()> {
    let (control_plane, namespace, client) = setup("objects").await?;

    let stored_namespace = Api::<Namespace>::all(client.clone()).get(&namespace).await?;
    ensure!(namespace.starts_with("objects-"), "generated name {namespace}");
    ensure!(stored_namespace.labels().get(TEST_NAMESPACE_LABEL).map(String::as_str) == Some("true"));

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = Secret {
        metadata: named("credentials"),
        string_data: Some(BTreeMap::from([("api-key".to_owned(), "s3cr3t".to_owned())])),
        ..Secret::default()
    };
    secrets.create(&PostParams::default(), &secret).await?;
    let stored = secrets.get("credentials").await?;
    let data = stored.data.context("stringData was moved into data")?;
    ensure!(data.get("api-key").map(|v| v.0.as_slice()) == Some(b"s3cr3t".as_slice()));
    ensure!(stored.type_.as_deref() == Some("Opaque"), "type defaulted: {:?}", stored.type_);

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let config_map = ConfigMap {
        metadata: named("settings"),
        data: Some(BTreeMap::from([("mode".to_owned(), "strict".to_owned())])),
        ..ConfigMap::default()
    };
    config_maps.create(&PostParams::default(), &config_map).await?;
    let stored = config_maps.get("settings").await?;
    ensure!(stored.data.and_then(|d| d.get("mode").cloned()).as_deref() == Some("strict"));

    let deployments: Api<Deployment> = Api::namespaced(client, &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "gateway" },
        "spec": {
            "selector": { "matchLabels": { "app": "gateway" } },
            "template": {
                "metadata": { "labels": { "app": "gateway" } },
                "spec": { "containers": [{ "name": "gateway", "image": "example.invalid/gateway:1" }] }
            }
        }
    }))?;
    deployments.create(&PostParams::default(), &deployment).await?;
    let stored = deployments.get("gateway").await?;
    let spec = stored.spec;
    ensure!(spec.replicas == Some(1), "replicas defaulted by the API server: {:?}", spec.replicas);
    let strategy = spec.strategy.and_then(|s| s.type_);
    ensure!(strategy.as_deref() == Some("RollingUpdate"), "strategy defaulted: {strategy:?}");
    // No controller manager: nothing ever reports on the Deployment.
    ensure!(stored.status.is_none_or(|s| s.replicas.is_none()), "no controller wrote a status");

    control_plane.check_alive()?;
    Ok(())
}

#[tokio::test]
async fn cel_rule_of_a_crd_rejects_an_invalid_object_with_its_message() -> Result<()> {
    let (_, namespace, client) = setup("cel").await?;
    const MESSAGE: &str = "minReplicas must not exceed maxReplicas";

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": { "name": "widgets.e2e.memgate.dev" },
        "spec": {
            "group": "e2e.memgate.dev",
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": {
                        "type": "object",
                        "required": ["minReplicas", "maxReplicas"],
                        "properties": {
                            "minReplicas": { "type": "integer" },
                            "maxReplicas": { "type": "integer" }
                        },
                        "x-kubernetes-validations": [{
                            "rule": "self.minReplicas <= self.maxReplicas",
                            "message": MESSAGE
                        }]
                    }}
                }}
            }]
        }
    }))?;
    crds.create(&PostParams::default(), &crd).await?;
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds, "widgets.e2e.memgate.dev", conditions::is_crd_established()),
    )
    .await
    .context("CRD established within 30 s")??;

    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("e2e.memgate.dev", "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, &namespace, &resource);
    let widget = |name: &str, min: i64, max: i64| {
        DynamicObject::new(name, &resource).data(json!({ "spec": { "minReplicas": min, "maxReplicas": max } }))
    };

    widgets.create(&PostParams::default(), &widget("valid", 1, 3)).await?;
    ensure!(widgets.get("valid").await?.data["spec"]["maxReplicas"] == 3);

    match widgets.create(&PostParams::default(), &widget("invalid", 5, 2)).await {
        Err(kube::Error::Api(status)) => {
            ensure!(status.code == 422, "422 Unprocessable Entity, got {status:?}");
            ensure!(status.message.contains(MESSAGE), "message names the rule: {}", status.message);
            ensure!(status.message.contains("spec"), "message names the field: {}", status.message);
        }
        Err(other) => bail!("expected a validation error, got {other}"),
        Ok(_) => bail!("the CEL rule did not reject minReplicas > maxReplicas"),
    }
    ensure!(widgets.get_opt("invalid").await?.is_none(), "the invalid widget was not stored");
    Ok(())
}

#[tokio::test]
async fn watch_sees_an_update() -> Result<()> {
    let (_, namespace, client) = setup("watch").await?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let config_map = ConfigMap {
        metadata: named("watched"),
        data: Some(BTreeMap::from([("version".to_owned(), "1".to_owned())])),
        ..ConfigMap::default()
    };
    let created = config_maps.create(&PostParams::default(), &config_map).await?;
    let version = created.resource_version().context("resourceVersion")?;

    let params = WatchParams::default().fields("metadata.name=watched").timeout(30);
    let mut events = config_maps.watch(&params, &version).await?.boxed();
    config_maps.patch("watched", &PatchParams::default(), &Patch::Merge(json!({ "data": { "version": "2" } }))).await?;

    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.try_next().await? {
            if let WatchEvent::Modified(updated) = event {
                return Ok(updated);
            }
        }
        bail!("the watch ended without a Modified event")
    })
    .await
    .context("a Modified event within 30 s")??;
    ensure!(seen.resource_version() != Some(version), "a new resourceVersion");
    ensure!(seen.data.and_then(|d| d.get("version").cloned()).as_deref() == Some("2"));
    Ok(())
}

#[tokio::test]
async fn token_request_for_a_service_account_passes_token_review() -> Result<()> {
    let (_, namespace, client) = setup("tokens").await?;
    let service_accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let service_account = ServiceAccount { metadata: named("robot"), ..ServiceAccount::default() };
    service_accounts.create(&PostParams::default(), &service_account).await?;

    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let issued = service_accounts.create_token_request("robot", &PostParams::default(), &request).await?;
    let token = issued.status.and_then(|s| s.token).context("TokenRequest status.token")?;
    ensure!(token.split('.').count() == 3, "a JWT");

    let reviews: Api<TokenReview> = Api::all(client);
    let review = |token: String| TokenReview {
        spec: TokenReviewSpec { token, ..TokenReviewSpec::default() },
        ..TokenReview::default()
    };
    let accepted = reviews.create(&PostParams::default(), &review(token)).await?;
    let status = accepted.status.context("TokenReview status")?;
    ensure!(status.authenticated == Some(true), "authenticated: {status:?}");
    let user = status.user.context("user")?;
    let expected = format!("system:serviceaccount:{namespace}:robot");
    ensure!(user.username.as_deref() == Some(expected.as_str()), "username {:?}", user.username);
    ensure!(user.groups.unwrap_or_default().contains(&"system:serviceaccounts".to_owned()));

    let rejected = reviews.create(&PostParams::default(), &review("not-a-token".to_owned())).await?;
    ensure!(rejected.status.and_then(|s| s.authenticated) != Some(true), "a made-up token is not accepted");
    Ok(())
}

#[tokio::test]
async fn kubeconfig_file_and_admin_token_reach_a_version_stamped_kubernetes() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let kubeconfig = Kubeconfig::read_from(control_plane.kubeconfig_path())?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    ensure!(config.cluster_url.to_string().trim_end_matches('/') == control_plane.base_url());
    let client = Client::try_from(config)?;
    let version = client.apiserver_version().await?;
    ensure!(version.major == "1" && version.git_version != "v0.0.0", "a version-stamped build: {version:?}");
    if std::env::var_os("KUBEBUILDER_ASSETS").is_none() {
        ensure!(version.git_version == format!("v{}", pinned_versions().kubernetes), "{version:?}");
    }

    let who = client
        .request::<serde_json::Value>(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&json!({
                    "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"
                }))?)?,
        )
        .await?;
    ensure!(who["status"]["userInfo"]["username"] == "memgate-e2e-admin", "{who}");
    ensure!(control_plane.admin_token().len() == 32);
    Ok(())
}

#[tokio::test]
async fn dropping_a_control_plane_kills_its_processes_and_removes_its_folder_even_on_panic() -> Result<()> {
    let (seen_tx, seen_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let control_plane = ControlPlane::start().await.expect("control plane starts");
        let client = control_plane.client().expect("client");
        Api::<Namespace>::all(client).get("default").await.expect("default namespace");
        let _ = seen_tx.send((control_plane.dir().to_path_buf(), control_plane.pids()));
        panic!("a failing test");
    });
    let join = task.await;
    ensure!(join.is_err_and(|e| e.is_panic()), "the task panicked");
    let (dir, pids) = seen_rx.await.context("the control plane started before the panic")?;
    ensure!(pids.len() == 2);
    ensure!(!dir.exists(), "{} removed", dir.display());
    for pid in pids {
        ensure!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "process {pid} is gone");
    }
    Ok(())
}

#[tokio::test]
async fn a_process_that_dies_is_named_with_its_last_log_lines() -> Result<()> {
    // During startup: a kube-apiserver that fails at once, next to the real etcd.
    let real = memgate_e2e::Binaries::discover()?;
    let fake = tempfile::tempdir()?;
    std::os::unix::fs::symlink(real.etcd(), fake.path().join("etcd"))?;
    let script = fake.path().join("kube-apiserver");
    std::fs::write(&script, "#!/bin/sh\necho starting\necho 'E1202 fatal: simulated failure' >&2\nexit 7\n")?;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
    match ControlPlane::builder().binaries_dir(fake.path()).start().await {
        Err(Error::ProcessDied { process, phase, tail, .. }) => {
            ensure!(process == "kube-apiserver" && phase == "during startup");
            ensure!(tail.ends_with("starting\nE1202 fatal: simulated failure"), "{tail}");
        }
        Err(other) => bail!("expected ProcessDied, got {other}"),
        Ok(_) => bail!("a kube-apiserver that exits cannot become ready"),
    }

    // During a test: the API server is killed under a running control plane.
    let control_plane = ControlPlane::start().await?;
    let [_, apiserver] = control_plane.pids()[..] else { bail!("two pids") };
    let killed = std::process::Command::new("kill").args(["-KILL", &apiserver.to_string()]).status()?;
    ensure!(killed.success());
    let died = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Err(e) = control_plane.check_alive() {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .context("the death is noticed")?;
    let message = died.to_string();
    ensure!(message.starts_with("kube-apiserver exited while tests were running (signal: 9"), "{message}");
    ensure!(message.contains("kube-apiserver.log:\n"), "{message}");
    let client_error = control_plane.client().err().context("no client for a dead control plane")?;
    ensure!(matches!(client_error, Error::ProcessDied { process: "kube-apiserver", .. }));
    Ok(())
}

#[tokio::test]
async fn missing_binaries_fail_with_one_message_saying_how_to_provide_them() -> Result<()> {
    let empty = tempfile::tempdir()?;
    let error = ControlPlane::builder()
        .binaries_dir(empty.path())
        .start()
        .await
        .err()
        .context("no binaries, no control plane")?;
    let message = error.to_string();
    ensure!(matches!(error, Error::BinariesNotFound { .. }), "{message}");
    ensure!(message.contains("e2e/control-plane/provide.sh"), "{message}");
    ensure!(message.contains("KUBEBUILDER_ASSETS"), "{message}");
    ensure!(message.contains("no kube-apiserver, no etcd"), "{message}");
    Ok(())
}
