//! ServiceAccount callers verified by the REAL API server (memgate-e2e's kube-apiserver + etcd):
//! the running binary reviews audience-bound tokens from TokenRequest through `--kubeconfig`.
//! (The test kubeconfig is the admin; in a cluster the gateway needs only `create` on
//! `tokenreviews`.)

mod serve_support;
mod support;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use memgate_e2e::ControlPlane;
use serde_json::json;
use serve_support::{Gateway, ProviderYaml, body_of, mem0_results, service_account_token, upstream_secret};
use support::{Reply, Server};

const AUDIENCE: &str = "memgate-test";
const QUERY: &str = "service account probe 2b8d";

async fn create_service_account(client: &Client, namespace: &str, name: &str) -> Result<()> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let account = ServiceAccount {
        metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
        ..ServiceAccount::default()
    };
    accounts.create(&PostParams::default(), &account).await?;
    Ok(())
}

/// The HTTP status of one Nexent search at `provider` with `token`.
async fn status_of(gateway: &Gateway, provider: &str, query: &serde_json::Value, token: String) -> u16 {
    gateway.search(provider, query, Some(&token)).await.status
}

#[tokio::test]
async fn service_account_tokens_are_reviewed_for_the_provider_audience() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-sa").await?;
    let client = control_plane.client()?;
    for name in ["robot", "intruder"] {
        create_service_account(&client, &namespace, name).await?;
    }
    let robot = service_account_token(&client, &namespace, "robot", AUDIENCE).await?;
    let robot_elsewhere = service_account_token(&client, &namespace, "robot", "another-audience").await?;
    let intruder = service_account_token(&client, &namespace, "intruder", AUDIENCE).await?;

    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let dir = tempfile::tempdir()?;
    let one = ProviderYaml::new("one", &upstream.origin()).access(&format!(
        "{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}, name: robot}}]}}}}"
    ));
    let team = ProviderYaml::new("team", &upstream.origin())
        .access(&format!("{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}}}]}}}}"));
    let other_namespace = ProviderYaml::new("other-namespace", &upstream.origin())
        .access(&format!("{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: kube-system}}]}}}}"));
    let text = [upstream_secret(), one.yaml(), team.yaml(), other_namespace.yaml()].join("---\n");
    std::fs::write(dir.path().join("gateway.yaml"), text)?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let gateway = Gateway::start(dir.path(), dir.path(), &["--kubeconfig", &kubeconfig], &[]).await;
    let query = json!({"query": QUERY});

    let status = |provider: &'static str, token: String| status_of(&gateway, provider, &query, token);
    ensure!(status("one", robot.clone()).await == 200, "allowed ServiceAccount, right audience");
    ensure!(status("one", robot.clone()).await == 200, "again, from the cache");
    ensure!(status("one", robot_elsewhere.clone()).await == 401, "token of another audience");
    ensure!(status("one", intruder.clone()).await == 403, "ServiceAccount not in allowed");
    ensure!(status("team", intruder.clone()).await == 200, "whole namespace allowed");
    ensure!(status("other-namespace", robot.clone()).await == 403, "another namespace");
    ensure!(status("one", "eyJh.eyJi.c2ln".to_string()).await == 401, "made-up token");
    ensure!(upstream.requests().len() == 3, "only allowed calls reach the upstream");

    let forbidden = gateway.search("one", &query, Some(&intruder)).await;
    ensure!(
        forbidden.json()
            == json!({"code": "forbidden", "severity": "non_retryable", "message": "Access denied.", "retry_after_seconds": null}),
        "fixed 403 body: {}",
        forbidden.text
    );
    let logs = gateway.logs();
    for secret in [&robot, &robot_elsewhere, &intruder] {
        ensure!(!logs.contains(secret.as_str()), "a token is in the logs");
    }
    ensure!(!logs.contains(QUERY), "the query is in the logs");
    Ok(())
}

#[tokio::test]
async fn bound_user_id_is_the_service_account_subject() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-bind").await?;
    let client = control_plane.client()?;
    create_service_account(&client, &namespace, "robot").await?;
    let robot = service_account_token(&client, &namespace, "robot", AUDIENCE).await?;

    let upstream = Server::always(Reply::json(&mem0_results(2))).await;
    let dir = tempfile::tempdir()?;
    let mut bound = ProviderYaml::new("bound", &upstream.origin()).access(&format!(
        "{{serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}}}]}}, bindUserIdToSubject: true}}"
    ));
    bound.scope = "{agentId: qwen-code}".to_string();
    std::fs::write(dir.path().join("gateway.yaml"), [upstream_secret(), bound.yaml()].join("---\n"))?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let gateway = Gateway::start(dir.path(), dir.path(), &["--kubeconfig", &kubeconfig], &[]).await;

    let answer = gateway.search("bound", &json!({"query": QUERY, "user_id": "spoofed"}), Some(&robot)).await;
    ensure!(answer.status == 200, "{}", answer.text);
    let sent = body_of(upstream.requests().first().context("upstream called")?);
    let subject = format!("system:serviceaccount:{namespace}:robot");
    ensure!(sent["filters"] == json!({"user_id": subject, "agent_id": "qwen-code"}), "{sent}");

    // The MCP surface binds the same subject.
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "context_search", "arguments": {"query": QUERY}}
    });
    let headers = [("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-06-18")];
    let mcp = gateway.post_with("/mcp/bound", &call, Some(&robot), &headers).await;
    ensure!(mcp.status == 200 && mcp.json()["result"]["isError"] == false, "{}", mcp.text);
    let sent = body_of(upstream.requests().get(1).context("upstream called from MCP")?);
    ensure!(sent["filters"] == json!({"user_id": subject, "agent_id": "qwen-code"}), "{sent}");
    let anonymous = gateway.post_with("/mcp/bound", &call, None, &headers).await;
    ensure!(anonymous.status == 401, "{}", anonymous.text);
    Ok(())
}

/// `verification: jwks`: tokens are checked by signature against the API server's own OIDC
/// discovery (`/.well-known/openid-configuration`, `/openid/v1/jwks`), not reviewed per token. The
/// documented cost shows: the token of a deleted ServiceAccount is still accepted until it expires,
/// where the TokenReview provider refuses it.
#[tokio::test]
async fn service_account_tokens_are_verified_offline_against_the_cluster_keys() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-jwks").await?;
    let client = control_plane.client()?;
    for name in ["robot", "intruder", "ephemeral"] {
        create_service_account(&client, &namespace, name).await?;
    }
    let robot = service_account_token(&client, &namespace, "robot", AUDIENCE).await?;
    let robot_elsewhere = service_account_token(&client, &namespace, "robot", "another-audience").await?;
    let intruder = service_account_token(&client, &namespace, "intruder", AUDIENCE).await?;
    let ephemeral = service_account_token(&client, &namespace, "ephemeral", AUDIENCE).await?;

    let upstream = Server::always(Reply::json(&mem0_results(1))).await;
    let dir = tempfile::tempdir()?;
    let allowed = format!("[{{namespace: {namespace}, name: robot}}, {{namespace: {namespace}, name: ephemeral}}]");
    let offline = ProviderYaml::new("offline", &upstream.origin())
        .access(&format!("{{serviceAccounts: {{audience: {AUDIENCE}, verification: jwks, allowed: {allowed}}}}}"));
    let reviewed = ProviderYaml::new("reviewed", &upstream.origin())
        .access(&format!("{{serviceAccounts: {{audience: {AUDIENCE}, allowed: {allowed}}}}}"));
    std::fs::write(
        dir.path().join("gateway.yaml"),
        [upstream_secret(), offline.yaml(), reviewed.yaml()].join("---\n"),
    )?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let gateway = Gateway::start(dir.path(), dir.path(), &["--kubeconfig", &kubeconfig], &[]).await;
    let query = json!({"query": QUERY});
    let status = |provider: &'static str, token: String| status_of(&gateway, provider, &query, token);

    ensure!(status("offline", robot.clone()).await == 200, "allowed ServiceAccount, right audience");
    ensure!(status("offline", robot_elsewhere.clone()).await == 401, "token of another audience");
    ensure!(status("offline", intruder.clone()).await == 403, "ServiceAccount not in allowed");
    // One signature character changed (well inside, so no padding bits are involved).
    let at = robot.len() - 10;
    let replacement = if &robot[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{replacement}{}", &robot[..at], &robot[at + 1..]);
    ensure!(status("offline", forged).await == 401, "a changed signature");

    ensure!(status("offline", ephemeral.clone()).await == 200, "before deletion");
    ensure!(status("reviewed", ephemeral.clone()).await == 200, "before deletion, reviewed");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    accounts.delete("ephemeral", &Default::default()).await?;
    // The API server notices the deletion through its informers: wait (generous ceiling) until its
    // own TokenReview refuses the token, then ask a fresh gateway (review verdicts are cached 30 s).
    let reviews: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec { token: ephemeral.clone(), audiences: Some(vec![AUDIENCE.to_string()]) },
        ..TokenReview::default()
    };
    let mut refused = false;
    for _ in 0..120 {
        let answer = reviews.create(&PostParams::default(), &review).await?;
        if answer.status.and_then(|s| s.authenticated) != Some(true) {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    ensure!(refused, "the API server kept accepting the deleted ServiceAccount's token");
    drop(gateway);
    let gateway = Gateway::start(dir.path(), dir.path(), &["--kubeconfig", &kubeconfig], &[]).await;
    let after = |provider: &'static str| status_of(&gateway, provider, &query, ephemeral.clone());
    ensure!(after("reviewed").await == 401, "TokenReview refuses the deleted ServiceAccount's token");
    ensure!(after("offline").await == 200, "offline verification cannot see the deletion (documented)");
    let metrics = gateway.get("/metrics").await.text;
    ensure!(
        metrics.contains("provider=\"offline\",operation=\"service_account\",outcome=\"accepted\""),
        "auth checks counted: {metrics}"
    );
    ensure!(!metrics.contains(&namespace), "a subject reached the metrics");

    // What a gateway pod needs for this: the API server's default binding lets every
    // ServiceAccount read the issuer discovery and keys (no Role of memgate's own).
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let discovery = bindings.get("system:service-account-issuer-discovery").await?;
    ensure!(
        discovery.role_ref.name == "system:service-account-issuer-discovery"
            && discovery
                .subjects
                .unwrap_or_default()
                .iter()
                .any(|s| s.kind == "Group" && s.name == "system:serviceaccounts"),
        "the default issuer-discovery binding covers every ServiceAccount"
    );
    Ok(())
}
