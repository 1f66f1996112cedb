//! The operator's reconcile spans, exported over OTLP to a real Jaeger (see
//! `e2e/trace-backend/harness.rs`) by the real `memgate-operator run` process working against the
//! real kube-apiserver + etcd as its documented ServiceAccount.

mod support;
#[path = "../../e2e/trace-backend/harness.rs"]
mod trace_backend;

use std::collections::BTreeSet;

use anyhow::{Result, ensure};
use serde_json::{Value, json};
use support::{apply, control_plane, eventually, provider, secret, start_operator_with_env, wait_condition};
use trace_backend::Jaeger;

/// Planted where a spec or Secret holds private data: none may reach a span.
const SECRET_VALUE: &str = "SECRETVALUEMARKER-73c1e9";
const SCOPE_USER: &str = "scopeusermarker-a40d2f";
const ORIGIN_HOST: &str = "originmarker-5be0c7.memory.svc";
const SECRET_NAME: &str = "secretnamemarker-19d6";

/// The attribute keys a reconcile span may carry: its declared fields, and what the SDK and Jaeger
/// add (`span.kind`; `otel.status_code` and `error` for failures; the instrumentation scope).
const ALLOWED_TAGS: [&str; 8] = [
    "memgate.reconcile.kind",
    "memgate.reconcile.key",
    "memgate.reconcile.outcome",
    "memgate.reconcile.stage",
    "span.kind",
    "otel.status_code",
    "error",
    "otel.scope.name",
];

fn tag<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["tags"].as_array()?.iter().find(|t| t["key"] == key)?["value"].as_str()
}

#[tokio::test]
async fn reconciles_are_exported_as_spans_with_only_kind_key_and_outcome() -> Result<()> {
    let (cp, admin) = control_plane().await?;
    let home = cp.new_namespace("op-traces").await?;
    let team = cp.new_namespace("traces").await?;
    let work = tempfile::tempdir()?;
    let jaeger = Jaeger::start(work.path()).await;
    let endpoint = format!("http://127.0.0.1:{}", jaeger.otlp_http);
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_BSP_SCHEDULE_DELAY", "200")];
    let _running = start_operator_with_env(cp, &admin, &home, &[], &[], &env).await?;

    apply(&admin, secret(&team, SECRET_NAME, &[("api-key", SECRET_VALUE)])).await?;
    let extra = json!({
        "endpoint": {"origin": format!("http://{ORIGIN_HOST}:8888"), "allowInsecureHttp": true},
        "scope": {"userId": SCOPE_USER, "agentId": "qwen-code"},
    });
    apply(&admin, provider(&team, "traced", SECRET_NAME, extra)).await?;
    wait_condition(&admin, &team, "traced", "Ready", "False", "GatewayProgressing").await?;

    let query = "/api/traces?service=memgate-operator&operation=reconcile&limit=500&lookback=1h";
    let spans = eventually("a successful reconcile span of the team namespace in Jaeger", || async {
        let found = jaeger.get(query).await;
        let spans: Vec<Value> = found["data"]
            .as_array()?
            .iter()
            .flat_map(|trace| trace["spans"].as_array().cloned().unwrap_or_default())
            .collect();
        spans
            .iter()
            .any(|s| {
                tag(s, "memgate.reconcile.key") == Some(team.as_str())
                    && tag(s, "memgate.reconcile.kind") == Some("namespace")
                    && tag(s, "memgate.reconcile.outcome") == Some("ok")
            })
            .then_some(spans)
    })
    .await?;

    for span in &spans {
        ensure!(span["operationName"] == "reconcile", "only reconcile spans are exported: {span}");
        let keys: BTreeSet<&str> =
            span["tags"].as_array().into_iter().flatten().filter_map(|t| t["key"].as_str()).collect();
        let unexpected: Vec<&&str> = keys.iter().filter(|k| !ALLOWED_TAGS.contains(k)).collect();
        ensure!(unexpected.is_empty(), "unexpected span attributes {unexpected:?} in {span}");
    }
    let everything = format!("{}{}", jaeger.get(query).await, jaeger.get("/api/services").await);
    for marker in [SECRET_VALUE, SCOPE_USER, ORIGIN_HOST, SECRET_NAME] {
        ensure!(!everything.contains(marker), "{marker} reached the trace backend");
    }
    Ok(())
}
