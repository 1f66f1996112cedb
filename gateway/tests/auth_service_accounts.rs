//! ServiceAccount callers verified by the REAL API server (memgate-e2e's kube-apiserver + etcd):
//! the running binary reviews audience-bound tokens from TokenRequest through `--kubeconfig`.
//! (The test kubeconfig is the admin; in a cluster the gateway needs only `create` on
//! `tokenreviews`.)

mod serve_support;
mod support;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use memgate_e2e::ControlPlane;
use serde_json::json;
use serve_support::{Gateway, ProviderYaml, body_of, mem0_results, upstream_secret};
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

async fn token(client: &Client, namespace: &str, name: &str, audience: &str) -> Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: Some(vec![audience.to_string()]),
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued = accounts.create_token_request(name, &PostParams::default(), &request).await?;
    issued.status.and_then(|s| s.token).context("TokenRequest status.token")
}

#[tokio::test]
async fn service_account_tokens_are_reviewed_for_the_provider_audience() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-sa").await?;
    let client = control_plane.client()?;
    for name in ["robot", "intruder"] {
        create_service_account(&client, &namespace, name).await?;
    }
    let robot = token(&client, &namespace, "robot", AUDIENCE).await?;
    let robot_elsewhere = token(&client, &namespace, "robot", "another-audience").await?;
    let intruder = token(&client, &namespace, "intruder", AUDIENCE).await?;

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

    let status = |provider: &'static str, token: String| {
        let gateway = &gateway;
        let query = &query;
        async move { gateway.search(provider, query, Some(&token)).await.status }
    };
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
    let robot = token(&client, &namespace, "robot", AUDIENCE).await?;

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
