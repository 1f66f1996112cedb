//! Stopping kube-apiserver under a running control plane and starting it again: same address, certificates,
//! service account keys and etcd, so objects, clients and issued tokens keep working; a stopped API server is
//! not a death, a crash after the restart still is; the shared control plane refuses to be stopped.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use memgate_e2e::{ControlPlane, Error};

/// Generous ceiling for things that take milliseconds on an idle machine.
const CEILING: Duration = Duration::from_secs(60);

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() }
}

fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn a_stopped_api_server_starts_again_on_the_same_address_with_every_object_kept() -> Result<()> {
    let control_plane = ControlPlane::start().await?;
    let namespace = control_plane.new_namespace("restart").await?;
    let client = control_plane.client()?;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let config_map = ConfigMap {
        metadata: named("kept"),
        data: Some(BTreeMap::from([("mode".to_owned(), "strict".to_owned())])),
        ..ConfigMap::default()
    };
    config_maps.create(&PostParams::default(), &config_map).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    accounts.create(&PostParams::default(), &ServiceAccount { metadata: named("robot"), ..Default::default() }).await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let issued = accounts.create_token_request("robot", &PostParams::default(), &request).await?;
    let token = issued.status.and_then(|s| s.token).context("TokenRequest status.token")?;
    let [etcd, first] = control_plane.pids()[..] else { bail!("two pids") };
    let base_url = control_plane.base_url().to_owned();

    control_plane.stop_apiserver().await?;
    ensure!(control_plane.apiserver_stopped());
    ensure!(!process_exists(first), "kube-apiserver {first} is gone");
    ensure!(process_exists(etcd), "etcd keeps running");
    control_plane.check_alive().context("a stopped API server is not a death")?;
    let refused = tokio::time::timeout(CEILING, config_maps.get("kept")).await.context("a call while stopped ends")?;
    ensure!(refused.is_err(), "no API server answers while it is stopped");
    control_plane.stop_apiserver().await.context("stopping twice is nothing")?;

    control_plane.start_apiserver().await?;
    ensure!(!control_plane.apiserver_stopped());
    ensure!(control_plane.base_url() == base_url, "same address");
    let [same_etcd, second] = control_plane.pids()[..] else { bail!("two pids") };
    ensure!(same_etcd == etcd && second != first && process_exists(second), "a new kube-apiserver, the same etcd");
    // The client made before the stop (same URL, CA and token) works again, and the object is still there.
    let kept = config_maps.get("kept").await?;
    ensure!(kept.data.and_then(|d| d.get("mode").cloned()).as_deref() == Some("strict"), "the object persisted");
    // The same service account keys: a token issued before the stop still passes TokenReview.
    let review =
        TokenReview { spec: TokenReviewSpec { token, ..TokenReviewSpec::default() }, ..TokenReview::default() };
    let reviewed = Api::<TokenReview>::all(client.clone()).create(&PostParams::default(), &review).await?;
    ensure!(reviewed.status.and_then(|s| s.authenticated) == Some(true), "a token issued before the stop");
    ensure!(control_plane.dir().join("kube-apiserver.before-restart-1.log").is_file(), "the first log is kept");
    control_plane.start_apiserver().await.context("starting a running API server is nothing")?;

    // A crash after the restart is still noticed and named.
    let killed = std::process::Command::new("kill").args(["-KILL", &second.to_string()]).status()?;
    ensure!(killed.success());
    let died = tokio::time::timeout(CEILING, async {
        loop {
            if let Err(e) = control_plane.check_alive() {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .context("the death is noticed")?;
    ensure!(matches!(died, Error::ProcessDied { process: "kube-apiserver", .. }), "{died}");

    let dir = control_plane.dir().to_path_buf();
    drop(control_plane);
    ensure!(!dir.exists(), "{} removed", dir.display());
    ensure!(!process_exists(etcd), "etcd stopped on drop");
    Ok(())
}

#[tokio::test]
async fn the_shared_control_plane_cannot_be_stopped() -> Result<()> {
    let shared = ControlPlane::shared().await?;
    let stop = shared.stop_apiserver().await;
    ensure!(matches!(stop, Err(Error::SharedControlPlane { action: "stop" })), "{stop:?}");
    let start = shared.start_apiserver().await;
    ensure!(matches!(start, Err(Error::SharedControlPlane { action: "start" })), "{start:?}");
    ensure!(!shared.apiserver_stopped());
    shared.new_namespace("still-serving").await?;
    Ok(())
}
