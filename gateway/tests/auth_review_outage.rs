//! The running `memgate-gateway serve` binary while the API server behind TokenReview is down (a dedicated
//! memgate-e2e control plane whose kube-apiserver is killed and started again on the same address):
//!
//! - providers that need no review (anonymous, static bearer token) keep serving the last config, and a config
//!   reload from the folder still works;
//! - a ServiceAccount caller whose token has no cached verdict is refused with the documented 503
//!   `provider_error` / `retryable` (Nexent and MCP alike), counted as `error_code="unavailable"`;
//! - a token accepted within the review cache TTL ([`REVIEW_CACHE_TTL`], 30 s) is still accepted from the
//!   cache, and refused the same way once its verdict has expired;
//! - after the restart ServiceAccount callers are accepted again by the same gateway process.

mod serve_support;
mod support;

use std::time::Duration;

use anyhow::{Result, ensure};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use memgate_e2e::ControlPlane;
use memgate_gateway::auth::REVIEW_CACHE_TTL;
use serde_json::{Value, json};
use serve_support::{
    Answer, CALLER_TOKEN, Gateway, ProviderYaml, UPSTREAM_KEY, mem0_results, secret_yaml, service_account_token,
    upstream_secret, write_atomically,
};
use support::{Reply, Server};
use tokio::time::Instant;

const AUDIENCE: &str = "memgate-outage";
const QUERY: &str = "review outage probe 61c4";

/// The fixed body of a caller refused because its identity cannot be verified now.
fn unavailable_body() -> Value {
    json!({"code": "provider_error", "severity": "retryable", "message": "Caller identity cannot be verified now.",
           "retry_after_seconds": null})
}

/// An MCP `tools/call` of `context_search` at `provider`.
async fn mcp_search(gateway: &Gateway, provider: &str, token: &str) -> Answer {
    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "context_search", "arguments": {"query": QUERY}}
    });
    let headers = [("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-06-18")];
    gateway.post_with(&format!("/mcp/{provider}"), &call, Some(token), &headers).await
}

/// A Nexent search that must succeed with the upstream's two results.
async fn served(gateway: &Gateway, provider: &str, token: Option<&str>) -> Result<()> {
    let answer = gateway.search(provider, &json!({"query": QUERY}), token).await;
    ensure!(answer.status == 200, "{provider}: {} {}", answer.status, answer.text);
    let results = answer.json().as_array().map_or(0, Vec::len);
    ensure!(results == 2, "{provider}: two results, got {}", answer.text);
    Ok(())
}

/// A Nexent search and an MCP call refused with the documented 503.
async fn refused_as_unavailable(gateway: &Gateway, provider: &str, token: &str) -> Result<()> {
    let nexent = gateway.search(provider, &json!({"query": QUERY}), Some(token)).await;
    ensure!(nexent.status == 503 && nexent.json() == unavailable_body(), "Nexent: {} {}", nexent.status, nexent.text);
    ensure!(nexent.header("www-authenticate").is_none(), "no challenge for an unavailable review");
    let mcp = mcp_search(gateway, provider, token).await;
    ensure!(mcp.status == 503 && mcp.json() == unavailable_body(), "MCP: {} {}", mcp.status, mcp.text);
    ensure!(mcp.header("www-authenticate").is_none(), "no challenge for an unavailable review (MCP)");
    Ok(())
}

/// Sum of `memgate_gateway_auth_checks_total` series of `provider` carrying every label in `labels`.
fn auth_checks(metrics: &str, provider: &str, labels: &[&str]) -> f64 {
    let provider = format!("provider=\"{provider}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("memgate_gateway_auth_checks_total{") && l.contains(&provider))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn unavailable_count(metrics: &str) -> f64 {
    auth_checks(metrics, "accounts", &["operation=\"service_account\"", "error_code=\"unavailable\""])
}

#[tokio::test]
async fn without_the_api_server_only_callers_needing_a_review_are_refused_and_they_recover_after_it() -> Result<()> {
    let control_plane = ControlPlane::start().await?;
    let namespace = control_plane.new_namespace("review-outage").await?;
    let client = control_plane.client()?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let robot = ServiceAccount {
        metadata: ObjectMeta { name: Some("robot".into()), ..ObjectMeta::default() },
        ..Default::default()
    };
    accounts.create(&PostParams::default(), &robot).await?;
    // Two tokens of the same ServiceAccount: `warm` is reviewed before the outage, `cold` is not.
    let warm = service_account_token(&client, &namespace, "robot", AUDIENCE).await?;
    let cold = service_account_token(&client, &namespace, "robot", AUDIENCE).await?;

    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let dir = tempfile::tempdir()?;
    let logs = tempfile::tempdir()?;
    let open = ProviderYaml::new("open", &upstream.origin());
    let guarded = ProviderYaml::new("guarded", &upstream.origin())
        .access("{bearerToken: {secretRef: {name: callers, key: token}}}");
    let reviewed = ProviderYaml::new("accounts", &upstream.origin()).access(&format!(
        "{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}, name: robot}}]}}}}"
    ));
    let secrets = [upstream_secret(), secret_yaml("callers", "token", CALLER_TOKEN)].join("---\n");
    std::fs::write(dir.path().join("secrets.yaml"), secrets)?;
    std::fs::write(dir.path().join("providers.yaml"), [open.yaml(), guarded.yaml(), reviewed.yaml()].join("---\n"))?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let gateway = Gateway::start(dir.path(), logs.path(), &["--kubeconfig", &kubeconfig], &[]).await;
    let pid = gateway.pid();

    // Warm: every provider answers; `warm` is reviewed (and its verdict cached).
    served(&gateway, "open", None).await?;
    served(&gateway, "guarded", Some(CALLER_TOKEN)).await?;
    served(&gateway, "accounts", Some(&warm)).await?;
    let warm_reviewed = Instant::now();
    let before = unavailable_count(&gateway.get("/metrics").await.text);
    ensure!(before == 0.0, "nothing refused as unavailable yet");

    control_plane.stop_apiserver().await?;
    let stopped = Instant::now();

    // Within the TTL, the cached verdict still admits `warm` (no review is needed for it).
    served(&gateway, "accounts", Some(&warm)).await?;
    ensure!(
        warm_reviewed.elapsed() < REVIEW_CACHE_TTL,
        "the cached call must come within {REVIEW_CACHE_TTL:?} of the review (took {:?})",
        warm_reviewed.elapsed()
    );
    let mcp = mcp_search(&gateway, "accounts", &warm).await;
    ensure!(mcp.status == 200 && mcp.json()["result"]["isError"] == false, "cached verdict, MCP: {}", mcp.text);

    // Providers that need no review serve the last config.
    served(&gateway, "open", None).await?;
    served(&gateway, "guarded", Some(CALLER_TOKEN)).await?;

    // A token without a cached verdict needs the API server: 503, retryable, no upstream call.
    let upstream_calls = upstream.requests().len();
    let asked = Instant::now();
    refused_as_unavailable(&gateway, "accounts", &cold).await?;
    let refusal_took = asked.elapsed() / 2;
    ensure!(upstream.requests().len() == upstream_calls, "a refused caller reaches no upstream");

    // The config folder is still read: a provider added now is served.
    write_atomically(&dir.path().join("added.yaml"), &ProviderYaml::new("added", &upstream.origin()).yaml());
    gateway.wait_ready("the added provider loaded", |ready| ready["providers"] == 4).await;
    served(&gateway, "added", None).await?;

    // Once the cached verdict has expired, `warm` needs a review too.
    let expired = warm_reviewed + REVIEW_CACHE_TTL + Duration::from_secs(1);
    tokio::time::sleep_until(expired).await;
    refused_as_unavailable(&gateway, "accounts", &warm).await?;
    served(&gateway, "open", None).await?;
    let during = gateway.get("/metrics").await.text;
    ensure!(unavailable_count(&during) == 4.0, "four refusals counted as unavailable:\n{during}");

    control_plane.start_apiserver().await?;
    let outage = stopped.elapsed();
    let restarted = Instant::now();

    // The same gateway process reviews again: both tokens, both surfaces.
    served(&gateway, "accounts", Some(&cold)).await?;
    let recovered = restarted.elapsed();
    served(&gateway, "accounts", Some(&warm)).await?;
    let mcp = mcp_search(&gateway, "accounts", &cold).await;
    ensure!(mcp.status == 200 && mcp.json()["result"]["isError"] == false, "after the restart, MCP: {}", mcp.text);
    ensure!(gateway.pid() == pid && pid.is_some(), "the same gateway process");
    let after = gateway.get("/metrics").await.text;
    ensure!(unavailable_count(&after) == 4.0, "no refusal after the restart:\n{after}");
    ensure!(
        auth_checks(&after, "accounts", &["operation=\"service_account\"", "outcome=\"accepted\""]) == 6.0,
        "accepted: warm before, warm twice from the cache, then cold, warm and cold (MCP) after: {after}"
    );

    let log = gateway.logs();
    ensure!(log.contains("token review failed"), "the failed review is logged");
    for secret in [warm.as_str(), cold.as_str(), CALLER_TOKEN, UPSTREAM_KEY, control_plane.admin_token()] {
        ensure!(!log.contains(secret), "a credential is in the gateway log");
    }
    ensure!(!log.contains(QUERY), "the query is in the log");
    eprintln!(
        "measured: API server down {:.1} s; a refusal for want of a review took {:.0} ms on average; the first review after \
         the restart answered {:.0} ms after the API server was ready again",
        outage.as_secs_f64(),
        refusal_took.as_secs_f64() * 1000.0,
        recovered.as_secs_f64() * 1000.0,
    );
    Ok(())
}
