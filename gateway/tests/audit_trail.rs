//! The audit trail of the running binary (`--audit-log`), with callers verified by the REAL API
//! server (TokenReview of audience-bound tokens from TokenRequest): every Nexent search, Nexent
//! ingest and MCP `context_search` call gives exactly one event naming the verified caller and the
//! scope sent upstream; a planted query and planted content appear in no event; every event
//! validates against `gateway/schema/audit-event.schema.json` (Python `jsonschema`, from the MCP
//! SDK's venv the test command provides as `MEMGATE_MCP_PYTHON`). The OIDC caller is covered
//! against a real Ory Hydra in `gateway/tests/oauth/test_oidc_hydra.py`.

mod ingest_support;
mod serve_support;
mod support;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail, ensure};
use ingest_support::DevUpstream;
use memgate_e2e::ControlPlane;
use memgate_gateway::audit::DigestKey;
use serde_json::{Value, json};
use serve_support::{Gateway, audit_events as events, secret_yaml, service_account_token};

const AUDIENCE: &str = "memgate-audit";
const PLANTED_QUERY: &str = "planted query 6d1f where alice keeps her keys";
const PLANTED_CONTENT: &str = "planted content 91bd alice hides keys under the mat";
const DIGEST_KEY: &str = "audit-digest-key-0123456789abcdef";
const MCP_HEADERS: [(&str, &str); 2] =
    [("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-06-18")];

/// A mem0 OSS provider `memory` in namespace `agents`: search, ingest and MCP, ServiceAccounts of
/// `namespace` allowed, `user_id` bound to the caller.
fn provider_yaml(origin: &str, namespace: &str) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: memory, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", allowInsecureHttp: true}}\n  \
         credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  scope: {{agentId: qwen-code}}\n  \
         nexent: {{search: true, ingest: true}}\n  mcp: {{enabled: true}}\n  access: {{bindUserIdToSubject: true, \
         serviceAccounts: {{audience: {AUDIENCE}, allowed: [{{namespace: {namespace}, name: alice}}, \
         {{namespace: {namespace}, name: bob}}]}}}}\n"
    )
}

fn ingest_body(key: &str) -> Value {
    json!({"tenant_id": "tenant-x", "user_id": "ignored", "agent_id": "agent-x", "conversation_id": "conv-x",
           "idempotency_key": key, "metadata": {},
           "units": [{"event_id": "e1", "event_type": "message", "unit_type": "fact", "unit_content": PLANTED_CONTENT,
                      "unit_index": null, "metadata": {}}]})
}

fn context_search(query: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
           "params": {"name": "context_search", "arguments": {"query": query}}})
}

/// Validate every line of `path` against the repository's schema with Python's `jsonschema`.
fn validate_against_schema(path: &Path) -> Result<()> {
    let python = std::env::var("MEMGATE_MCP_PYTHON")
        .context("MEMGATE_MCP_PYTHON (a Python with jsonschema; scripts/test.sh provides it) is not set")?;
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/audit-event.schema.json");
    let script = "import json, sys\nfrom jsonschema import Draft202012Validator\n\
                  schema = json.load(open(sys.argv[1]))\nDraft202012Validator.check_schema(schema)\n\
                  validator = Draft202012Validator(schema)\nbad = 0\n\
                  for n, line in enumerate(open(sys.argv[2]), 1):\n    \
                  for error in validator.iter_errors(json.loads(line)):\n        \
                  bad += 1; print(f'line {n}: {error.json_path}: {error.message}')\n\
                  sys.exit(1 if bad else 0)\n";
    let output = std::process::Command::new(python).args(["-c", script]).arg(&schema).arg(path).output()?;
    if !output.status.success() {
        bail!(
            "audit events do not match the schema:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

#[tokio::test]
async fn every_call_has_one_event_naming_the_verified_caller_and_never_the_query_or_content() -> Result<()> {
    let control_plane = ControlPlane::shared().await?;
    let namespace = control_plane.new_namespace("gateway-audit").await?;
    let client = control_plane.client()?;
    let alice = service_account_token(&client, &namespace, "alice", AUDIENCE).await?;
    let bob = service_account_token(&client, &namespace, "bob", AUDIENCE).await?;
    let intruder = service_account_token(&client, &namespace, "intruder", AUDIENCE).await?;

    let upstream = DevUpstream::start().await;
    let config = tempfile::tempdir()?;
    let text = [secret_yaml("upstream", "api-key", &upstream.api_key), provider_yaml(&upstream.origin, &namespace)];
    std::fs::write(config.path().join("gateway.yaml"), text.join("---\n"))?;
    let private = tempfile::tempdir()?;
    let audit = private.path().join("audit.jsonl");
    let key_file = private.path().join("digest-key");
    std::fs::write(&key_file, format!("{DIGEST_KEY}\n"))?;
    let kubeconfig = control_plane.kubeconfig_path().display().to_string();
    let args = [
        "--kubeconfig",
        &kubeconfig,
        "--gateway-id",
        "agents/memgate",
        "--audit-log",
        audit.to_str().context("path")?,
        "--audit-query-digest-key-file",
        key_file.to_str().context("path")?,
    ];
    let gateway = Gateway::start(config.path(), private.path(), &args, &[]).await;

    for (name, token) in [("alice", &alice), ("bob", &bob)] {
        let search = gateway.search("memory", &json!({"query": PLANTED_QUERY}), Some(token)).await;
        ensure!(search.status == 200, "{name} search: {}", search.text);
        let key = format!("audit-key-{name}");
        let ingest = gateway.post("/nexent/v1/memory/ingest", &ingest_body(&key), Some(token)).await;
        ensure!(ingest.status == 200, "{name} ingest: {}", ingest.text);
        let mcp = gateway.post_with("/mcp/memory", &context_search(PLANTED_QUERY), Some(token), &MCP_HEADERS).await;
        ensure!(mcp.status == 200 && mcp.json()["result"]["isError"] == false, "{name} MCP: {}", mcp.text);
    }
    let denied = gateway.search("memory", &json!({"query": PLANTED_QUERY}), Some(&intruder)).await;
    ensure!(denied.status == 403, "{}", denied.text);
    let invalid = gateway.post_with("/mcp/memory", &context_search("   "), Some(&alice), &MCP_HEADERS).await;
    ensure!(invalid.json()["result"]["isError"] == true, "{}", invalid.text);

    let events = events(&audit, 8).await?;
    ensure!(events.len() == 8, "8 calls, {} events: {events:#?}", events.len());
    let text = std::fs::read_to_string(&audit)?;
    for planted in [PLANTED_QUERY, PLANTED_CONTENT, "alice keeps", "under the mat", &alice, &bob, &intruder, DIGEST_KEY]
    {
        ensure!(!text.contains(planted), "{planted:?} is in the audit log");
    }
    validate_against_schema(&audit)?;

    let mut seen: BTreeMap<(String, String, String), Value> = BTreeMap::new();
    for event in &events {
        let key = (event["caller"].to_string(), event["surface"].to_string(), event["operation"].to_string());
        if event["outcome"] == "ok" {
            ensure!(seen.insert(key, event.clone()).is_none(), "two events for one call: {event}");
        }
        ensure!(event["provider"] == "agents/memory" && event["gateway"] == "agents/memgate", "{event}");
    }
    let digest = DigestKey::new(DIGEST_KEY.as_bytes())?.digest(PLANTED_QUERY.as_bytes());
    for name in ["alice", "bob"] {
        let caller = format!("serviceaccount:{namespace}:{name}");
        let scope = json!({"userId": format!("system:serviceaccount:{namespace}:{name}"), "agentId": "qwen-code"});
        let event = |surface: &str, operation: &str| {
            seen.get(&(json!(caller).to_string(), json!(surface).to_string(), json!(operation).to_string()))
                .cloned()
                .with_context(|| format!("no ok event of {caller} {surface} {operation}"))
        };
        let search = event("nexent", "search")?;
        ensure!(search["scope"] == scope && search["callerKind"] == "serviceaccount", "{search}");
        ensure!(search["queryDigest"] == digest.as_str() && search["results"].is_u64(), "{search}");
        let mcp = event("mcp", "context_search")?;
        ensure!(mcp["scope"] == scope && mcp["queryDigest"] == digest.as_str(), "{mcp}");
        let ingest = event("nexent", "ingest")?;
        ensure!(ingest["scope"] == scope && ingest["idempotencyKey"] == format!("audit-key-{name}"), "{ingest}");
        ensure!(ingest["units"] == json!({"accepted": 1, "rejected": 0, "degraded": 0}), "{ingest}");
        ensure!(ingest.get("queryDigest").is_none(), "an ingest has no query: {ingest}");
    }
    let refused: Vec<&Value> = events.iter().filter(|e| e["outcome"] != "ok").collect();
    ensure!(refused.len() == 2, "{refused:#?}");
    ensure!(
        refused.iter().any(|e| e["outcome"] == "denied"
            && e["caller"] == "unverified"
            && e["errorCode"] == "forbidden"
            && e.get("scope").is_none()),
        "the intruder's call: {refused:#?}"
    );
    ensure!(
        refused.iter().any(|e| e["outcome"] == "error"
            && e["caller"] == format!("serviceaccount:{namespace}:alice")
            && e["surface"] == "mcp"
            && e["errorCode"] == "invalid_payload"),
        "the invalid MCP call: {refused:#?}"
    );
    let metrics = gateway.get("/metrics").await.text;
    ensure!(metrics.contains("memgate_gateway_audit_events_total 8"), "{metrics}");
    ensure!(metrics.contains("memgate_gateway_audit_events_dropped_total 0"), "{metrics}");
    Ok(())
}
