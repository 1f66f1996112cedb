//! The real `memgate-operator run` process across an API server outage: kube-apiserver of a dedicated
//! control plane is killed for [`OUTAGE`] and started again on the same address (etcd keeps running). The
//! operator process stays up the whole time (no exit, no restart), `/healthz` and `/readyz` keep answering, and
//! once the API server is back its watches and its leader Lease recover on their own: a change made just before
//! the stop and changes made after the restart (a provider in a new namespace, a scope edit, a deleted provider)
//! are all reconciled.
//!
//! The leader stands down (`memgate_operator_leader` 0, no reconcile) once its Lease could have expired during
//! the outage and leads again once the Lease is renewed; with a standby beside it, at no sampled moment do both
//! report leading.

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

/// For each namespace: wait for its gateway Deployment, simulate its rollout, and wait until each
/// named provider is Ready.
async fn roll_out(admin: &kube::Client, namespaces: &[(&str, &[&str])]) -> Result<()> {
    for (ns, names) in namespaces {
        eventually("the gateway Deployment", || async {
            get(admin, "Deployment", Some(ns), "memgate-gateway").await.ok()?
        })
        .await?;
        simulate_rollout(admin, ns).await?;
        for name in *names {
            wait_condition(admin, ns, name, "Ready", "True", "Ready").await?;
        }
    }
    Ok(())
}

/// The bearer token of the operator's kubeconfig (to prove it is in no log).
fn operator_token(running: &Running) -> Result<String> {
    let text = std::fs::read_to_string(running.dir.path().join("operator.kubeconfig"))?;
    let line = text.lines().find_map(|l| l.trim().strip_prefix("token: ")).context("a token in the kubeconfig")?;
    Ok(line.trim().to_string())
}

/// The log line of a leader standing down, and of one leading again (operator/src/leader.rs).
const STAND_DOWN: &str = "standing down: the leader Lease is not confirmed renewed";
const LEAD_AGAIN: &str = "the leader Lease is renewed; reconciling again";

/// What the operator showed while the API server was down.
struct Observed {
    probes: usize,
    readyz: Vec<String>,
    /// When `memgate_operator_leader` first read 0, after the stop.
    stood_down: Option<Duration>,
}

/// Polls the operator for [`OUTAGE`] from `stopped`: it must keep running and `/healthz` must answer `ok`
/// every time; notes when it stops reporting leading.
async fn watch_through_outage(operator: &mut Operator, stopped: Instant) -> Result<Observed> {
    let mut observed = Observed { probes: 0, readyz: Vec::new(), stood_down: None };
    while stopped.elapsed() < OUTAGE {
        ensure!(operator.running(), "the operator exited during the outage:\n{}", operator.log_text());
        let healthz = operator.get("/healthz").await.context("/healthz during the outage")?;
        ensure!(healthz == "ok\n", "/healthz during the outage: {healthz:?}");
        let readyz = operator.get("/readyz").await.context("/readyz during the outage")?;
        if !observed.readyz.contains(&readyz) {
            observed.readyz.push(readyz);
        }
        let metrics = operator.get("/metrics").await.context("/metrics during the outage")?;
        if observed.stood_down.is_none() && metric_value(&metrics, "memgate_operator_leader") == 0.0 {
            observed.stood_down = Some(stopped.elapsed());
        }
        observed.probes += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
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
    roll_out(&admin, &[(&a, &["alpha", "beta"]), (&b, &["gamma"])]).await?;
    let (holder, _) = lease(&admin, &home, "memgate-operator").await?.context("the leader Lease")?;
    ensure!(holder.as_deref() == Some(IDENTITY), "the operator holds the Lease: {holder:?}");
    let metrics_before = running.operator.get("/metrics").await?;

    // A change the API server stores just before it goes down.
    edit(&admin, "MemoryProvider", Some(&a), "alpha", json!({"spec": {"scope": {"userId": "before-stop-user"}}}))
        .await?;
    let seen_before_stop = gateway_config(&admin, &a).await.is_some_and(|t| t.contains("before-stop-user"));
    let stopped = Instant::now();
    cp.stop_apiserver().await?;
    let observed = watch_through_outage(&mut running.operator, stopped).await?;
    cp.start_apiserver().await?;
    let outage = stopped.elapsed();
    let (restarted, restarted_wall) = (Instant::now(), SystemTime::now());

    // The operator process was never replaced: the same child kept running.
    ensure!(running.operator.running(), "the operator exited:\n{}", running.operator.log_text());
    ensure!(observed.readyz == ["ok\n"], "/readyz during the outage: {:?}", observed.readyz);
    // Its Lease (4 s in these tests) could expire during the outage: it stood down.
    let stood_down = observed.stood_down.context("the leader never stood down during the outage")?;

    // Changes after the restart: a provider in a namespace that did not exist, a scope edit, a deletion.
    let c = cp.new_namespace("outage-c").await?;
    apply(&admin, secret(&c, "mem0-api", &[("api-key", "outage-key")])).await?;
    apply(&admin, provider(&c, "delta", "mem0-api", json!({}))).await?;
    edit(&admin, "MemoryProvider", Some(&a), "beta", json!({"spec": {"scope": {"userId": "after-restart-user"}}}))
        .await?;
    delete(&admin, "MemoryProvider", Some(&b), "gamma").await?;
    // Sampled after those changes (made while it may still stand down).
    let resumed = eventually("the operator to lead again", || async {
        let metrics = running.operator.get("/metrics").await.ok()?;
        (metric_value(&metrics, "memgate_operator_leader") == 1.0).then(|| restarted.elapsed())
    })
    .await?;

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
    roll_out(&admin, &[(&a, &["alpha", "beta"]), (&c, &["delta"])]).await?;
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
    let (downs, agains) = (log.matches(STAND_DOWN).count(), log.matches(LEAD_AGAIN).count());
    ensure!(downs == 1 && agains == 1, "stood down {downs} times, led again {agains} times:\n{log}");
    ensure!(running.operator.running(), "the operator still runs");
    ensure!(!log.contains(&operator_token(&running)?), "the operator's token is in its log");

    eprintln!(
        "measured: API server down {:.1} s (stop to ready again), {} health probes answered while down; \
         stood down {:.1} s after the stop, leading again {:.1} s after the restart (sampled after 3 changes); \
         converged {:.1} s after the restart; Lease renewed {:.1} s after the restart; the change made just \
         before the stop was {} in the config when the API server stopped; watch errors counted: {}",
        outage.as_secs_f64(),
        observed.probes,
        stood_down.as_secs_f64(),
        resumed.as_secs_f64(),
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

/// Whether each of `operators` runs and reports holding the Lease, read one after the other.
async fn sample(operators: &mut [Running; 2]) -> [bool; 2] {
    [leading(&mut operators[0].operator).await, leading(&mut operators[1].operator).await]
}

/// The one leading in `sample`, if exactly one does.
fn single(sample: [bool; 2]) -> Option<usize> {
    match sample {
        [true, false] => Some(0),
        [false, true] => Some(1),
        _ => None,
    }
}

/// How long the election is watched after it settled, for a late second leader.
const SETTLED_WATCH: Duration = Duration::from_secs(5);

/// With a standby beside the leader, the leader stands down during the outage (its Lease could expire) and the
/// election settles again after it: at no sampled moment do both processes report leading; one running process
/// leads (the Lease names it) and reconciles a change made after the restart; a process that lost the Lease
/// exited as designed (a kubelet restarts it as a standby), nothing else.
#[tokio::test]
async fn leader_and_standby_settle_on_one_leader_after_an_api_server_outage() -> Result<()> {
    let (cp, admin) = dedicated_control_plane().await?;
    let home = cp.new_namespace("op-outage-pair").await?;
    let ns = cp.new_namespace("outage-pair").await?;
    let names = ["first", "second"];
    let first = start_operator(&cp, &admin, &home, &[&ns], &["--identity", names[0]]).await?;
    let second = start_operator(&cp, &admin, &home, &[&ns], &["--identity", names[1]]).await?;
    let mut operators = [first, second];
    apply(&admin, secret(&ns, "mem0-api", &[("api-key", "pair-key")])).await?;
    apply(&admin, provider(&ns, "before", "mem0-api", json!({}))).await?;
    wait_condition(&admin, &ns, "before", "ResolvedRefs", "True", "ResolvedRefs").await?;
    let elected = Instant::now();
    let before = loop {
        if let Some(index) = single(sample(&mut operators).await) {
            break index;
        }
        ensure!(elected.elapsed() < PATIENCE, "no single leader before the outage");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };

    // The outage: the leader stands down on its own before its Lease could expire; the standby cannot lead.
    let stopped = Instant::now();
    cp.stop_apiserver().await?;
    let mut stood_down = None;
    while stopped.elapsed() < OUTAGE {
        let now = sample(&mut operators).await;
        ensure!(!now[1 - before], "the standby {} reported leading during the outage", names[1 - before]);
        if !now[before] && stood_down.is_none() {
            stood_down = Some(stopped.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for running in &mut operators {
        ensure!(running.operator.running(), "an operator exited during the outage:\n{}", running.operator.log_text());
    }
    let stood_down = stood_down.context("the leader never stood down during the outage")?;
    cp.start_apiserver().await?;
    let restarted = Instant::now();
    apply(&admin, provider(&ns, "after", "mem0-api", json!({}))).await?;

    // Sample until one running leader is named by the Lease and has reconciled the change made after the
    // restart, then a while longer; never may both report leading.
    let (mut samples, mut resumed, mut settled) = (0_usize, None, None);
    let after = loop {
        ensure!(restarted.elapsed() < PATIENCE, "no single leader reconciled within {PATIENCE:?}");
        let now = sample(&mut operators).await;
        samples += 1;
        ensure!(
            !(now[0] && now[1]),
            "both reported leading {:.1} s after the restart",
            restarted.elapsed().as_secs_f64()
        );
        let leader = single(now);
        if leader.is_some() && resumed.is_none() {
            resumed = Some(restarted.elapsed());
        }
        match settled {
            Some((index, at)) => {
                ensure!(leader == Some(index), "{} stopped leading after the election settled", names[index]);
                if restarted.elapsed() > at + SETTLED_WATCH {
                    break index;
                }
            }
            None => {
                let holder = lease(&admin, &home, "memgate-operator").await.ok().flatten().and_then(|(h, _)| h);
                let reconciled = get(&admin, "MemoryProvider", Some(&ns), "after")
                    .await
                    .ok()
                    .flatten()
                    .and_then(|p| condition(&p, "ResolvedRefs"))
                    .is_some_and(|c| c.0 == "True");
                if let Some(index) = leader.filter(|i| reconciled && holder.as_deref() == Some(names[*i])) {
                    settled = Some((index, restarted.elapsed()));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (resumed, settled) = (resumed.unwrap_or_default(), settled.map(|(_, at)| at).unwrap_or_default());

    // Whoever does not lead now either stands by or exited because it lost the Lease, nothing else.
    let mut fate = "stands by";
    for (index, name) in names.into_iter().enumerate() {
        let operator = &mut operators[index].operator;
        let log = operator.log_text();
        if index == after {
            ensure!(operator.running(), "the leader runs");
        } else if !operator.running() {
            ensure!(log.contains("lost the leader Lease"), "{name} exited for another reason:\n{log}");
            fate = "exited for the lost Lease";
        }
    }
    let log = operators[before].operator.log_text();
    ensure!(log.matches(STAND_DOWN).count() == 1, "{} stood down once:\n{log}", names[before]);
    eprintln!(
        "measured: leader {} before a {:.0} s outage, stood down {:.1} s after the API server stopped; {} after \
         ({}), a leader again {:.1} s after the restart, the change reconciled and the Lease naming it {:.1} s \
         after; both reported leading at none of {samples} samples (every ~0.1 s for {:.1} s after the restart)",
        names[before],
        OUTAGE.as_secs_f64(),
        stood_down.as_secs_f64(),
        names[after],
        if after == before { "resumed" } else { "took over" },
        resumed.as_secs_f64(),
        settled.as_secs_f64(),
        restarted.elapsed().as_secs_f64(),
    );
    eprintln!("measured: the other replica {fate}");
    for running in &mut operators {
        if running.operator.running() {
            running.operator.kill().await?;
        }
    }
    Ok(())
}
