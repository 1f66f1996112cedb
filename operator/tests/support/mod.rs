//! Running the real `memgate-operator run` process against the real kube-apiserver + etcd of
//! `memgate-e2e`, as a ServiceAccount bound to exactly the rules of `operator/rbac/operator-rbac.yaml`
//! (token from TokenRequest, never the admin), and reading back what it wrote.

#![allow(dead_code, missing_docs)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use memgate_crds::{DialectPreset, MemoryProvider};
use memgate_e2e::ControlPlane;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// The RBAC file the chart will template from.
pub const RBAC_YAML: &str = include_str!("../../rbac/operator-rbac.yaml");

/// How long anything the operator does on its own may take before a test gives up.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// The shared control plane of this test binary, with the memgate CRDs installed.
pub async fn control_plane() -> Result<(&'static ControlPlane, Client)> {
    let cp = ControlPlane::shared().await?;
    let client = cp.client()?;
    install_crds(&client).await?;
    Ok((cp, client))
}

/// Apply the memgate CRDs and wait until both are Established.
pub async fn install_crds(client: &Client) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in memgate_crds::crd::all() {
        let name = crd.metadata.name.clone().context("CRD name")?;
        crds.patch(&name, &PatchParams::apply("memgate-e2e").force(), &Patch::Apply(&crd)).await?;
    }
    eventually("the memgate CRDs to be Established", || async {
        let mut established = 0;
        for crd in memgate_crds::crd::all() {
            let live = crds.get(crd.metadata.name.as_deref()?).await.ok()?;
            let ok = live.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True");
            established += usize::from(ok);
        }
        (established == memgate_crds::crd::all().len()).then_some(())
    })
    .await
}

/// The operator's rules of the RBAC file, as one ClusterRole (what an operator watching every
/// namespace is bound to: `memgate-operator` and `memgate-operator-credentials` together) and the
/// leader-election Role.
pub fn rbac() -> Result<(ClusterRole, Role)> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(RBAC_YAML)?;
    let mut cluster_role: Option<ClusterRole> = None;
    let mut credentials: Option<Role> = None;
    let mut role = None;
    for doc in docs {
        match doc["metadata"]["name"].as_str() {
            Some("memgate-operator") => cluster_role = Some(serde_json::from_value(doc)?),
            Some("memgate-operator-credentials") => credentials = Some(serde_json::from_value(doc)?),
            Some("memgate-operator-leader-election") => role = Some(serde_json::from_value(doc)?),
            Some("memgate-gateway-token-review") => {}
            other => bail!("unexpected object {other:?} in the RBAC file"),
        }
    }
    let mut cluster_role = cluster_role.context("the memgate-operator ClusterRole")?;
    let credentials = credentials.context("the memgate-operator-credentials Role")?;
    cluster_role.rules.get_or_insert_with(Vec::new).extend(credentials.rules.unwrap_or_default());
    Ok((cluster_role, role.context("a Role")?))
}

/// The ClusterRole of gateways with ServiceAccount callers (`tokenreviews: create`), from the RBAC
/// file, applied as the chart would.
pub async fn install_token_review_role(admin: &Client) -> Result<()> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(RBAC_YAML)?;
    let role = docs
        .into_iter()
        .find(|d| d["metadata"]["name"] == "memgate-gateway-token-review")
        .context("the memgate-gateway-token-review ClusterRole")?;
    let role: ClusterRole = serde_json::from_value(role)?;
    Api::<ClusterRole>::all(admin.clone())
        .patch("memgate-gateway-token-review", &PatchParams::apply("memgate-e2e").force(), &Patch::Apply(&role))
        .await?;
    Ok(())
}

/// An identity for one operator process: ServiceAccount `memgate-operator` in `namespace`, bound
/// to `cluster_role` (a ClusterRoleBinding) and to `role` in `namespace` (its Lease); returns the
/// path of a kubeconfig holding a TokenRequest token of that ServiceAccount.
pub async fn operator_identity(
    cp: &ControlPlane,
    admin: &Client,
    namespace: &str,
    mut cluster_role: ClusterRole,
    mut role: Role,
    dir: &Path,
) -> Result<PathBuf> {
    let apply = PatchParams::apply("memgate-e2e").force();
    install_token_review_role(admin).await?;
    let suffix = namespace;
    let cluster_role_name = format!("memgate-operator-{suffix}");
    cluster_role.metadata = ObjectMeta { name: Some(cluster_role_name.clone()), ..ObjectMeta::default() };
    Api::<ClusterRole>::all(admin.clone()).patch(&cluster_role_name, &apply, &Patch::Apply(&cluster_role)).await?;
    role.metadata = ObjectMeta {
        name: Some("memgate-operator-leader-election".into()),
        namespace: Some(namespace.into()),
        ..ObjectMeta::default()
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .patch("memgate-operator-leader-election", &apply, &Patch::Apply(&role))
        .await?;
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("memgate-operator".into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .patch("memgate-operator", &apply, &Patch::Apply(&account))
        .await?;
    let subject = Subject {
        kind: "ServiceAccount".into(),
        name: "memgate-operator".into(),
        namespace: Some(namespace.into()),
        ..Subject::default()
    };
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(cluster_role_name.clone()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: cluster_role_name.clone(),
        },
        subjects: Some(vec![subject.clone()]),
    };
    Api::<ClusterRoleBinding>::all(admin.clone()).patch(&cluster_role_name, &apply, &Patch::Apply(&binding)).await?;
    let role_binding = RoleBinding {
        metadata: ObjectMeta {
            name: Some("memgate-operator-leader-election".into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: "memgate-operator-leader-election".into(),
        },
        subjects: Some(vec![subject]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .patch("memgate-operator-leader-election", &apply, &Patch::Apply(&role_binding))
        .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..TokenRequestSpec::default() }),
        ..TokenRequest::default()
    };
    let issued = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request("memgate-operator", &PostParams::default(), &request)
        .await?;
    let token = issued.status.and_then(|s| s.token).context("TokenRequest status.token")?;
    let kubeconfig = dir.join("operator.kubeconfig");
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: memgate-operator\n  user:\n    token: {token}\ncontexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: memgate-operator\n    namespace: {namespace}\ncurrent-context: e2e\n",
        server = cp.base_url(),
        ca = cp.ca_path().display(),
    );
    std::fs::write(&kubeconfig, text)?;
    Ok(kubeconfig)
}

/// A running `memgate-operator run`, its JSON log captured to a file.
pub struct Operator {
    child: Child,
    log: PathBuf,
    pub address: String,
}

impl Operator {
    /// Start the operator as the identity of `kubeconfig`, with `args` after `run`.
    pub async fn start(kubeconfig: &Path, log: PathBuf, args: &[String]) -> Result<Operator> {
        Operator::start_with_env(kubeconfig, log, args, &[]).await
    }

    /// [`Operator::start`] with extra environment variables (e.g. `OTEL_*`).
    pub async fn start_with_env(
        kubeconfig: &Path,
        log: PathBuf,
        args: &[String],
        env: &[(&str, &str)],
    ) -> Result<Operator> {
        let file = std::fs::File::create(&log)?;
        let child = Command::new(env!("CARGO_BIN_EXE_memgate-operator"))
            .arg("run")
            .args(["--listen", "127.0.0.1:0", "--lease-duration-seconds", "4", "--lease-grace-seconds", "2"])
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env_remove("POD_NAMESPACE")
            .env_remove("POD_NAME")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .context("starting memgate-operator")?;
        let mut operator = Operator { child, log, address: String::new() };
        let log_path = operator.log.clone();
        let started = Instant::now();
        loop {
            if let Some(address) = listening_address(&log_path) {
                operator.address = address;
                return Ok(operator);
            }
            if let Some(status) = operator.child.try_wait()? {
                bail!("memgate-operator exited ({status}) before listening:\n{}", operator.log_text());
            }
            if started.elapsed() > PATIENCE {
                bail!("memgate-operator never logged its address:\n{}", operator.log_text());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// True while the process has not exited (it was never restarted).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The JSON log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` on the operator's HTTP side; the body.
    pub async fn get(&self, path: &str) -> Result<String> {
        http_get(&self.address, path).await
    }

    /// The value of one metric line (exact label set), 0 when absent.
    pub async fn metric(&self, series: &str) -> Result<f64> {
        let text = self.get("/metrics").await?;
        Ok(metric_value(&text, series))
    }

    /// Whether the process still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL, and wait for the exit.
    pub async fn kill(&mut self) -> Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// The value of `series` (`name{labels}` exactly as exposed) in an OpenMetrics text; 0 when absent.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Sum of every series of a metric family name (e.g. `memgate_operator_writes_total`).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with(['{', ' ']))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The address of the `listening` log event, once written.
pub fn listening_address(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().find_map(|line| {
        let event: Value = serde_json::from_str(line).ok()?;
        let fields = event.get("fields")?;
        (fields.get("message")?.as_str()? == "listening").then(|| fields.get("address")?.as_str().map(String::from))?
    })
}

/// A plain HTTP/1.1 GET; the body.
pub async fn http_get(address: &str, path: &str) -> Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response).into_owned();
    Ok(text.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default())
}

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
            bail!("gave up waiting for {what} after {:?}", PATIENCE);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The API resource of a kind the tests write.
pub fn resource(kind: &str) -> ApiResource {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    match kind {
        "MemoryProvider" => ApiResource::erase::<MemoryProvider>(&()),
        "DialectPreset" => ApiResource::erase::<DialectPreset>(&()),
        "MemoryGateway" => ApiResource::erase::<memgate_crds::MemoryGateway>(&()),
        "HorizontalPodAutoscaler" => {
            ApiResource::erase::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(&())
        }
        "Secret" => ApiResource::erase::<Secret>(&()),
        "PersistentVolumeClaim" => ApiResource::erase::<PersistentVolumeClaim>(&()),
        "ConfigMap" => ApiResource::erase::<ConfigMap>(&()),
        "Service" => ApiResource::erase::<Service>(&()),
        "ServiceAccount" => ApiResource::erase::<ServiceAccount>(&()),
        "Deployment" => ApiResource::erase::<Deployment>(&()),
        "ClusterRoleBinding" => ApiResource::erase::<ClusterRoleBinding>(&()),
        "NetworkPolicy" => ApiResource::erase::<NetworkPolicy>(&()),
        "PodDisruptionBudget" => ApiResource::erase::<PodDisruptionBudget>(&()),
        "ValidatingAdmissionPolicy" => {
            ApiResource::erase::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>(&())
        }
        "ValidatingAdmissionPolicyBinding" => {
            ApiResource::erase::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding>(&())
        }
        other => panic!("no API resource known for {other}"),
    }
}

fn api(client: &Client, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = resource(kind);
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Server-side apply an object (as a person would `kubectl apply --server-side` it).
pub async fn apply(client: &Client, object: Value) -> Result<DynamicObject> {
    let kind = object["kind"].as_str().context("kind")?.to_string();
    let name = object["metadata"]["name"].as_str().context("name")?.to_string();
    let namespace = object["metadata"]["namespace"].as_str().map(String::from);
    let object: DynamicObject = serde_json::from_value(object)?;
    api(client, &kind, namespace.as_deref())
        .patch(&name, &PatchParams::apply("tester").force(), &Patch::Apply(&object))
        .await
        .with_context(|| format!("applying {kind} {name}"))
}

/// Read an object, `None` when absent.
pub async fn get(client: &Client, kind: &str, namespace: Option<&str>, name: &str) -> Result<Option<DynamicObject>> {
    Ok(api(client, kind, namespace).get_opt(name).await?)
}

/// Delete an object (absent is fine).
pub async fn delete(client: &Client, kind: &str, namespace: Option<&str>, name: &str) -> Result<()> {
    match api(client, kind, namespace).delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// A merge patch by a "person" (field manager `kubectl-edit`).
pub async fn edit(
    client: &Client,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    patch: Value,
) -> Result<DynamicObject> {
    let params = PatchParams { field_manager: Some("kubectl-edit".into()), ..PatchParams::default() };
    Ok(api(client, kind, namespace).patch(name, &params, &Patch::Merge(&patch)).await?)
}

/// A condition of an object's status: `(status, reason, message)`.
pub fn condition(object: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let conditions = object.data.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?.into(), c["reason"].as_str()?.into(), c["message"].as_str()?.into()))
}

/// Wait until provider `name` has condition `type_` with `status` and `reason`; the object.
pub async fn wait_condition(
    client: &Client,
    namespace: &str,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> Result<DynamicObject> {
    let what = format!("MemoryProvider {namespace}/{name} to have {type_}={status} ({reason})");
    let last = std::sync::Mutex::new(None);
    let found = eventually(&what, || {
        let last = &last;
        async move {
            let object = get(client, "MemoryProvider", Some(namespace), name).await.ok()??;
            let seen = condition(&object, type_);
            *last.lock().expect("not poisoned") = seen.clone();
            let (s, r, _) = seen?;
            (s == status && r == reason).then_some(object)
        }
    })
    .await;
    found.with_context(|| format!("last seen: {:?}", last.lock().expect("not poisoned")))
}

/// Simulate what the Deployment controller and kubelets would report once every replica runs the
/// current pod template (no controller manager or kubelet runs against this API server).
pub async fn simulate_rollout(client: &Client, namespace: &str) -> Result<()> {
    let deployment =
        get(client, "Deployment", Some(namespace), "memgate-gateway").await?.context("the gateway Deployment")?;
    let generation = deployment.metadata.generation.unwrap_or(1);
    let replicas = deployment.data.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    let status = json!({"status": {
        "observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas}});
    api(client, "Deployment", Some(namespace))
        .patch_status("memgate-gateway", &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

/// A `mem0-oss-rest-2026-08` provider with anonymous access and the credential in `secret`.
pub fn provider(namespace: &str, name: &str, secret: &str, extra: Value) -> Value {
    let mut spec = json!({
        "dialect": {"builtin": "mem0-oss-rest-2026-08"},
        "endpoint": {"origin": "http://mem0.memory.svc:8888", "allowInsecureHttp": true},
        "credentials": {"secretRef": {"name": secret, "key": "api-key"}},
        "scope": {"userId": "repository-memory", "agentId": "qwen-code"},
        "access": {"anonymous": true},
    });
    if let (Some(base), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    json!({"apiVersion": "memgate.io/v1alpha1", "kind": "MemoryProvider",
           "metadata": {"name": name, "namespace": namespace}, "spec": spec})
}

/// This machine's own non-loopback IPv4 address (the one its route to the outside uses; finding it
/// sends nothing): where a test's upstream listens, since a gateway in a cluster never connects to
/// loopback (its own pod).
pub fn host_address() -> Result<std::net::Ipv4Addr> {
    for probe in ["192.0.2.1:9", "10.255.255.254:9", "8.8.8.8:53"] {
        let Ok(socket) = std::net::UdpSocket::bind("0.0.0.0:0") else { continue };
        if socket.connect(probe).is_err() {
            continue;
        }
        if let Ok(std::net::SocketAddr::V4(local)) = socket.local_addr()
            && !local.ip().is_loopback()
            && !local.ip().is_unspecified()
        {
            return Ok(*local.ip());
        }
    }
    bail!("this machine has no non-loopback IPv4 address with a route: the test needs one")
}

/// A Secret with string data, labelled as a memgate credential by its platform team.
pub fn secret(namespace: &str, name: &str, data: &[(&str, &str)]) -> Value {
    let mut secret = unlabelled_secret(namespace, name, data);
    secret["metadata"]["labels"] = json!({"memgate.io/credential": "true"});
    secret
}

/// A Secret with string data and no credential label (one a provider author must not be able to use).
pub fn unlabelled_secret(namespace: &str, name: &str, data: &[(&str, &str)]) -> Value {
    let string_data: serde_json::Map<String, Value> = data.iter().map(|(k, v)| ((*k).into(), json!(v))).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
           "stringData": string_data})
}

/// A PersistentVolumeClaim (it stays Pending here: existence is all the operator needs).
pub fn claim(namespace: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace},
           "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
}

/// A valid GET DialectPreset named `name`.
pub fn preset(name: &str, path: &str) -> Value {
    json!({"apiVersion": "memgate.io/v1alpha1", "kind": "DialectPreset", "metadata": {"name": name},
        "spec": {"dialectVersion": 1, "auth": "authorization-bearer",
            "search": {"method": "GET", "path": path, "queryLocation": "query", "userIdLocation": "query",
                       "agentIdLocation": "omit", "appIdLocation": "omit", "limitField": "limit"},
            "response": {"collection": "root-array", "idField": "id", "contentField": "text", "titleField": "omit",
                         "uriField": "omit", "scoreField": "score", "updatedAtField": "omit"}}})
}

/// An operator identity plus process for `namespaces`, with its Lease in `home`.
pub struct Running {
    pub operator: Operator,
    pub dir: tempfile::TempDir,
}

/// Start an operator as the exact documented identity, watching `namespaces` (empty: all), with
/// its Lease in `home`; `extra` flags are appended.
pub async fn start_operator(
    cp: &ControlPlane,
    admin: &Client,
    home: &str,
    namespaces: &[&str],
    extra: &[&str],
) -> Result<Running> {
    start_operator_with_env(cp, admin, home, namespaces, extra, &[]).await
}

/// [`start_operator`] with extra environment variables for the process.
pub async fn start_operator_with_env(
    cp: &ControlPlane,
    admin: &Client,
    home: &str,
    namespaces: &[&str],
    extra: &[&str],
    env: &[(&str, &str)],
) -> Result<Running> {
    let dir = tempfile::tempdir()?;
    let (cluster_role, role) = rbac()?;
    let kubeconfig = operator_identity(cp, admin, home, cluster_role, role, dir.path()).await?;
    let mut args: Vec<String> = vec!["--leader-election-namespace".into(), home.into()];
    if !extra.contains(&"--resync-seconds") {
        args.extend(["--resync-seconds".into(), "30".into()]);
    }
    if !namespaces.is_empty() {
        args.push("--watch-namespaces".into());
        args.push(namespaces.join(","));
    }
    args.extend(extra.iter().map(ToString::to_string));
    let operator = Operator::start_with_env(&kubeconfig, dir.path().join("operator.log"), &args, env).await?;
    Ok(Running { operator, dir })
}

/// A control plane of the calling test's own (for tests that stop its API server), with the memgate
/// CRDs installed.
pub async fn dedicated_control_plane() -> Result<(ControlPlane, Client)> {
    let cp = ControlPlane::start().await?;
    let client = cp.client()?;
    install_crds(&client).await?;
    Ok((cp, client))
}

/// The leader Lease `name` in `namespace`: `(holder, renewTime)`, `None` while absent.
pub async fn lease(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<(Option<String>, Option<std::time::SystemTime>)>> {
    use k8s_openapi::api::coordination::v1::Lease;
    let Some(lease) = Api::<Lease>::namespaced(client.clone(), namespace).get_opt(name).await? else {
        return Ok(None);
    };
    let spec = lease.spec.unwrap_or_default();
    Ok(Some((spec.holder_identity, spec.renew_time.map(|t| std::time::SystemTime::from(t.0)))))
}
