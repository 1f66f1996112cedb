//! The added p99 at one connection (issue 24's latency target), read over interleaved rounds.
//!
//! A p99 is the slowest 1 % of a run, so it takes whatever else the shared machine did during that
//! run: with one 10 s run per path, the paths one after another, the direct path (no proxy at all)
//! has read up to 1.2 ms above the nginx hop on this 2-core machine, four times the target. Here
//! each round runs the nginx hop and every path in turn, a short run each (the order rotated from
//! round to round, so no path always follows the same neighbour), and a path's figure is the
//! median over the rounds of its p99 minus the nginx hop's p99 of the same round: a slow spell
//! that spans a round moves both sides of that round's difference, one that falls on a single run
//! moves one round out of several, not the median. Every round's figures are printed beside it.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::{Case, Route, Scenario, measure_after};

/// Rounds, unless `MEMGATE_BENCH_TAIL_ROUNDS` says otherwise (an odd count has a middle round).
const ROUNDS: usize = 9;
/// Warm-up before each run (`wrk` counts whole seconds): the processes are warm from the first
/// table, this only re-opens the connection.
const WARM_UP: Duration = Duration::from_secs(1);
/// Seconds of each run, unless `MEMGATE_BENCH_TAIL_SECONDS` says otherwise: at one connection
/// about 15-35 thousand answers, so a p99 is the slowest 150-350 of them.
const SECONDS: u64 = 3;
/// The bound of issue 24 on a path's added p99.
const TARGET: Duration = Duration::from_micros(300);

/// One path's p99 in every round, in round order.
pub struct Tail {
    path: Scenario,
    p99s: Vec<Duration>,
}

/// The rounds over the direct baseline, the nginx hop and `paths` at one connection along `route`.
pub fn run(work: &Path, route: Route<'_>, paths: &[Scenario]) -> Result<Vec<Tail>> {
    let rounds = std::env::var("MEMGATE_BENCH_TAIL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(ROUNDS);
    let seconds = crate::env_seconds("MEMGATE_BENCH_TAIL_SECONDS", SECONDS);
    let mut tails: Vec<Tail> = [Scenario::Direct, Scenario::NginxHop]
        .into_iter()
        .chain(paths.iter().copied())
        .map(|path| Tail { path, p99s: Vec::with_capacity(rounds) })
        .collect();
    let count = tails.len();
    for round in 0..rounds {
        for turn in 0..count {
            let tail = &mut tails[(round + turn) % count];
            let case = Case { scenario: tail.path, connections: 1, slow: false };
            tail.p99s.push(measure_after(work, &case, route, WARM_UP, seconds)?.p99);
        }
        eprintln!(
            "p99 round {}/{rounds}: {}",
            round + 1,
            tails.iter().map(|t| crate::ms(t.p99s[round])).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(tails)
}

/// The table: every path's p99 per round, and its median added p99 over the nginx hop's; or
/// nothing when the rounds did not run.
pub fn report(tails: &[Tail]) -> Result<String> {
    let mut out = String::new();
    if tails.is_empty() {
        return Ok(out);
    }
    let peer = tails.iter().find(|t| t.path == Scenario::NginxHop).context("the nginx rounds")?;
    let rounds = peer.p99s.len();
    writeln!(out, "\n## Gateway: added p99 at 1 connection, {rounds} interleaved rounds\n")?;
    writeln!(
        out,
        "Each round runs every path once for a short run at 1 connection, in an order rotated from round to round. \
         \"added per round\": the path's p99 minus the nginx hop's in the same round; the target reads their median.\n"
    )?;
    writeln!(out, "| path | p99 per round | median p99 | added per round | median added | target (issue 24) |")?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    for tail in tails {
        let added: Vec<f64> =
            tail.p99s.iter().zip(&peer.p99s).map(|(own, nginx)| own.as_secs_f64() - nginx.as_secs_f64()).collect();
        let millis = |values: &[f64]| values.iter().map(|v| format!("{:.3}", v * 1e3)).collect::<Vec<_>>().join(" ");
        let p99s: Vec<f64> = tail.p99s.iter().map(Duration::as_secs_f64).collect();
        let median_added = median(&added);
        let (added_cells, target) = match tail.path {
            Scenario::NginxHop => ("-".to_string(), "the peer".to_string()),
            Scenario::Direct => (millis(&added), "baseline".to_string()),
            _ => (
                millis(&added),
                format!("median added <= 0.3 ms: {}", crate::verdict(median_added <= TARGET.as_secs_f64())),
            ),
        };
        let median_added_cell =
            if tail.path == Scenario::NginxHop { "-".to_string() } else { format!("{:+.3} ms", median_added * 1e3) };
        writeln!(
            out,
            "| {} | {} | {:.3} ms | {added_cells} | {median_added_cell} | {target} |",
            tail.path.label(),
            millis(&p99s),
            median(&p99s) * 1e3,
        )?;
    }
    Ok(out)
}

/// The middle value of `values` (the mean of the middle two for an even count; NaN for none).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}
