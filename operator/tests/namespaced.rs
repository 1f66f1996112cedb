//! The operator as a real process (`memgate-operator run`, a ServiceAccount token bound to exactly
//! `operator/rbac/operator-rbac.yaml`, never the admin) against the real kube-apiserver + etcd of
//! `memgate-e2e`. Each test runs its own operator restricted to its own namespaces
//! (`--watch-namespaces`), so the tests of this binary share one control plane without seeing each
//! other.
//!
//! No controller manager or kubelet runs here: Deployment readiness is simulated by patching the
//! Deployment's status the way the Deployment controller would (`support::simulate_rollout`), and
//! the gateway pod is replaced by the real `memgate-gateway` binary fed with exactly the files the
//! pod spec mounts.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use support::*;

fn config_text(object: &kube::api::DynamicObject) -> String {
    object.data.pointer("/data/gateway.yaml").and_then(Value::as_str).unwrap_or_default().to_string()
}

async fn gateway_config(client: &kube::Client, namespace: &str) -> Option<String> {
    get(client, "ConfigMap", Some(namespace), "memgate-gateway").await.ok()?.map(|c| config_text(&c))
}

async fn wait_config(
    client: &kube::Client,
    namespace: &str,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> Result<String> {
    eventually(&format!("the gateway config of {namespace} to {what}"), || async {
        gateway_config(client, namespace).await.filter(|text| check(text))
    })
    .await
}

async fn events(client: &kube::Client, namespace: &str) -> Result<Vec<Event>> {
    Ok(Api::<Event>::namespaced(client.clone(), namespace).list(&ListParams::default()).await?.items)
}

fn event_reasons(events: &[Event], regarding: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(regarding))
        .filter_map(|e| e.reason.clone())
        .collect()
}

#[tokio::test]
async fn providers_across_namespaces_are_reconciled_with_reasons_events_and_endpoints() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-full").await?;
    let a = cp.new_namespace("team-a").await?;
    let b = cp.new_namespace("team-b").await?;
    let preset_name = format!("{a}-search");
    let running = start_operator(cp, &admin, &home, &[&a, &b], &[]).await?;

    apply(&admin, secret(&a, "mem0-api", &[("api-key", "key-a")])).await?;
    apply(&admin, provider(&a, "valid", "mem0-api", json!({}))).await?;
    let unused_scope = json!({"scope": {"userId": "u", "agentId": "a", "appId": "not-sent-by-this-dialect"}});
    apply(&admin, provider(&a, "invalid-scope", "mem0-api", unused_scope)).await?;
    apply(&admin, provider(&a, "disabled", "mem0-api", json!({"enabled": false}))).await?;
    apply(&admin, provider(&a, "late-secret", "late-api", json!({}))).await?;
    let preset_spec = json!({"dialect": {"presetRef": preset_name}, "scope": {"userId": "repository-memory"}});
    apply(&admin, provider(&a, "late-preset", "mem0-api", preset_spec)).await?;
    apply(&admin, secret(&b, "mem0-api", &[("api-key", "key-b")])).await?;
    let sa_nexent = json!({"nexent": {"search": true},
        "access": {"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": a.clone(), "name": "qwen-code"}]}}});
    apply(&admin, provider(&b, "sa-nexent", "mem0-api", sa_nexent)).await?;

    // Each provider's conditions name its own problem; none disturbs another.
    let refused = wait_condition(&admin, &a, "invalid-scope", "Accepted", "False", "InvalidSpec").await?;
    let (_, _, message) = condition(&refused, "Ready").context("Ready")?;
    ensure!(message.contains("spec.scope.appId"), "the message names the field: {message}");
    wait_condition(&admin, &a, "disabled", "Ready", "True", "Disabled").await?;
    let late = wait_condition(&admin, &a, "late-secret", "ResolvedRefs", "False", "SecretNotPermitted").await?;
    ensure!(condition(&late, "ResolvedRefs").is_some_and(|c| c.2.contains(&format!("{a}/late-api"))));
    wait_condition(&admin, &a, "late-preset", "ResolvedRefs", "False", "DialectNotFound").await?;
    wait_condition(&admin, &b, "sa-nexent", "ResolvedRefs", "False", "PluginClaimNotFound").await?;
    let valid = wait_condition(&admin, &a, "valid", "Ready", "False", "GatewayProgressing").await?;
    ensure!(condition(&valid, "ResolvedRefs").is_some_and(|c| c.0 == "True"));

    // Only the valid, enabled, resolved provider is rendered.
    let config = wait_config(&admin, &a, "serve only `valid`", |t| t.contains("name: valid")).await?;
    for absent in ["invalid-scope", "disabled", "late-secret", "late-preset"] {
        ensure!(!config.contains(absent), "{absent} must not be rendered:\n{config}");
    }
    let deployment: Deployment = Api::namespaced(admin.clone(), &a).get("memgate-gateway").await?;
    let pod = deployment.spec.template.spec.clone().context("pod spec")?;
    let args = pod.containers[0].args.clone().unwrap_or_default();
    for host in [
        "memgate-gateway",
        &format!("memgate-gateway.{a}"),
        &format!("memgate-gateway.{a}.svc"),
        &format!("memgate-gateway.{a}.svc.cluster.local"),
    ] {
        ensure!(args.windows(2).any(|w| w[0] == "--allowed-host" && w[1] == host), "{host} allowed: {args:?}");
    }
    ensure!(
        get(&admin, "ClusterRoleBinding", None, &format!("memgate-gateway-{a}")).await?.is_none(),
        "no ServiceAccount callers in {a}"
    );
    for kind in ["Service", "ServiceAccount"] {
        ensure!(get(&admin, kind, Some(&a), "memgate-gateway").await?.is_some(), "{kind} of {a}");
    }

    // References that appear later resolve without a restart.
    apply(&admin, secret(&a, "late-api", &[("api-key", "key-late")])).await?;
    apply(&admin, preset(&preset_name, "/api/search")).await?;
    wait_condition(&admin, &a, "late-secret", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let late_preset = wait_condition(&admin, &a, "late-preset", "ResolvedRefs", "True", "ResolvedRefs").await?;
    ensure!(late_preset.data.pointer("/status/dialect") == Some(&json!(preset_name)));
    ensure!(
        late_preset.data.pointer("/status/preset/uid").and_then(Value::as_str).is_some_and(|u| !u.is_empty()),
        "pinned preset"
    );
    wait_config(&admin, &a, "serve the late providers and their preset", |t| {
        t.contains("name: late-secret") && t.contains("name: late-preset") && t.contains("kind: DialectPreset")
    })
    .await?;
    apply(&admin, claim(&b, "nexent-memory-plugins")).await?;
    wait_condition(&admin, &b, "sa-nexent", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let binding = eventually("the TokenReview binding of team-b", || async {
        get(&admin, "ClusterRoleBinding", None, &format!("memgate-gateway-{b}")).await.ok()?
    })
    .await?;
    ensure!(binding.data.pointer("/roleRef/name") == Some(&json!("memgate-gateway-token-review")));
    let init = eventually("the Nexent init container in team-b", || async {
        let d: Deployment = Api::namespaced(admin.clone(), &b).get("memgate-gateway").await.ok()?;
        d.spec.template.spec?.init_containers?.into_iter().next()
    })
    .await?;
    ensure!(init.args.unwrap_or_default().contains(&format!("http://memgate-gateway.{b}.svc:8080")));

    // Ready once the Deployment has rolled out the pod template carrying the provider (simulated).
    simulate_rollout(&admin, &a).await?;
    let ready = wait_condition(&admin, &a, "valid", "Ready", "True", "Ready").await?;
    ensure!(
        ready.data.pointer("/status/endpoints/mcp")
            == Some(&json!(format!("http://memgate-gateway.{a}.svc:8080/mcp/valid")))
    );
    ensure!(ready.data.pointer("/status/dialect") == Some(&json!("mem0-oss-rest-2026-08")));
    ensure!(ready.data.pointer("/status/observedGeneration") == Some(&json!(ready.metadata.generation)));
    ensure!(ready.data.pointer("/status/endpoints/nexent").is_none(), "Nexent is off for `valid`");

    // A key removed from the Secret flips ResolvedRefs back and takes the provider out of the config.
    edit(&admin, "Secret", Some(&a), "mem0-api", json!({"data": {"api-key": null, "other": "eA=="}})).await?;
    wait_condition(&admin, &a, "valid", "ResolvedRefs", "False", "SecretKeyMissing").await?;
    wait_config(&admin, &a, "drop `valid`", |t| !t.contains("name: valid\n")).await?;
    edit(&admin, "Secret", Some(&a), "mem0-api", json!({"data": {"api-key": "a2V5LWE="}})).await?;
    wait_condition(&admin, &a, "valid", "ResolvedRefs", "True", "ResolvedRefs").await?;

    // A scope edit re-renders; Ready waits for the rollout of the new template.
    edit(&admin, "MemoryProvider", Some(&a), "valid", json!({"spec": {"scope": {"userId": "edited-user"}}})).await?;
    wait_config(&admin, &a, "carry the edited scope", |t| t.contains("edited-user")).await?;
    wait_condition(&admin, &a, "valid", "Ready", "False", "GatewayProgressing").await?;
    simulate_rollout(&admin, &a).await?;
    wait_condition(&admin, &a, "valid", "Ready", "True", "Ready").await?;

    // Events announced the transitions.
    let events = eventually("the transition Events", || async {
        let list = events(&admin, &a).await.ok()?;
        let late = event_reasons(&list, "late-secret");
        (late.contains(&"SecretNotPermitted".to_string()) && late.contains(&"ResolvedRefs".to_string())).then_some(list)
    })
    .await?;
    ensure!(event_reasons(&events, "invalid-scope").contains(&"InvalidSpec".to_string()));
    ensure!(event_reasons(&events, "valid").contains(&"SecretKeyMissing".to_string()));
    let warning = events.iter().find(|e| e.reason.as_deref() == Some("InvalidSpec")).context("InvalidSpec event")?;
    ensure!(warning.type_.as_deref() == Some("Warning"));
    ensure!(!running.operator.log_text().contains("\"level\":\"ERROR\""), "{}", running.operator.log_text());
    Ok(())
}

#[tokio::test]
async fn planted_secret_values_appear_nowhere_the_operator_writes() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-planted").await?;
    let ns = cp.new_namespace("planted").await?;
    let credential = format!("PLANTED-CREDENTIAL-{ns}");
    let caller = format!("PLANTED-CALLER-{ns}");
    let ledger_password = format!("PLANTED-LEDGER-{ns}");
    let placeholder = format!("PLANTEDNAME{}", ns.replace('-', ""));
    let mut running = start_operator(
        cp,
        &admin,
        &home,
        &[&ns],
        &["--gateway-ledger-secret", "memgate-ledger", "--gateway-log-level", "debug"],
    )
    .await?;

    apply(&admin, secret(&ns, "mem0-api", &[("api-key", &credential), ("unused", "PLANTED-UNUSED")])).await?;
    apply(&admin, secret(&ns, "callers", &[("nexent", &caller)])).await?;
    apply(&admin, secret(&ns, "placeholder", &[("api-key", &format!("${{{placeholder}}}"))])).await?;
    apply(&admin, secret(&ns, "memgate-ledger", &[("url", &format!("redis://:{ledger_password}@redis:6379"))])).await?;
    apply(&admin, claim(&ns, "nexent-memory-plugins")).await?;
    let access = json!({"access": {"bearerToken": {"secretRef": {"name": "callers", "key": "nexent"}}},
                        "nexent": {"search": true, "ingest": true}});
    apply(&admin, provider(&ns, "served", "mem0-api", access)).await?;
    apply(&admin, provider(&ns, "placeholder", "placeholder", json!({}))).await?;

    wait_condition(&admin, &ns, "placeholder", "ResolvedRefs", "False", "SecretValueInvalid").await?;
    wait_condition(&admin, &ns, "served", "ResolvedRefs", "True", "ResolvedRefs").await?;
    eventually("the gateway Deployment", || async {
        get(&admin, "Deployment", Some(&ns), "memgate-gateway").await.ok()?
    })
    .await?;
    simulate_rollout(&admin, &ns).await?;
    wait_condition(&admin, &ns, "served", "Ready", "True", "Ready").await?;

    // The shared ledger is passed by Secret reference, so the namespace that ingests runs every replica.
    let deployment: Deployment = Api::namespaced(admin.clone(), &ns).get("memgate-gateway").await?;
    ensure!(deployment.spec.replicas == Some(2), "ledger available: {:?}", deployment.spec.replicas);
    let env = deployment.spec.template.spec.as_ref().and_then(|p| p.containers[0].env.clone()).unwrap_or_default();
    let ledger = env.iter().find(|e| e.name == "MEMGATE_INGEST_LEDGER").context("ledger env")?;
    ensure!(ledger.value.is_none() && ledger.value_from.is_some());

    let mut written = Vec::new();
    for kind in ["ConfigMap", "Deployment", "Service", "ServiceAccount", "MemoryProvider"] {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(admin.clone(), &ns, &resource(kind));
        for object in api.list(&ListParams::default()).await?.items {
            written.push((
                format!("{kind}/{}", object.metadata.name.clone().unwrap_or_default()),
                serde_json::to_string(&object)?,
            ));
        }
    }
    for event in events(&admin, &ns).await? {
        written.push(("Event".into(), serde_json::to_string(&event)?));
    }
    written.push(("operator log".into(), running.operator.log_text()));
    written.push(("operator metrics".into(), running.operator.get("/metrics").await?));
    ensure!(written.iter().any(|(what, _)| what == "ConfigMap/memgate-gateway"), "the config was searched");
    ensure!(written.iter().any(|(what, _)| what == "Event"), "the Events were searched");
    for planted in [&credential, &caller, &ledger_password, &placeholder, &"PLANTED-UNUSED".to_string()] {
        let encoded = base64(planted.as_bytes());
        for (what, text) in &written {
            ensure!(
                !text.contains(planted.as_str()) && !text.contains(&encoded),
                "{what} contains a planted Secret value"
            );
        }
    }
    running.operator.kill().await?;
    Ok(())
}

fn base64(bytes: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The gateway binary built beside this test (`cargo test --workspace` builds it).
fn gateway_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("MEMGATE_GATEWAY_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let dir = exe.parent().and_then(Path::parent).context("target folder")?;
    let binary = dir.join("memgate-gateway");
    ensure!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p memgate-gateway` (or set MEMGATE_GATEWAY_BIN)",
        binary.display()
    );
    Ok(binary)
}

/// A process started from a container spec, its JSON log in a file.
struct Process {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Process {
    fn spawn(binary: &Path, args: &[String], env: &[(String, String)], log: PathBuf) -> Result<Process> {
        let file = std::fs::File::create(&log)?;
        let child = tokio::process::Command::new(binary)
            .args(args)
            .env_clear()
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()?;
        Ok(Process { child, log })
    }

    async fn address(&mut self) -> Result<String> {
        let started = Instant::now();
        loop {
            if let Some(address) = listening_address(&self.log) {
                return Ok(address);
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("exited ({status}): {}", std::fs::read_to_string(&self.log).unwrap_or_default());
            }
            ensure!(started.elapsed() < PATIENCE, "never listened: {}", std::fs::read_to_string(&self.log)?);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Write, under `root`, every file `container` sees through its volume mounts: ConfigMap and
/// Secret items exactly at `mountPath/item.path`, claims as empty folders.
async fn materialize(
    root: &Path,
    pod: &PodSpec,
    container: &Container,
    config: &ConfigMap,
    admin: &kube::Client,
    namespace: &str,
) -> Result<()> {
    for mount in container.volume_mounts.iter().flatten() {
        let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).context("volume of a mount")?;
        let dir = root.join(mount.mount_path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir)?;
        if let Some(source) = &volume.config_map {
            ensure!(source.name == "memgate-gateway");
            for item in source.items.iter().flatten() {
                let text = config.data.as_ref().and_then(|d| d.get(&item.key)).context("ConfigMap key")?;
                std::fs::write(dir.join(&item.path), text)?;
            }
        } else if let Some(source) = &volume.secret {
            let name = source.secret_name.clone().context("Secret name")?;
            let secret: Secret = Api::namespaced(admin.clone(), namespace).get(&name).await?;
            for item in source.items.iter().flatten() {
                let value = secret.data.as_ref().and_then(|d| d.get(&item.key)).context("Secret key")?;
                std::fs::write(dir.join(&item.path), &value.0)?;
            }
        } else {
            ensure!(volume.persistent_volume_claim.is_some(), "unexpected volume {}", volume.name);
        }
    }
    Ok(())
}

/// The container's args with every absolute path moved under `root` and the listen address on a
/// free loopback port; its plain environment values.
fn command_line(root: &Path, container: &Container) -> (Vec<String>, Vec<(String, String)>) {
    let mut args = Vec::new();
    let mut listen_next = false;
    for arg in container.args.iter().flatten() {
        if listen_next {
            args.push("127.0.0.1:0".to_string());
        } else if arg.starts_with('/') {
            args.push(root.join(arg.trim_start_matches('/')).display().to_string());
        } else {
            args.push(arg.clone());
        }
        listen_next = arg == "--listen";
    }
    let env = container.env.iter().flatten().filter_map(|e| Some((e.name.clone(), e.value.clone()?))).collect();
    (args, env)
}

#[tokio::test]
async fn rendered_config_and_mounted_secret_keys_serve_a_real_mcp_call_through_the_gateway_binary() -> Result<()> {
    use rmcp::model::{CallToolRequestParams, JsonObject};
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;

    let gateway = gateway_binary()?;
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-mcp").await?;
    let ns = cp.new_namespace("mcp").await?;
    let dir = tempfile::tempdir()?;
    let key = format!("upstream-key-{ns}");

    // The upstream: the gateway's own development Mem0 server, with one memory stored, on this
    // machine's own address (a gateway in a cluster refuses loopback, its own pod).
    let mut upstream = Process::spawn(
        &gateway,
        &["dev-upstream".into(), "--listen".into(), format!("{}:0", host_address()?)],
        &[("MEMGATE_DEV_UPSTREAM_API_KEY".into(), key.clone())],
        dir.path().join("upstream.log"),
    )?;
    let upstream_address = upstream.address().await?;
    let stored = reqwest_post(
        &upstream_address,
        "/memories",
        &key,
        &json!({"messages": [{"role": "user", "content": "The deploy freeze starts on Friday at noon"}],
                "user_id": "repository-memory", "agent_id": "qwen-code"}),
    )
    .await?;
    ensure!(stored.contains("ADD"), "memory stored: {stored}");

    let _running = start_operator(cp, &admin, &home, &[&ns], &["--gateway-extra-allowed-host", "127.0.0.1"]).await?;
    apply(&admin, secret(&ns, "upstream", &[("api-key", &key), ("not-referenced", "x")])).await?;
    apply(&admin, claim(&ns, "nexent-memory-plugins")).await?;
    let spec = json!({"endpoint": {"origin": format!("http://{upstream_address}"), "allowInsecureHttp": true},
                      "nexent": {"search": true}});
    apply(&admin, provider(&ns, "repo-memory", "upstream", spec)).await?;
    wait_condition(&admin, &ns, "repo-memory", "ResolvedRefs", "True", "ResolvedRefs").await?;
    wait_config(&admin, &ns, "serve repo-memory", |t| t.contains("name: repo-memory")).await?;
    let (deployment, config) = eventually("a Deployment matching the config", || async {
        let d: Deployment = Api::namespaced(admin.clone(), &ns).get("memgate-gateway").await.ok()?;
        let c: ConfigMap = Api::namespaced(admin.clone(), &ns).get("memgate-gateway").await.ok()?;
        let has_init = d.spec.template.spec.as_ref()?.init_containers.as_ref().is_some_and(|i| !i.is_empty());
        has_init.then_some((d, c))
    })
    .await?;
    let pod = deployment.spec.template.spec.clone().context("pod spec")?;
    let root = dir.path().join("pod");

    // The init container writes the Nexent plugin into the claim.
    let init = pod.init_containers.iter().flatten().next().context("init container")?.clone();
    ensure!(init.command == Some(vec!["memgate-gateway".to_string()]));
    materialize(&root, &pod, &init, &config, &admin, &ns).await?;
    let (args, env) = command_line(&root, &init);
    let status = tokio::process::Command::new(&gateway)
        .args(&args)
        .env_clear()
        .envs(env)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await?;
    ensure!(status.success(), "write-nexent-plugins {args:?}: {status}");
    let plugin = root.join("var/lib/memgate/plugins-0/memgate-repo-memory/plugin.yaml");
    let plugin_text = std::fs::read_to_string(&plugin).with_context(|| plugin.display().to_string())?;
    ensure!(plugin_text.contains(&format!("http://memgate-gateway.{ns}.svc:8080")), "{plugin_text}");
    ensure!(!plugin_text.contains(&key));

    // The serving container, with the Deployment's args, on exactly the mounted files.
    let serving = pod.containers[0].clone();
    materialize(&root, &pod, &serving, &config, &admin, &ns).await?;
    let secret_dir = root.join("etc/memgate/secrets/upstream");
    let mut keys: Vec<String> = std::fs::read_dir(&secret_dir)?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    keys.sort();
    ensure!(keys == ["api-key"], "only the referenced key is mounted: {keys:?}");
    let (args, env) = command_line(&root, &serving);
    let mut served = Process::spawn(&gateway, &args, &env, dir.path().join("gateway.log"))?;
    let address = served.address().await?;

    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{address}/mcp/repo-memory"));
    let client = ().serve_with_lifecycle(transport, ClientLifecycleMode::Initialize).await?;
    let Value::Object(arguments) = json!({"query": "when does the deploy freeze start"}) else { bail!("object") };
    let result =
        client.call_tool(CallToolRequestParams::new("context_search").with_arguments(arguments as JsonObject)).await?;
    ensure!(result.is_error == Some(false), "{result:?}");
    let text = result.content[0].as_text().context("text block")?.text.clone();
    ensure!(text.contains("The deploy freeze starts on Friday at noon"), "{text}");
    client.cancel().await?;
    drop(upstream);
    Ok(())
}

/// POST JSON with `X-API-Key`; the response body.
async fn reqwest_post(address: &str, path: &str, key: &str, body: &Value) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.to_string();
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nX-API-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    Ok(String::from_utf8_lossy(&response).into_owned())
}

/// resourceVersions of everything the operator owns or writes status on in `namespace`, and the
/// Event count.
async fn versions(admin: &kube::Client, namespace: &str, providers: &[&str]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for kind in ["ConfigMap", "Deployment", "Service", "ServiceAccount", "NetworkPolicy", "PodDisruptionBudget"] {
        let object = get(admin, kind, Some(namespace), "memgate-gateway").await?.with_context(|| kind.to_string())?;
        out.push((kind.to_string(), object.metadata.resource_version.unwrap_or_default()));
    }
    let binding =
        get(admin, "ClusterRoleBinding", None, &format!("memgate-gateway-{namespace}")).await?.context("binding")?;
    out.push(("ClusterRoleBinding".into(), binding.metadata.resource_version.unwrap_or_default()));
    for name in providers {
        let object = get(admin, "MemoryProvider", Some(namespace), name).await?.context("provider")?;
        out.push((format!("MemoryProvider/{name}"), object.metadata.resource_version.unwrap_or_default()));
    }
    out.push(("Events".into(), events(admin, namespace).await?.len().to_string()));
    Ok(out)
}

#[tokio::test]
async fn steady_state_writes_nothing_over_a_minute_of_resyncs() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-steady").await?;
    let ns = cp.new_namespace("steady").await?;
    // Every optional gateway object exists here: the NetworkPolicy, the PodDisruptionBudget (two
    // replicas) and the binding.
    let running =
        start_operator(cp, &admin, &home, &[&ns], &["--resync-seconds", "2", "--gateway-network-policy", "true"])
            .await?;
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "steady-key")])).await?;
    apply(&admin, claim(&ns, "nexent-memory-plugins")).await?;
    let accounts =
        json!({"access": {"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": ns.clone()}]}}});
    apply(&admin, provider(&ns, "by-account", "mem0-api", accounts)).await?;
    apply(&admin, provider(&ns, "for-nexent", "mem0-api", json!({"nexent": {"search": true}}))).await?;
    apply(&admin, provider(&ns, "off", "mem0-api", json!({"enabled": false}))).await?;
    eventually("the gateway Deployment", || async {
        get(&admin, "Deployment", Some(&ns), "memgate-gateway").await.ok()?
    })
    .await?;
    wait_condition(&admin, &ns, "for-nexent", "ResolvedRefs", "True", "ResolvedRefs").await?;
    simulate_rollout(&admin, &ns).await?;
    for name in ["by-account", "for-nexent"] {
        wait_condition(&admin, &ns, name, "Ready", "True", "Ready").await?;
    }
    // Settled: no write for a few resyncs in a row.
    let writes = |text: &str| metric_sum(text, "memgate_operator_writes_total");
    let mut last = writes(&running.operator.get("/metrics").await?);
    let (started, mut quiet_since) = (Instant::now(), Instant::now());
    while quiet_since.elapsed() < Duration::from_secs(6) {
        ensure!(started.elapsed() < PATIENCE, "the operator never stopped writing ({last} writes)");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = writes(&running.operator.get("/metrics").await?);
        if now != last {
            (last, quiet_since) = (now, Instant::now());
        }
    }
    let providers = ["by-account", "for-nexent", "off"];
    let before = versions(&admin, &ns, &providers).await?;
    let metrics_before = running.operator.get("/metrics").await?;
    tokio::time::sleep(Duration::from_secs(60)).await;
    let after = versions(&admin, &ns, &providers).await?;
    let metrics_after = running.operator.get("/metrics").await?;
    ensure!(before == after, "resourceVersions changed in a steady state:\nbefore {before:?}\nafter  {after:?}");
    ensure!(writes(&metrics_before) == writes(&metrics_after), "the operator sent writes in a steady state");
    let series = "memgate_operator_reconciles_total{kind=\"namespace\",outcome=\"ok\"}";
    let resyncs = metric_value(&metrics_after, series) - metric_value(&metrics_before, series);
    ensure!(resyncs >= 10.0, "the periodic resync ran ({resyncs} reconciles in a minute) and wrote nothing");
    Ok(())
}

#[tokio::test]
async fn hand_edited_or_deleted_gateway_objects_are_restored_and_the_last_provider_takes_them_away() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-restore").await?;
    let ns = cp.new_namespace("restore").await?;
    let _running = start_operator(cp, &admin, &home, &[&ns], &[]).await?;
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "restore-key")])).await?;
    let accounts =
        json!({"access": {"serviceAccounts": {"audience": "memgate", "allowed": [{"namespace": ns.clone()}]}}});
    apply(&admin, provider(&ns, "only", "mem0-api", accounts)).await?;
    let binding_name = format!("memgate-gateway-{ns}");
    let original = wait_config(&admin, &ns, "serve `only`", |t| t.contains("name: only")).await?;
    eventually("the binding", || async { get(&admin, "ClusterRoleBinding", None, &binding_name).await.ok()? }).await?;

    edit(&admin, "ConfigMap", Some(&ns), "memgate-gateway", json!({"data": {"gateway.yaml": "# edited by hand\n"}}))
        .await?;
    wait_config(&admin, &ns, "be restored", |t| t == original).await?;
    edit(&admin, "Deployment", Some(&ns), "memgate-gateway", json!({"spec": {"replicas": 7}})).await?;
    eventually("the replicas to be restored", || async {
        let d = get(&admin, "Deployment", Some(&ns), "memgate-gateway").await.ok()??;
        (d.data.pointer("/spec/replicas") == Some(&json!(2))).then_some(())
    })
    .await?;
    for (kind, namespace, name) in
        [("Service", Some(ns.as_str()), "memgate-gateway"), ("ClusterRoleBinding", None, binding_name.as_str())]
    {
        let uid = get(&admin, kind, namespace, name).await?.and_then(|o| o.metadata.uid);
        delete(&admin, kind, namespace, name).await?;
        eventually(&format!("{kind} {name} to be re-created"), || async {
            let again = get(&admin, kind, namespace, name).await.ok()??;
            (again.metadata.uid != uid).then_some(())
        })
        .await?;
    }

    delete(&admin, "MemoryProvider", Some(&ns), "only").await?;
    eventually("every gateway object to be deleted", || async {
        for kind in ["ConfigMap", "Deployment", "Service", "ServiceAccount"] {
            if get(&admin, kind, Some(&ns), "memgate-gateway").await.ok()?.is_some() {
                return None;
            }
        }
        get(&admin, "ClusterRoleBinding", None, &binding_name).await.ok()?.is_none().then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn network_policy_disruption_budget_pull_secrets_and_default_claim_follow_the_settings() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-optional").await?;
    let ns = cp.new_namespace("optional").await?;
    let flags = [
        "--gateway-network-policy",
        "true",
        "--gateway-network-policy-allowed-namespace",
        "monitoring",
        "--gateway-network-policy-allowed-namespace",
        "agents,monitoring",
        "--gateway-image-pull-secret",
        "regcred",
        "--gateway-default-plugin-claim",
        "team-plugins",
    ];
    let _running = start_operator(cp, &admin, &home, &[&ns], &flags).await?;
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "optional-key")])).await?;
    apply(&admin, provider(&ns, "searcher", "mem0-api", json!({"nexent": {"search": true}}))).await?;

    // A provider naming no claim needs the configured default one, not the built-in name.
    let missing = wait_condition(&admin, &ns, "searcher", "ResolvedRefs", "False", "PluginClaimNotFound").await?;
    let (_, _, message) = condition(&missing, "ResolvedRefs").context("ResolvedRefs")?;
    ensure!(message.contains("\"team-plugins\""), "{message}");
    apply(&admin, claim(&ns, "team-plugins")).await?;
    wait_condition(&admin, &ns, "searcher", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let pod = eventually("a Deployment mounting the default claim", || async {
        let d: Deployment = Api::namespaced(admin.clone(), &ns).get("memgate-gateway").await.ok()?;
        let pod = d.spec.template.spec?;
        let mounts_it = pod
            .volumes
            .iter()
            .flatten()
            .any(|v| v.persistent_volume_claim.as_ref().is_some_and(|c| c.claim_name == "team-plugins"));
        mounts_it.then_some(pod)
    })
    .await?;
    let pull: Vec<String> = pod.image_pull_secrets.iter().flatten().map(|r| r.name.clone()).collect();
    ensure!(pull == ["regcred"], "imagePullSecrets: {pull:?}");

    // The NetworkPolicy: the gateway pods, both ports, the own namespace and the listed ones.
    let policy = eventually("the NetworkPolicy", || async {
        get(&admin, "NetworkPolicy", Some(&ns), "memgate-gateway").await.ok()?
    })
    .await?;
    let mut namespaces = vec!["agents".to_string(), "monitoring".to_string(), ns.clone()];
    namespaces.sort();
    let expected = json!({
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "memgate-gateway",
                                        "app.kubernetes.io/managed-by": "memgate-operator"}},
        "policyTypes": ["Ingress"],
        "ingress": [{
            "from": [{"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]}}],
            "ports": [{"protocol": "TCP", "port": 8080}, {"protocol": "TCP", "port": 9090}],
        }],
    });
    ensure!(policy.data["spec"] == expected, "NetworkPolicy spec: {}", policy.data["spec"]);

    // Two replicas: the PodDisruptionBudget lets one pod go at a time.
    let budget = eventually("the PodDisruptionBudget", || async {
        get(&admin, "PodDisruptionBudget", Some(&ns), "memgate-gateway").await.ok()?
    })
    .await?;
    ensure!(budget.data.pointer("/spec/maxUnavailable") == Some(&json!(1)), "{}", budget.data["spec"]);
    ensure!(budget.data.pointer("/spec/selector") == expected.get("podSelector"), "{}", budget.data["spec"]);

    // A hand-deleted NetworkPolicy is put back.
    let uid = policy.metadata.uid.clone();
    delete(&admin, "NetworkPolicy", Some(&ns), "memgate-gateway").await?;
    eventually("the NetworkPolicy to be re-created", || async {
        let again = get(&admin, "NetworkPolicy", Some(&ns), "memgate-gateway").await.ok()??;
        (again.metadata.uid != uid).then_some(())
    })
    .await?;

    // Ingest without a shared ledger: one replica, so the budget goes (the policy stays).
    edit(&admin, "MemoryProvider", Some(&ns), "searcher", json!({"spec": {"nexent": {"ingest": true}}})).await?;
    eventually("one replica and no PodDisruptionBudget", || async {
        let d = get(&admin, "Deployment", Some(&ns), "memgate-gateway").await.ok()??;
        let gone = get(&admin, "PodDisruptionBudget", Some(&ns), "memgate-gateway").await.ok()?.is_none();
        (d.data.pointer("/spec/replicas") == Some(&json!(1)) && gone).then_some(())
    })
    .await?;
    ensure!(get(&admin, "NetworkPolicy", Some(&ns), "memgate-gateway").await?.is_some(), "the policy stays");

    // The last provider takes the policy with it.
    delete(&admin, "MemoryProvider", Some(&ns), "searcher").await?;
    eventually("the NetworkPolicy to be deleted", || async {
        get(&admin, "NetworkPolicy", Some(&ns), "memgate-gateway").await.ok()?.is_none().then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test]
async fn two_operators_elect_one_leader_and_the_standby_takes_over_when_it_is_killed() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-leader").await?;
    let ns = cp.new_namespace("leader").await?;
    let first = start_operator(cp, &admin, &home, &[&ns], &["--identity", "first"]).await?;
    let second = start_operator(cp, &admin, &home, &[&ns], &["--identity", "second"]).await?;
    let mut operators = [first, second];
    let leader_of = |text: &str| metric_value(text, "memgate_operator_leader") == 1.0;
    let leading = eventually("one leader", || async {
        let a = leader_of(&operators[0].operator.get("/metrics").await.ok()?);
        let b = leader_of(&operators[1].operator.get("/metrics").await.ok()?);
        (a != b).then_some(if a { 0 } else { 1 })
    })
    .await?;
    let standby = 1 - leading;

    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "leader-key")])).await?;
    apply(&admin, provider(&ns, "first", "mem0-api", json!({}))).await?;
    wait_condition(&admin, &ns, "first", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let reconciles = |text: &str| metric_sum(text, "memgate_operator_reconciles_total");
    ensure!(reconciles(&operators[leading].operator.get("/metrics").await?) > 0.0, "the leader reconciles");
    ensure!(reconciles(&operators[standby].operator.get("/metrics").await?) == 0.0, "the standby never reconciles");
    ensure!(operators[standby].operator.get("/readyz").await? == "ok\n", "a synced standby is ready");

    let lease_duration = Duration::from_secs(4);
    operators[leading].operator.kill().await?;
    let killed = Instant::now();
    eventually("the standby to take over", || async {
        leader_of(&operators[standby].operator.get("/metrics").await.ok()?).then_some(())
    })
    .await?;
    let takeover = killed.elapsed();
    eprintln!("measured: takeover {takeover:?} after SIGKILL (lease duration {lease_duration:?})");
    ensure!(takeover < lease_duration * 4, "takeover took {takeover:?}");
    apply(&admin, provider(&ns, "second", "mem0-api", json!({}))).await?;
    wait_condition(&admin, &ns, "second", "ResolvedRefs", "True", "ResolvedRefs").await?;
    ensure!(operators[standby].operator.running());
    Ok(())
}

#[tokio::test]
async fn readme_cluster_quickstart_objects_become_a_ready_provider() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-quickstart").await?;
    let ns = cp.new_namespace("quickstart").await?;
    let _running = start_operator(cp, &admin, &home, &[&ns], &[]).await?;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster/quickstart.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&path)?)?;
    let mut applied = 0;
    for mut doc in docs.into_iter().filter(|d| d["kind"] != "Namespace") {
        ensure!(doc["metadata"]["namespace"] == "agents", "the quickstart lives in namespace agents");
        doc["metadata"]["namespace"] = json!(ns);
        apply(&admin, doc).await?;
        applied += 1;
    }
    ensure!(applied == 2, "a Secret and a MemoryProvider");
    eventually("the gateway Deployment", || async {
        get(&admin, "Deployment", Some(&ns), "memgate-gateway").await.ok()?
    })
    .await?;
    simulate_rollout(&admin, &ns).await?;
    let ready = wait_condition(&admin, &ns, "repo-memory", "Ready", "True", "Ready").await?;
    ensure!(
        ready.data.pointer("/status/endpoints/mcp")
            == Some(&json!(format!("http://memgate-gateway.{ns}.svc:8080/mcp/repo-memory")))
    );
    Ok(())
}
