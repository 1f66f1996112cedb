//! The real `memgate-operator run` process across an API server outage: kube-apiserver of a dedicated
//! control plane is killed for [`OUTAGE`] and started again on the same address (etcd keeps running). The
//! operator process stays up the whole time (no exit, no restart), `/healthz` and `/readyz` keep answering, and
//! once the API server is back its watches and its leader Lease recover on their own: a change made just before
//! the stop and changes made after the restart (a provider in a new namespace, a scope edit, a deleted provider)
//! are all reconciled.

mod support;

use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, ensure};
use serde_json::{Value, json};
use support::*;

/// How long the API server stays down.
const OUTAGE: Duration = Duration::from_secs(15);

/// The Lease identity of the operator under test.
const IDENTITY: &str = "outage-operator";

async fn gateway_config(client: &kube::Client, namespace: &str) -> Option<String> {
    let object = get(client, "ConfigMap", Some(namespace), "memgate-gateway").await.ok()??;
    object.data.pointer("/data/gateway.yaml").and_then(Value::as_str).map(String::from)
}

/// Whether the gateway ConfigMap, Deployment, Service and ServiceAccount of `namespace` are all gone.
async fn gateway_objects_gone(client: &kube::Client, namespace: &str) -> Option<()> {
    for kind in ["ConfigMap", "Deployment", "Service", "ServiceAccount"] {
        if get(client, kind, Some(namespace), "memgate-gateway").await.ok()?.is_some() {
            return None;
        }
    }
    Some(())
}

/// The bearer token of the operator's kubeconfig (to prove it is in no log).
fn operator_token(running: &Running) -> Result<String> {
    let text = std::fs::read_to_string(running.dir.path().join("operator.kubeconfig"))?;
    let line = text.lines().find_map(|l| l.trim().strip_prefix("token: ")).context("a token in the kubeconfig")?;
    Ok(line.trim().to_string())
}

/// What the operator showed while the API server was down.
struct Observed {
    probes: usize,
    readyz: Vec<String>,
}

/// Polls the operator for [`OUTAGE`]: it must keep running and `/healthz` must answer `ok` every time.
async fn watch_through_outage(operator: &mut Operator) -> Result<Observed> {
    let started = Instant::now();
    let mut observed = Observed { probes: 0, readyz: Vec::new() };
    while started.elapsed() < OUTAGE {
        ensure!(operator.running(), "the operator exited during the outage:\n{}", operator.log_text());
        let healthz = operator.get("/healthz").await.context("/healthz during the outage")?;
        ensure!(healthz == "ok\n", "/healthz during the outage: {healthz:?}");
        let readyz = operator.get("/readyz").await.context("/readyz during the outage")?;
        if !observed.readyz.contains(&readyz) {
            observed.readyz.push(readyz);
        }
        observed.probes += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(observed)
}

#[tokio::test]
async fn the_operator_rides_out_an_api_server_outage_and_converges_after_the_restart() -> Result<()> {
    let (cp, admin) = dedicated_control_plane().await?;
    let home = cp.new_namespace("op-outage").await?;
    let a = cp.new_namespace("outage-a").await?;
    let b = cp.new_namespace("outage-b").await?;
    // Cluster-wide, so that a namespace made after the restart is watched without a new flag.
    let mut running = start_operator(&cp, &admin, &home, &[], &["--identity", IDENTITY]).await?;
    for ns in [&a, &b] {
        apply(&admin, secret(ns, "mem0-api", &[("api-key", "outage-key")])).await?;
    }
    apply(&admin, provider(&a, "alpha", "mem0-api", json!({}))).await?;
    apply(&admin, provider(&a, "beta", "mem0-api", json!({}))).await?;
    apply(&admin, provider(&b, "gamma", "mem0-api", json!({}))).await?;
    for (ns, name) in [(&a, "alpha"), (&a, "beta"), (&b, "gamma")] {
        wait_condition(&admin, ns, name, "ResolvedRefs", "True", "ResolvedRefs").await?;
    }
    for (ns, names) in [(&a, &["alpha", "beta"][..]), (&b, &["gamma"][..])] {
        eventually("the gateway Deployment", || async {
            get(&admin, "Deployment", Some(ns), "memgate-gateway").await.ok()?
        })
        .await?;
        simulate_rollout(&admin, ns).await?;
        for name in names {
            wait_condition(&admin, ns, name, "Ready", "True", "Ready").await?;
        }
    }
    let (holder, _) = lease(&admin, &home, "memgate-operator").await?.context("the leader Lease")?;
    ensure!(holder.as_deref() == Some(IDENTITY), "the operator holds the Lease: {holder:?}");
    let metrics_before = running.operator.get("/metrics").await?;

    // A change the API server stores just before it goes down.
    edit(&admin, "MemoryProvider", Some(&a), "alpha", json!({"spec": {"scope": {"userId": "before-stop-user"}}}))
        .await?;
    let seen_before_stop = gateway_config(&admin, &a).await.is_some_and(|t| t.contains("before-stop-user"));
    let stopped = Instant::now();
    cp.stop_apiserver().await?;
    let observed = watch_through_outage(&mut running.operator).await?;
    cp.start_apiserver().await?;
    let outage = stopped.elapsed();
    let (restarted, restarted_wall) = (Instant::now(), SystemTime::now());

    // The operator process was never replaced: the same child kept running.
    ensure!(running.operator.running(), "the operator exited:\n{}", running.operator.log_text());
    ensure!(observed.readyz == ["ok\n"], "/readyz during the outage: {:?}", observed.readyz);

    // Changes after the restart: a provider in a namespace that did not exist, a scope edit, a deletion.
    let c = cp.new_namespace("outage-c").await?;
    apply(&admin, secret(&c, "mem0-api", &[("api-key", "outage-key")])).await?;
    apply(&admin, provider(&c, "delta", "mem0-api", json!({}))).await?;
    edit(&admin, "MemoryProvider", Some(&a), "beta", json!({"spec": {"scope": {"userId": "after-restart-user"}}}))
        .await?;
    delete(&admin, "MemoryProvider", Some(&b), "gamma").await?;

    eventually("the config of outage-a to carry both scope edits", || async {
        let text = gateway_config(&admin, &a).await?;
        (text.contains("before-stop-user") && text.contains("after-restart-user")).then_some(())
    })
    .await?;
    eventually("delta to be served", || async {
        gateway_config(&admin, &c).await?.contains("name: delta").then_some(())
    })
    .await?;
    eventually("the gateway objects of outage-b to be deleted", || gateway_objects_gone(&admin, &b)).await?;
    let converged = restarted.elapsed();

    // Conditions follow: ResolvedRefs at once, Ready after the (simulated) rollout of the new templates.
    wait_condition(&admin, &c, "delta", "ResolvedRefs", "True", "ResolvedRefs").await?;
    for (ns, names) in [(&a, &["alpha", "beta"][..]), (&c, &["delta"][..])] {
        eventually("the gateway Deployment", || async {
            get(&admin, "Deployment", Some(ns), "memgate-gateway").await.ok()?
        })
        .await?;
        simulate_rollout(&admin, ns).await?;
        for name in names {
            wait_condition(&admin, ns, name, "Ready", "True", "Ready").await?;
        }
    }
    ensure!(get(&admin, "MemoryProvider", Some(&b), "gamma").await?.is_none(), "gamma is gone");

    // The Lease: still held by the same identity, renewed after the restart; no leadership was lost.
    let renewed = eventually("the Lease to be renewed after the restart", || async {
        let (holder, renew) = lease(&admin, &home, "memgate-operator").await.ok()??;
        (holder.as_deref() == Some(IDENTITY) && renew? > restarted_wall).then(|| restarted.elapsed())
    })
    .await?;
    let metrics = running.operator.get("/metrics").await?;
    ensure!(metric_value(&metrics, "memgate_operator_leader") == 1.0, "still leading");
    let watch_errors = |text: &str| metric_sum(text, "memgate_operator_watch_errors_total");
    ensure!(watch_errors(&metrics) > watch_errors(&metrics_before), "the watches saw the outage");
    let log = running.operator.log_text();
    ensure!(!log.contains("lost the leader Lease") && !log.contains("memgate-operator stopped"), "{log}");
    ensure!(running.operator.running(), "the operator still runs");
    ensure!(!log.contains(&operator_token(&running)?), "the operator's token is in its log");

    eprintln!(
        "measured: API server down {:.1} s (stop to ready again), {} health probes answered while down; \
         converged {:.1} s after the restart; Lease renewed {:.1} s after the restart; the change made just \
         before the stop was {} in the config when the API server stopped; watch errors counted: {}",
        outage.as_secs_f64(),
        observed.probes,
        converged.as_secs_f64(),
        renewed.as_secs_f64(),
        if seen_before_stop { "already" } else { "not yet" },
        watch_errors(&metrics) - watch_errors(&metrics_before),
    );
    running.operator.kill().await?;
    Ok(())
}

/// Whether `operator` runs and reports holding the Lease.
async fn leading(operator: &mut Operator) -> bool {
    if !operator.running() {
        return false;
    }
    operator.get("/metrics").await.is_ok_and(|text| metric_value(&text, "memgate_operator_leader") == 1.0)
}

/// With a standby beside the leader, the election settles again after the outage: one running process leads
/// (the Lease names it) and reconciles; a process that lost the Lease exited as designed (a kubelet restarts it
/// as a standby) rather than keep reconciling. How long both reported leading at once is measured.
#[tokio::test]
async fn leader_and_standby_settle_on_one_leader_after_an_api_server_outage() -> Result<()> {
    let (cp, admin) = dedicated_control_plane().await?;
    let home = cp.new_namespace("op-outage-pair").await?;
    let ns = cp.new_namespace("outage-pair").await?;
    let first = start_operator(&cp, &admin, &home, &[&ns], &["--identity", "first"]).await?;
    let second = start_operator(&cp, &admin, &home, &[&ns], &["--identity", "second"]).await?;
    let mut operators = [first, second];
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "pair-key")])).await?;
    apply(&admin, provider(&ns, "before", "mem0-api", json!({}))).await?;
    wait_condition(&admin, &ns, "before", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let elected = Instant::now();
    let leader_before = loop {
        let (a, b) = (leading(&mut operators[0].operator).await, leading(&mut operators[1].operator).await);
        if a != b {
            break if a { "first" } else { "second" };
        }
        ensure!(elected.elapsed() < PATIENCE, "no single leader before the outage");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    cp.stop_apiserver().await?;
    tokio::time::sleep(OUTAGE).await;
    for running in &mut operators {
        ensure!(running.operator.running(), "an operator exited during the outage:\n{}", running.operator.log_text());
    }
    cp.start_apiserver().await?;
    let restarted = Instant::now();
    apply(&admin, provider(&ns, "after", "mem0-api", json!({}))).await?;

    // Sample until one running leader is named by the Lease and has reconciled the change made after the restart.
    let (mut overlap, mut both_since): (Duration, Option<Instant>) = (Duration::ZERO, None);
    let leader_after = loop {
        ensure!(restarted.elapsed() < PATIENCE, "no single leader reconciled within {PATIENCE:?}");
        let (a, b) = (leading(&mut operators[0].operator).await, leading(&mut operators[1].operator).await);
        match (a && b, both_since) {
            (true, None) => both_since = Some(Instant::now()),
            (false, Some(since)) => (overlap, both_since) = (overlap + since.elapsed(), None),
            _ => {}
        }
        let holder = lease(&admin, &home, "memgate-operator").await.ok().flatten().and_then(|(h, _)| h);
        let reconciled = get(&admin, "MemoryProvider", Some(&ns), "after")
            .await
            .ok()
            .flatten()
            .and_then(|p| condition(&p, "ResolvedRefs"))
            .is_some_and(|c| c.0 == "True");
        let single = match (a, b) {
            (true, false) => Some("first"),
            (false, true) => Some("second"),
            _ => None,
        };
        if let Some(name) = single.filter(|name| reconciled && holder.as_deref() == Some(*name)) {
            break name;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let settled = restarted.elapsed();

    // Whoever does not lead now either stands by or exited because it lost the Lease, nothing else.
    for (index, name) in ["first", "second"].into_iter().enumerate() {
        let operator = &mut operators[index].operator;
        let log = operator.log_text();
        if name != leader_after && !operator.running() {
            ensure!(log.contains("lost the leader Lease"), "{name} exited for another reason:\n{log}");
        }
        if name == leader_after {
            ensure!(operator.running(), "the leader runs");
        }
    }
    eprintln!(
        "measured: leader {leader_before} before a {:.0} s outage, {leader_after} after; one leader with the \
         change reconciled {:.1} s after the restart; both reported leading at once for {:.1} s",
        OUTAGE.as_secs_f64(),
        settled.as_secs_f64(),
        overlap.as_secs_f64(),
    );
    for running in &mut operators {
        if running.operator.running() {
            running.operator.kill().await?;
        }
    }
    Ok(())
}
