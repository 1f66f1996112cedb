//! Helpers of the end-to-end platform test: the kubelet stand-in, identities, waiting, plain HTTP
//! and the tenant scripts of `e2e/tenants/`.

#![allow(dead_code, missing_docs)]

pub mod kubelet;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use memgate_e2e::ControlPlane;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long anything the operator or gateway does on its own may take before the test gives up.
pub const PATIENCE: Duration = Duration::from_secs(120);

/// Poll `check` until it yields a value, or fail after [`PATIENCE`] naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if started.elapsed() > PATIENCE {
            bail!("gave up waiting for {what} after {PATIENCE:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A kubeconfig for ServiceAccount `namespace/name`: a TokenRequest token, what a pod of that
/// ServiceAccount is given (in a pod it is a mounted file; here `KUBECONFIG` points at this).
pub async fn service_account_kubeconfig(
    cp: &ControlPlane,
    admin: &kube::Client,
    namespace: &str,
    name: &str,
    dir: &Path,
) -> Result<PathBuf> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let issued = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("a token for ServiceAccount {namespace}/{name}"))?;
    let token = issued.status.and_then(|s| s.token).context("TokenRequest status.token")?;
    let path = dir.join(format!("{namespace}-{name}.kubeconfig"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: {name}\n    namespace: {namespace}\ncurrent-context: e2e\n",
        server = cp.base_url(),
        ca = cp.ca_path().display(),
    );
    std::fs::write(&path, text)?;
    Ok(path)
}

/// One plain HTTP/1.1 request; the status code and body.
pub async fn http(
    address: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await.with_context(|| format!("connecting {address}"))?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).context("an HTTP status line")?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

/// The folder of the tenant scripts.
pub fn tenants_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tenants")
}

/// A Python interpreter named by `variable` (a venv the test command prepares); never skipped.
pub fn python(variable: &str) -> Result<PathBuf> {
    let path = std::env::var_os(variable).map(PathBuf::from).with_context(|| {
        format!("{variable} is not set: run through ./scripts/test.sh, which prepares the Python venvs and sets it")
    })?;
    if !path.is_file() {
        bail!("{variable}={} is not a file", path.display());
    }
    Ok(path)
}

/// Run a tenant script with `python`, the cluster DNS stand-in and `env`; its one JSON line.
pub async fn tenant(python: &Path, script: &str, args: &[&str], env: &[(&str, &str)]) -> Result<Value> {
    let output = tokio::process::Command::new(python)
        .arg(tenants_dir().join(script))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {script}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("{script} failed ({}): {}\n{stdout}", output.status, String::from_utf8_lossy(&output.stderr));
    }
    let line = stdout.lines().last().context("a JSON line")?;
    serde_json::from_str(line).with_context(|| format!("{script} printed {line}"))
}

/// The chart's operator pod: `spec` (its Deployment's pod template) run by the kubelet stand-in in
/// `namespace` as its own ServiceAccount (so exactly the chart's RBAC), once its `/readyz` on the
/// metrics port 8081 answers 200. Files go under `work`.
pub async fn run_operator_pod(
    cp: &ControlPlane,
    admin: &kube::Client,
    namespace: &str,
    spec: k8s_openapi::api::core::v1::PodSpec,
    work: &Path,
) -> Result<(kubelet::Pod, Vec<kubelet::Running>)> {
    use anyhow::Context as _;
    let account = spec.service_account_name.clone().context("serviceAccountName")?;
    let kubeconfig = service_account_kubeconfig(cp, admin, namespace, &account, work).await?;
    let pod = kubelet::Pod::new(admin, namespace, "operator-0", spec, &work.join("operator"), &work.join("claims"))?;
    let running = pod.start(&[("KUBECONFIG".into(), kubeconfig.display().to_string())]).await?;
    let address = format!("{}:8081", pod.ip);
    eventually("the operator's /readyz", || async {
        (http(&address, "GET", "/readyz", &[], "").await.ok()?.0 == 200).then_some(())
    })
    .await
    .with_context(|| std::fs::read_to_string(&running[0].log).unwrap_or_default())?;
    Ok((pod, running))
}
