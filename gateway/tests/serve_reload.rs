//! Config and credential reload of the running binary: new providers appear without a restart, a
//! broken config keeps the last good one (and readiness says why), a changed mounted Secret takes
//! effect (also when Kubernetes swaps a whole ConfigMap or Secret volume), and a request in flight
//! during a reload completes.

mod serve_support;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use serve_support::{
    CALLER_TOKEN, Gateway, ProviderYaml, UPSTREAM_KEY, mem0_results, secret_yaml, upstream_secret, write_atomically,
};
use support::{Reply, Server};
use tokio::time::Instant;

const QUERY: &str = "reload probe 7d21";

fn generation(ready: &Value) -> u64 {
    ready["generation"].as_u64().unwrap_or(0)
}

#[tokio::test]
async fn a_new_provider_is_served_after_a_file_change_without_restart() {
    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("secret.yaml"), upstream_secret()).expect("write");
    std::fs::write(dir.path().join("first.yaml"), ProviderYaml::new("first", &upstream.origin()).yaml())
        .expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;
    assert_eq!(gateway.search("second", &json!({"query": QUERY}), None).await.status, 404);

    write_atomically(&dir.path().join("second.yaml"), &ProviderYaml::new("second", &upstream.origin()).yaml());
    let ready = gateway.wait_ready("second provider loaded", |r| r["providers"] == 2).await;
    assert_eq!(generation(&ready), 2);
    assert_eq!(ready["lastReloadError"], Value::Null);
    let answer = gateway.search("second", &json!({"query": QUERY}), None).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json()[0]["source"], "second");
}

#[tokio::test]
async fn an_invalid_file_keeps_the_last_good_config_and_readiness_names_the_problem() {
    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let callers = secret_yaml("callers", "token", CALLER_TOKEN);
    std::fs::write(dir.path().join("secrets.yaml"), format!("{}---\n{callers}", upstream_secret())).expect("write");
    let guarded = ProviderYaml::new("guarded", &upstream.origin())
        .access("{bearerToken: {secretRef: {name: callers, key: token}}}");
    std::fs::write(dir.path().join("guarded.yaml"), guarded.yaml()).expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;

    let mut broken = ProviderYaml::new("broken", &upstream.origin());
    broken.timeout_ms = 0;
    write_atomically(&dir.path().join("broken.yaml"), &broken.yaml());
    let ready = gateway.wait_ready("reload refused", |r| r["lastReloadError"].is_string()).await;
    let error = ready["lastReloadError"].as_str().unwrap_or_default();
    assert!(error.contains("broken.yaml") && error.contains("spec.timeoutMs"), "{error}");
    assert_eq!(generation(&ready), 1, "{ready}");
    assert_eq!(ready["providers"], 1);

    let answer = gateway.search("guarded", &json!({"query": QUERY}), Some(CALLER_TOKEN)).await;
    assert_eq!(answer.status, 200, "the last good config is still served: {}", answer.text);
    assert_eq!(gateway.search("broken", &json!({"query": QUERY}), None).await.status, 404);

    // Fixing the file clears the error.
    broken.timeout_ms = 1000;
    write_atomically(&dir.path().join("broken.yaml"), &broken.yaml());
    let ready = gateway.wait_ready("fixed config loaded", |r| r["providers"] == 2).await;
    assert_eq!(ready["lastReloadError"], Value::Null);

    let logs = gateway.logs();
    assert!(logs.contains("config reload failed"), "{logs}");
    for secret in [UPSTREAM_KEY, CALLER_TOKEN, QUERY] {
        assert!(!logs.contains(secret), "{secret} in logs");
    }
}

#[tokio::test]
async fn a_changed_mounted_credential_takes_effect() {
    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let secret_dir = dir.path().join("secrets/upstream");
    std::fs::create_dir_all(&secret_dir).expect("mkdir");
    std::fs::write(secret_dir.join("api-key"), "first-key-0a1b").expect("write");
    let mount = "apiVersion: gateway.memgate.io/v1alpha1\nkind: SecretMount\nmetadata: {name: upstream, namespace: agents}\npath: secrets/upstream\n";
    let provider = ProviderYaml::new("repo-memory", &upstream.origin()).yaml();
    std::fs::write(dir.path().join("gateway.yaml"), format!("{provider}---\n{mount}")).expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;

    let key_sent = |index: usize| {
        upstream.requests()[index].headers.iter().find(|(n, _)| n == "x-api-key").map(|(_, v)| v.clone())
    };
    assert_eq!(gateway.search("repo-memory", &json!({"query": QUERY}), None).await.status, 200);
    assert_eq!(key_sent(0).as_deref(), Some("first-key-0a1b"));

    write_atomically(&secret_dir.join("api-key"), "second-key-2c3d");
    gateway.wait_ready("credential reloaded", |r| generation(r) == 2).await;
    assert_eq!(gateway.search("repo-memory", &json!({"query": QUERY}), None).await.status, 200);
    assert_eq!(key_sent(1).as_deref(), Some("second-key-2c3d"));
    let logs = gateway.logs();
    assert!(!logs.contains("first-key-0a1b") && !logs.contains("second-key-2c3d"), "{logs}");
}

/// Publish `files` into the volume at `root` as the kubelet's atomic writer does: a new
/// `..<generation>/` folder, a `..data` symlink renamed over the old one, `key -> ..data/key` links,
/// the old folder removed.
fn kubelet_publish(root: &std::path::Path, generation: &str, files: &[(&str, &str)]) {
    use std::os::unix::fs::symlink;
    let folder = format!("..{generation}");
    std::fs::create_dir_all(root.join(&folder)).expect("mkdir");
    for (key, text) in files {
        std::fs::write(root.join(&folder).join(key), text).expect("write");
    }
    let old = std::fs::read_link(root.join("..data")).ok();
    symlink(&folder, root.join("..data_tmp")).expect("symlink");
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("rename");
    for (key, _) in files {
        if std::fs::symlink_metadata(root.join(key)).is_err() {
            symlink(format!("..data/{key}"), root.join(key)).expect("symlink");
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(root.join(old)).expect("rm old");
    }
}

#[tokio::test]
async fn kubelet_swaps_of_the_config_and_secret_volumes_are_picked_up() {
    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    let config = tempfile::tempdir().expect("tempdir");
    let secret = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let mount = format!(
        "apiVersion: gateway.memgate.io/v1alpha1\nkind: SecretMount\nmetadata: {{name: upstream, namespace: agents}}\npath: {}\n",
        secret.path().display()
    );
    let first = ProviderYaml::new("first", &upstream.origin()).yaml();
    let second = ProviderYaml::new("second", &upstream.origin()).yaml();
    kubelet_publish(secret.path(), "2026_01_01_00_00_00.000000001", &[("api-key", "first-key-0a1b")]);
    kubelet_publish(
        config.path(),
        "2026_01_01_00_00_00.000000002",
        &[("gateway.yaml", &format!("{first}---\n{mount}"))],
    );
    let gateway = Gateway::start(config.path(), logs.path(), &[], &[]).await;
    assert_eq!(gateway.search("second", &json!({"query": QUERY}), None).await.status, 404);

    let both = format!("{first}---\n{second}---\n{mount}");
    kubelet_publish(config.path(), "2026_01_01_00_01_00.000000003", &[("gateway.yaml", &both)]);
    let ready = gateway.wait_ready("config volume swapped", |r| r["providers"] == 2).await;
    assert_eq!(generation(&ready), 2);
    assert_eq!(gateway.search("second", &json!({"query": QUERY}), None).await.status, 200);

    kubelet_publish(secret.path(), "2026_01_01_00_02_00.000000004", &[("api-key", "second-key-2c3d")]);
    gateway.wait_ready("Secret volume swapped", |r| generation(r) == 3).await;
    assert_eq!(gateway.search("first", &json!({"query": QUERY}), None).await.status, 200);
    let keys: Vec<_> = upstream
        .requests()
        .iter()
        .map(|r| r.headers.iter().find(|(n, _)| n == "x-api-key").map(|(_, v)| v.clone()))
        .collect();
    assert_eq!(keys, [Some("first-key-0a1b".to_string()), Some("second-key-2c3d".to_string())]);
}

#[tokio::test]
async fn a_request_in_flight_survives_a_reload() {
    let slow = Server::always(Reply::After(Duration::from_secs(3), Box::new(Reply::json(&mem0_results(3))))).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("secret.yaml"), upstream_secret()).expect("write");
    std::fs::write(dir.path().join("slow.yaml"), ProviderYaml::new("slow", &slow.origin()).yaml()).expect("write");
    let gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;

    let body = json!({"query": QUERY});
    let in_flight = async {
        let answer = gateway.search("slow", &body, None).await;
        (answer, Instant::now())
    };
    let reload = async {
        slow.wait_for_requests(1).await;
        // Remove the provider the request is using: the request keeps its own snapshot.
        std::fs::remove_file(dir.path().join("slow.yaml")).expect("remove");
        let ready = gateway.wait_ready("provider removed", |r| r["providers"] == 0).await;
        (ready, Instant::now())
    };
    let ((answer, answered), (ready, reloaded)) = tokio::join!(in_flight, reload);
    assert!(reloaded < answered, "the reload happened while the request was in flight");
    assert_eq!(generation(&ready), 2);
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json().as_array().map(Vec::len), Some(3));
    assert_eq!(gateway.search("slow", &json!({"query": QUERY}), None).await.status, 404);
}

#[tokio::test]
async fn an_invalid_initial_config_exits_non_zero_naming_the_problems() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let mut broken = ProviderYaml::new("broken", "http://127.0.0.1:9");
    broken.timeout_ms = 0;
    std::fs::write(dir.path().join("broken.yaml"), format!("{}---\n{}", upstream_secret(), broken.yaml()))
        .expect("write");
    let (status, output) = Gateway::run_to_exit(dir.path(), logs.path()).await;
    assert!(!status.success(), "{status}");
    assert!(output.contains("broken.yaml") && output.contains("spec.timeoutMs"), "{output}");
    assert!(!output.contains(UPSTREAM_KEY), "{output}");
}

#[tokio::test]
async fn sigterm_stops_the_gateway_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let logs = tempfile::tempdir().expect("tempdir");
    let provider = ProviderYaml::new("repo-memory", "http://127.0.0.1:9");
    std::fs::write(dir.path().join("gateway.yaml"), format!("{}---\n{}", upstream_secret(), provider.yaml()))
        .expect("write");
    let mut gateway = Gateway::start(dir.path(), logs.path(), &[], &[]).await;
    let pid = gateway.pid().expect("running").to_string();
    let sent = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(sent.success());
    let status = gateway.wait().await;
    assert!(status.success(), "{status}: {}", gateway.logs());
    assert!(gateway.logs().contains("shutdown requested"));
}
