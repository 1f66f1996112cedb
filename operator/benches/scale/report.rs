//! Phase marks and the plain-text tables printed at the end.

use std::fmt::Write as _;
use std::time::Instant;

use anyhow::Result;
use k8s_openapi::jiff::Timestamp;

use crate::Sizes;
use crate::audit::{self, Log, Request, Tally};
use memgate_e2e::procfs::Memory;

use crate::process::Operator;
use crate::support;

/// The start of a phase: when, and the operator's counters at that moment.
#[derive(Debug, Clone)]
pub struct Mark {
    /// The phase that starts here (`end` closes the last one).
    pub phase: &'static str,
    /// Wall clock, compared with the audit log's timestamps.
    pub at: Timestamp,
    /// Monotonic clock, for durations.
    pub instant: Instant,
    /// Memory at this moment.
    pub memory: Memory,
    /// CPU seconds used so far.
    pub cpu: f64,
    /// Reconciles so far (every outcome).
    pub reconciles: f64,
}

impl Mark {
    /// A mark now.
    pub async fn now(phase: &'static str, operator: &Operator) -> Result<Mark> {
        Mark::at(phase, Timestamp::now(), Instant::now(), operator).await
    }

    /// A mark at an earlier moment, with the counters read now.
    pub async fn at(phase: &'static str, at: Timestamp, instant: Instant, operator: &Operator) -> Result<Mark> {
        let metrics = operator.metrics().await?;
        Ok(Mark {
            phase,
            at,
            instant,
            memory: operator.memory()?,
            cpu: operator.cpu_seconds()?,
            reconciles: support::metric_sum(&metrics, "memgate_operator_reconciles_total"),
        })
    }

    /// Seconds from `earlier` to this mark.
    pub fn seconds_since(&self, earlier: &Mark) -> f64 {
        self.instant.duration_since(earlier.instant).as_secs_f64()
    }
}

/// Everything a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Phase boundaries, in order: startup, create, rollout, settle, quiet, end.
    pub marks: Vec<Mark>,
    /// The operator's requests.
    pub log: Log,
    /// How long the admin took to issue every create.
    pub creates_issued: std::time::Duration,
    /// Rollout simulations repeated for namespaces not Ready in time.
    pub resimulated: usize,
    /// `/metrics` at the end.
    pub final_metrics: String,
    /// `/proc/loadavg` before the run.
    pub load_before: String,
    /// `/proc/loadavg` after the run.
    pub load_after: String,
    /// Memory after the quiet window.
    pub memory_at_rest: Memory,
    /// Lease duration and renew grace, seconds.
    pub lease_seconds: (u64, u64),
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

impl Outcome {
    fn mark(&self, phase: &str) -> Option<&Mark> {
        self.marks.iter().find(|m| m.phase == phase)
    }

    fn seconds(&self, from: &str, to: &str) -> f64 {
        match (self.mark(from), self.mark(to)) {
            (Some(a), Some(b)) => b.seconds_since(a),
            _ => f64::NAN,
        }
    }

    /// The phase a request falls in (by the API server's receive time).
    fn phase_of(&self, request: &Request) -> &'static str {
        self.marks.iter().rev().find(|m| m.at <= request.at).map_or("before", |m| m.phase)
    }

    /// Requests of `phases`.
    fn tally(&self, phases: &[&str]) -> Tally {
        Tally::of(self.log.requests.iter().filter(|r| phases.contains(&self.phase_of(r))))
    }

    fn delta(&self, from: &str, to: &str, of: impl Fn(&Mark) -> f64) -> f64 {
        match (self.mark(from), self.mark(to)) {
            (Some(a), Some(b)) => of(b) - of(a),
            _ => f64::NAN,
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn per(count: usize, of: usize) -> f64 {
    count as f64 / of.max(1) as f64
}

/// A table with a header row, columns padded to their widest cell.
fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join(" | ").trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(header.iter().map(ToString::to_string).collect()));
    let _ = writeln!(out, "{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-|-"));
    for row in rows {
        let _ = writeln!(out, "{}", line(row.clone()));
    }
    out.push('\n');
}

/// Every table, as printed.
pub fn render(sizes: &Sizes, outcome: &Outcome) -> String {
    let mut out = String::new();
    let (duration, grace) = outcome.lease_seconds;
    let _ = writeln!(
        out,
        "\nmemgate-operator scale benchmark: {} MemoryProviders (each with its own Secret) in {} namespaces; \
         operator cluster-wide, --resync-seconds {}, Lease {duration} s renewed {grace} s before expiry; \
         {} creates in flight",
        sizes.providers, sizes.namespaces, sizes.resync_seconds, sizes.concurrency
    );
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let _ = writeln!(
        out,
        "machine: {cpus} CPUs; load average (1/5/15 min) before {}, after {}\n",
        outcome.load_before, outcome.load_after
    );
    table(&mut out, &["metric", "value", "target"], &summary_rows(sizes, outcome));
    table(&mut out, &phase_header(), &phase_rows(outcome));
    table(&mut out, &resource_header(), &resource_rows(outcome));
    let failures = failure_rows(outcome);
    if !failures.is_empty() {
        table(&mut out, &["phase", "failed verb", "resource", "code", "count"], &failures);
    }
    out
}

fn summary_rows(sizes: &Sizes, o: &Outcome) -> Vec<Vec<String>> {
    let n = sizes.providers;
    let busy = o.tally(&["create", "rollout"]);
    let quiet = o.tally(&["quiet"]);
    let quiet_seconds = sizes.quiet.as_secs();
    let resyncs = quiet_seconds.div_ceil(sizes.resync_seconds);
    let renew_every = o.lease_seconds.0 - o.lease_seconds.1;
    let by_verb = audit::VERBS
        .iter()
        .filter(|v| **v != "deletecollection")
        .map(|v| format!("{v} {:.2}", per(busy.verb(v), n)))
        .collect::<Vec<_>>()
        .join(", ");
    let after_start = o.tally(&["create", "rollout", "settle", "quiet"]);
    let audited_writes = after_start.writes_except("leases") - after_start.resources_writes("events");
    let counted_writes = support::metric_sum(&o.final_metrics, "memgate_operator_writes_total");
    let failed_after_startup = o.log.failures.iter().filter(|(r, _)| o.phase_of(r) != "startup").count();
    let peak = o.mark("end").map_or(0, |m| m.memory.peak).max(o.memory_at_rest.peak);
    let row = |m: &str, v: String, t: &str| vec![m.to_string(), v, t.to_string()];
    vec![
        row(
            "first create -> all Accepted=True and ResolvedRefs=True",
            format!("{:.1} s", o.seconds("create", "rollout")),
            "<= 60 s",
        ),
        row(
            "  admin issued every create (Secret + provider) in",
            format!(
                "{:.1} s ({:.0} providers/s)",
                o.creates_issued.as_secs_f64(),
                per(n, 1) / o.creates_issued.as_secs_f64()
            ),
            "-",
        ),
        row("first simulated rollout -> all Ready=True", format!("{:.1} s", o.seconds("rollout", "settle")), "<= 30 s"),
        row("  rollouts simulated again (Deployment changed after its rollout)", o.resimulated.to_string(), "0"),
        row("operator requests at startup (list, watch, Lease)", o.tally(&["startup"]).total().to_string(), "-"),
        row("operator requests, create + rollout", busy.total().to_string(), "-"),
        row("  per provider", format!("{:.2}", per(busy.total(), n)), "<= 10, flat in N"),
        row("  per provider, by verb", by_verb, "-"),
        row("  writes per provider (Events included)", format!("{:.2}", per(busy.writes(), n)), "-"),
        row("  Events per provider", format!("{:.2}", per(busy.resources_writes("events"), n)), "-"),
        row(
            "  status writes per provider",
            format!("{:.2}", per(busy.resources_writes("memoryproviders/status"), n)),
            "-",
        ),
        row(
            &format!("quiet {quiet_seconds} s: writes, Lease renewals excluded"),
            quiet.writes_except("leases").to_string(),
            "0",
        ),
        row(
            &format!("quiet {quiet_seconds} s: Lease renewals"),
            quiet.resources_writes("leases").to_string(),
            &format!("~{} (every {renew_every} s)", quiet_seconds / renew_every.max(1)),
        ),
        row(
            &format!("quiet {quiet_seconds} s: reads, Lease excluded"),
            format!("{} ({} Secret GETs)", quiet.reads_except("leases"), quiet.resource_verb("secrets", "get")),
            &format!("<= {} (a GET per Secret per resync, {resyncs} resync(s))", n as u64 * resyncs),
        ),
        row("operator peak RSS (VmHWM)", mib(peak), "<= 256 MiB"),
        row("operator RSS at rest (VmRSS after the quiet window)", mib(o.memory_at_rest.rss), "<= 128 MiB"),
        row(
            "operator RSS when synced, before the first create",
            o.mark("create").map_or("-".into(), |m| mib(m.memory.rss)),
            "-",
        ),
        row(
            "operator CPU, create + rollout / quiet",
            format!("{:.1} s / {:.1} s", o.delta("create", "settle", |m| m.cpu), o.delta("quiet", "end", |m| m.cpu)),
            "-",
        ),
        row(
            "reconciles, create + rollout / quiet",
            format!(
                "{:.0} / {:.0}",
                o.delta("create", "settle", |m| m.reconciles),
                o.delta("quiet", "end", |m| m.reconciles)
            ),
            "-",
        ),
        row("audit log lines that could not be read (counts are exact at 0)", o.log.unreadable.to_string(), "0"),
        row("failed operator requests (status >= 400) after startup", failed_after_startup.to_string(), "0"),
        row(
            "writes: operator's counter / audit log (Lease, Events excluded)",
            format!("{counted_writes:.0} / {audited_writes}"),
            "equal",
        ),
    ]
}

/// Failed requests counted by phase (in run order), verb, resource and code.
fn failure_rows(o: &Outcome) -> Vec<Vec<String>> {
    let mut counts: std::collections::BTreeMap<(usize, &str, &str, &str, u16), usize> = Default::default();
    for (request, code) in &o.log.failures {
        let phase = o.phase_of(request);
        let order = o.marks.iter().position(|m| m.phase == phase).unwrap_or_default();
        *counts.entry((order, phase, &request.verb, &request.resource, *code)).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|((_, phase, verb, resource, code), n)| {
            vec![phase.into(), verb.into(), resource.into(), code.to_string(), n.to_string()]
        })
        .collect()
}

fn phase_header() -> Vec<&'static str> {
    let mut header = vec!["phase", "seconds"];
    header.extend(audit::VERBS.iter().filter(|v| **v != "deletecollection"));
    header.extend(["total", "CPU s", "RSS at end", "reconciles"]);
    header
}

fn phase_rows(o: &Outcome) -> Vec<Vec<String>> {
    o.marks
        .windows(2)
        .map(|pair| {
            let (from, to) = (&pair[0], &pair[1]);
            let tally = o.tally(&[from.phase]);
            let mut row = vec![from.phase.to_string(), format!("{:.1}", to.seconds_since(from))];
            row.extend(audit::VERBS.iter().filter(|v| **v != "deletecollection").map(|v| tally.verb(v).to_string()));
            row.push(tally.total().to_string());
            row.push(format!("{:.1}", to.cpu - from.cpu));
            row.push(mib(to.memory.rss));
            row.push(format!("{:.0}", to.reconciles - from.reconciles));
            row
        })
        .collect()
}

fn resource_header() -> Vec<&'static str> {
    let mut header = vec!["phase", "resource"];
    header.extend(audit::VERBS.iter().filter(|v| **v != "deletecollection"));
    header
}

fn resource_rows(o: &Outcome) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for mark in &o.marks {
        let tally = o.tally(&[mark.phase]);
        let resources: std::collections::BTreeSet<&String> = tally.resources.keys().map(|(r, _)| r).collect();
        let phase = if mark.phase == "end" { "after end" } else { mark.phase };
        for resource in resources {
            let mut row =
                vec![phase.to_string(), if resource.is_empty() { "(non-resource)".into() } else { resource.clone() }];
            row.extend(audit::VERBS.iter().filter(|v| **v != "deletecollection").map(|v| {
                tally.resources.get(&(resource.clone(), (*v).to_string())).copied().unwrap_or_default().to_string()
            }));
            rows.push(row);
        }
    }
    rows
}
