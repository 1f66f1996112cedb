//! The gateway's side of the trust model (SECURITY.md), each against the real peer:
//!
//! - a ServiceAccount token minted for one gateway is refused by another (real TokenReview of the
//!   memgate-e2e kube-apiserver; the audience defaults to each gateway's own `--public-url`);
//! - a repeated invalid token costs one TokenReview per negative-cache TTL, counted by
//!   `memgate_gateway_token_reviews_total`;
//! - a name that resolves to a cloud-metadata address is refused when connecting, although the
//!   address answers (a private network and mount namespace: `169.254.169.254` on its loopback,
//!   `/etc/hosts` naming it; the gateway, the upstream and curl all run inside);
//! - the Nexent routes refuse what a browser page can send: a foreign `Host` (DNS rebinding), an
//!   `Origin`, a body not declared as JSON.

mod serve_support;
mod support;

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, Result, ensure};
use memgate_e2e::ControlPlane;
use serde_json::json;
use serve_support::{Gateway, ProviderYaml, mem0_results, service_account_token, upstream_secret};
use support::{Reply, Server};

/// The value of one sample of the gateway's `/metrics`, 0 when absent.
async fn metric(gateway: &Gateway, name_and_labels: &str) -> f64 {
    let text = gateway.get("/metrics").await.text;
    text.lines()
        .find_map(|line| line.strip_prefix(name_and_labels).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_token_minted_for_one_gateway_is_refused_by_another() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-audience").await?;
    let client = control_plane.client()?;
    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    // No `audience`: each gateway accepts tokens bound to its own URL only.
    let access = format!("{{serviceAccounts: {{allowed: [{{namespace: {namespace}}}]}}}}");
    let provider = ProviderYaml::new("team", &upstream.origin()).access(&access);
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("gateway.yaml"), [upstream_secret(), provider.yaml()].join("---\n"))?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let (url_a, url_b) = ("http://memgate-gateway.team-a.svc:8080", "http://memgate-gateway.team-b.svc:8080");
    let (logs_a, logs_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let a = Gateway::start(dir.path(), logs_a.path(), &["--kubeconfig", &kubeconfig, "--public-url", url_a], &[]).await;
    let b = Gateway::start(dir.path(), logs_b.path(), &["--kubeconfig", &kubeconfig, "--public-url", url_b], &[]).await;

    let for_a = service_account_token(&client, &namespace, "agent", url_a).await?;
    let query = json!({"query": "which gateway is this"});
    ensure!(a.search("team", &query, Some(&for_a)).await.status == 200, "gateway A accepts a token minted for it");
    let replayed = b.search("team", &query, Some(&for_a)).await;
    ensure!(replayed.status == 401, "gateway B refuses A's token: {} {}", replayed.status, replayed.text);
    let for_b = service_account_token(&client, &namespace, "agent", url_b).await?;
    ensure!(b.search("team", &query, Some(&for_b)).await.status == 200, "B accepts its own");
    let shared = service_account_token(&client, &namespace, "agent", "memgate").await?;
    ensure!(a.search("team", &query, Some(&shared)).await.status == 401, "a shared word is not the default audience");
    ensure!(upstream.requests().len() == 2, "only the two accepted calls reach the upstream");
    for token in [&for_a, &for_b, &shared] {
        ensure!(!a.logs().contains(token.as_str()) && !b.logs().contains(token.as_str()), "a token in the logs");
    }
    Ok(())
}

#[tokio::test]
async fn a_repeated_invalid_token_is_reviewed_once_per_negative_cache_ttl() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-negative").await?;
    let client = control_plane.client()?;
    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    let access = format!("{{serviceAccounts: {{allowed: [{{namespace: {namespace}, name: robot}}]}}}}");
    let provider = ProviderYaml::new("team", &upstream.origin()).access(&access);
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("gateway.yaml"), [upstream_secret(), provider.yaml()].join("---\n"))?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let public = "http://memgate-gateway.negative.svc:8080";
    let gateway =
        Gateway::start(dir.path(), dir.path(), &["--kubeconfig", &kubeconfig, "--public-url", public], &[]).await;
    // A real token, but for another audience: the API server rejects it.
    let wrong = service_account_token(&client, &namespace, "robot", "somewhere-else").await?;
    let query = json!({"query": "flood"});
    for _ in 0..20 {
        ensure!(gateway.search("team", &query, Some(&wrong)).await.status == 401);
    }
    let asked =
        metric(&gateway, "memgate_gateway_token_reviews_total{answered_by=\"api_server\",verdict=\"rejected\"}").await;
    let cached =
        metric(&gateway, "memgate_gateway_token_reviews_total{answered_by=\"cache\",verdict=\"rejected\"}").await;
    ensure!(asked == 1.0, "one review for twenty calls within the TTL, got {asked}");
    ensure!(cached == 19.0, "nineteen answered from the negative cache, got {cached}");
    let good = service_account_token(&client, &namespace, "robot", public).await?;
    ensure!(gateway.search("team", &query, Some(&good)).await.status == 200, "a valid token is unaffected");
    ensure!(upstream.requests().len() == 1, "no refused call reached the upstream");
    Ok(())
}

/// Inside a private network and mount namespace: `169.254.169.254` on the loopback interface
/// (reachable, as a metadata server would be), `/etc/hosts` naming it `metadata-alias.test` and
/// naming `127.0.0.1` `upstream.test`; the dev upstream listens on both addresses. Prints one
/// `<label> <HTTP status>` line per probe, then the gateway's log.
const NAMESPACED_PROBE: &str = r#"
set -eu
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
mount --bind "$HOSTS" /etc/hosts
MEMGATE_DEV_UPSTREAM_API_KEY=probe-key "$GATEWAY" dev-upstream --listen 0.0.0.0:18888 >/dev/null 2>&1 &
upstream=$!
"$GATEWAY" serve --config "$CONFIG" --listen 127.0.0.1:18080 --placement "$PLACEMENT" >/dev/null 2>"$WORK/gateway.log" &
gateway=$!
trap 'kill $upstream $gateway 2>/dev/null; wait 2>/dev/null' EXIT
for _ in $(seq 1 200); do
  curl -fs -o /dev/null http://127.0.0.1:18080/readyz && break
  sleep 0.05
done
search() { curl -s -o /dev/null -w '%{http_code}' -X POST -H 'content-type: application/json' \
  -d '{"query":"metadata probe"}' "http://127.0.0.1:18080/nexent/v1/$1/search"; }
echo "direct $(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'x-api-key: probe-key' \
  -H 'content-type: application/json' -d '{"query":"q","user_id":"u"}' http://169.254.169.254:18888/search)"
echo "control $(search control)"
echo "metadata $(search via-metadata)"
"#;

fn probe_config(dir: &Path) -> Result<()> {
    let mut control = ProviderYaml::new("control", "http://upstream.test:18888");
    control.credential_secret = "dev".into();
    let mut metadata = ProviderYaml::new("via-metadata", "http://metadata-alias.test:18888");
    metadata.credential_secret = "dev".into();
    let secret = serve_support::secret_yaml("dev", "api-key", "probe-key");
    std::fs::write(dir.join("gateway.yaml"), [secret, control.yaml(), metadata.yaml()].join("---\n"))?;
    Ok(())
}

async fn probe(placement: &str) -> Result<(Vec<(String, String)>, String)> {
    let work = tempfile::tempdir()?;
    let config = work.path().join("config");
    std::fs::create_dir(&config)?;
    probe_config(&config)?;
    let hosts = work.path().join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost upstream.test\n169.254.169.254 metadata-alias.test\n")?;
    let output = tokio::process::Command::new("unshare")
        .args(["--mount", "--net", "sh", "-c", NAMESPACED_PROBE])
        .env("HOSTS", &hosts)
        .env("GATEWAY", env!("CARGO_BIN_EXE_memgate-gateway"))
        .env("CONFIG", &config)
        .env("PLACEMENT", placement)
        .env("WORK", work.path())
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("unshare (util-linux) with a private network namespace: this test needs root")?;
    let log = std::fs::read_to_string(work.path().join("gateway.log")).unwrap_or_default();
    ensure!(output.status.success(), "probe script failed: {}\n{log}", String::from_utf8_lossy(&output.stderr));
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())))
        .collect();
    Ok((lines, log))
}

#[tokio::test]
async fn a_name_resolving_to_a_metadata_address_is_refused_when_connecting() -> Result<()> {
    let (answers, log) = probe("standalone").await?;
    let status = |label: &str| answers.iter().find(|(l, _)| l == label).map(|(_, s)| s.clone()).unwrap_or_default();
    ensure!(status("direct") == "200", "the metadata address answers inside the namespace: {answers:?}\n{log}");
    ensure!(
        status("control") == "200",
        "a name resolving to loopback is served on a person's machine: {answers:?}\n{log}"
    );
    ensure!(status("metadata") == "502", "a name resolving to 169.254.169.254 is refused: {answers:?}\n{log}");
    ensure!(log.contains("upstream address refused at connect time"), "the refusal is logged:\n{log}");
    ensure!(log.contains("link-local"), "with its reason:\n{log}");

    // In a cluster, a name resolving to loopback (the gateway pod itself) is refused as well.
    let (answers, log) = probe("cluster").await?;
    let status = |label: &str| answers.iter().find(|(l, _)| l == label).map(|(_, s)| s.clone()).unwrap_or_default();
    ensure!(status("control") == "502", "loopback refused in a cluster: {answers:?}\n{log}");
    ensure!(status("metadata") == "502", "{answers:?}\n{log}");
    Ok(())
}

#[tokio::test]
async fn nexent_routes_refuse_what_a_browser_page_can_send() -> Result<()> {
    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    let provider = ProviderYaml::new("team", &upstream.origin());
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("gateway.yaml"), [upstream_secret(), provider.yaml()].join("---\n"))?;
    let gateway = Gateway::start(dir.path(), dir.path(), &[], &[]).await;
    let body = serde_json::to_vec(&json!({"query": "rebinding"}))?;
    let path = "/nexent/v1/team/search";

    let ok = gateway.post_raw(path, body.clone(), None, &[]).await;
    ensure!(ok.status == 200, "loopback Host, JSON, no Origin: {} {}", ok.status, ok.text);
    // DNS rebinding: the page's own name in Host.
    let rebound = gateway.post_raw(path, body.clone(), None, &[("host", "attacker.example:8080")]).await;
    ensure!(rebound.status == 403 && rebound.json()["code"] == "forbidden", "{} {}", rebound.status, rebound.text);
    // A cross-site fetch carries Origin.
    let cross = gateway.post_raw(path, body.clone(), None, &[("origin", "https://attacker.example")]).await;
    ensure!(cross.status == 403, "{} {}", cross.status, cross.text);
    // A form post or no-cors fetch cannot declare JSON.
    let form = gateway.post_raw(path, body.clone(), None, &[("content-type", "text/plain")]).await;
    ensure!(form.status == 415 && form.json()["code"] == "invalid_payload", "{} {}", form.status, form.text);
    let ingest = gateway
        .post_raw(
            "/nexent/v1/team/ingest",
            b"{}".to_vec(),
            None,
            &[("content-type", "application/x-www-form-urlencoded")],
        )
        .await;
    ensure!(ingest.status == 415, "ingest too: {} {}", ingest.status, ingest.text);
    ensure!(upstream.requests().len() == 1, "only the well-formed call reached the upstream");
    Ok(())
}
