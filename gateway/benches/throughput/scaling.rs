//! How the cost grows (issue 24): with the size of the upstream's answers and with the number of
//! providers configured, at 32 connections.
//!
//! Larger answers: the nginx hop and Nexent search against a second upstream answering about
//! 20 KiB (five memories of about 4 KiB: Nexent's `limit` 5 keeps all five and a Nexent answer
//! carries each item's whole text, so all of it flows through the gateway). More providers: Nexent
//! search on the last provider of a gateway configured with 1000. Each is read against its base,
//! the same path with about 1.5 KiB answers on the load gateway (of [`LOAD_PROVIDERS`] providers),
//! measured again right beside it rather than taken from the main table minutes earlier (on a
//! shared machine the figures drift more over minutes than between neighbouring runs), and against
//! the nginx hop with answers of the same size.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::gateway::{self, Gateway};
use crate::nginx::Nginx;
use crate::{Case, LOAD_PROVIDERS, Route, Scenario, kib, measure, only, upstream, write_config, wrk};

/// Connections of every row here.
const CONNECTIONS: u32 = 32;
/// Providers of the many-providers gateway.
const MANY: usize = 1000;

/// One row: what was measured, and the rows it is read against.
pub struct Scaled {
    path: Scenario,
    answers: String,
    providers: usize,
    measured: wrk::Measured,
    /// The same path with 1.5 KiB answers on the load gateway (none for a base row itself).
    base: Option<wrk::Measured>,
    /// The nginx hop with answers of the same size (none for the hop itself).
    peer: Option<wrk::Measured>,
}

/// The rows `MEMGATE_BENCH_ONLY` asks for (keys `20k` and `1000-providers`; unset: both), with
/// their bases. Measured in the order nginx base, nginx large, Nexent large, Nexent base, Nexent on
/// 1000 providers, so that each row has its base next to it; `fast` is the load gateway's route to
/// the 1.5 KiB upstream, `large` its route to the large one (whose nginx is started here).
pub fn run(work: &Path, fast: Route<'_>, large: Route<'_>, seconds: Duration) -> Result<Vec<Scaled>> {
    let (wants_large, wants_many) = (only("20k"), only("1000-providers"));
    if !wants_large && !wants_many {
        return Ok(Vec::new());
    }
    let small = kib(upstream::answer_body().len());
    let big = kib(upstream::large_answer_body().len());
    let hop_base = one_run(work, Scenario::NginxHop, fast, seconds)?;
    let large_runs = if wants_large { Some(large_answers(work, large, seconds)?) } else { None };
    let search_base = one_run(work, Scenario::NexentSearch, fast, seconds)?;
    let many = if wants_many { Some(many_providers(work, fast, seconds)?) } else { None };

    let row = |path, answers: &str, providers, measured, base, peer| Scaled {
        path,
        answers: answers.to_string(),
        providers,
        measured,
        base,
        peer,
    };
    let mut rows = vec![row(Scenario::NginxHop, &small, 0, hop_base, None, None)];
    if let Some((hop, _)) = large_runs {
        rows.push(row(Scenario::NginxHop, &big, 0, hop, Some(hop_base), None));
    }
    rows.push(row(Scenario::NexentSearch, &small, LOAD_PROVIDERS, search_base, None, Some(hop_base)));
    if let Some((hop, search)) = large_runs {
        rows.push(row(Scenario::NexentSearch, &big, LOAD_PROVIDERS, search, Some(search_base), Some(hop)));
    }
    if let Some(search) = many {
        rows.push(row(Scenario::NexentSearch, &small, MANY, search, Some(search_base), Some(hop_base)));
    }
    Ok(rows)
}

/// The nginx hop, then Nexent search, against the upstream of `large`.
fn large_answers(work: &Path, large: Route<'_>, seconds: Duration) -> Result<(wrk::Measured, wrk::Measured)> {
    let nginx = Nginx::start(&work.join("nginx-large"), large.upstream.address)?;
    let route = Route { nginx: &nginx, ..large };
    let hop = one_run(work, Scenario::NginxHop, route, seconds)?;
    let search = one_run(work, Scenario::NexentSearch, route, seconds)?;
    Ok((hop, search))
}

/// Nexent search on the last provider of a gateway serving [`MANY`], all pointing at `fast`'s
/// upstream.
fn many_providers(work: &Path, fast: Route<'_>, seconds: Duration) -> Result<wrk::Measured> {
    let config = work.join("config-many");
    write_config(&config, MANY, fast.upstream.address)?;
    let many = Gateway::start(&config, MANY, &work.join("gateway-many.log"))?;
    let last = gateway::provider_name(MANY - 1);
    one_run(work, Scenario::NexentSearch, Route { gateway: &many, provider: &last, ..fast }, seconds)
}

/// `scenario` along `route` at [`CONNECTIONS`].
fn one_run(work: &Path, scenario: Scenario, route: Route<'_>, seconds: Duration) -> Result<wrk::Measured> {
    let case = Case { scenario, connections: CONNECTIONS, slow: false };
    let measured = measure(work, &case, route, seconds)?;
    eprintln!("{:<30} c={CONNECTIONS:<3} {:<16} {:>9.0} req/s", scenario.label(), route.provider, measured.per_second);
    Ok(measured)
}

/// The table of the rows, or nothing when none ran.
pub fn report(scaled: &[Scaled]) -> Result<String> {
    let mut out = String::new();
    if scaled.is_empty() {
        return Ok(out);
    }
    writeln!(out, "\n## Gateway: as answers and providers grow ({CONNECTIONS} connections)\n")?;
    writeln!(
        out,
        "Each base row (no \"vs base\") is measured again right beside the rows read against it. \"vs base\": \
         over the same path's base (1.5 KiB answers, a gateway of {LOAD_PROVIDERS} providers); \"vs nginx\": over \
         the nginx hop's with answers of the same size.\n"
    )?;
    writeln!(
        out,
        "| path | answers | providers | req/s | p50 | p99 | CPU per request | req/s vs base | CPU vs base | req/s vs nginx | CPU vs nginx |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for row in scaled {
        let m = &row.measured;
        let rate = |other: Option<wrk::Measured>| ratio(Some(m.per_second), other.map(|o| o.per_second));
        let cpu = |other: Option<wrk::Measured>| ratio(micros(m), other.as_ref().and_then(micros));
        let providers = if row.path == Scenario::NginxHop { "-".to_string() } else { row.providers.to_string() };
        writeln!(
            out,
            "| {} | {} | {providers} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            row.path.label(),
            row.answers,
            m.per_second,
            crate::ms(m.p50),
            crate::ms(m.p99),
            micros(m).map_or_else(|| "-".to_string(), |us| format!("{us:.0} us")),
            rate(row.base),
            cpu(row.base),
            rate(row.peer),
            cpu(row.peer),
        )?;
    }
    Ok(out)
}

/// The middle process's CPU per request in microseconds, when one was measured.
fn micros(m: &wrk::Measured) -> Option<f64> {
    m.gateway_cpu_per_request.map(|d| d.as_secs_f64() * 1e6)
}

/// `value / reference` to two places, or `-` when either is missing or the reference is zero.
fn ratio(value: Option<f64>, reference: Option<f64>) -> String {
    match (value, reference) {
        (Some(value), Some(reference)) if reference > 0.0 => format!("{:.2}", value / reference),
        _ => "-".to_string(),
    }
}
