//! How the cost grows (issue 24): with the size of the upstream's answers and with the number of
//! providers configured, at 32 connections.
//!
//! Larger answers: the nginx hop and Nexent search against a second upstream answering about
//! 20 KiB (five memories of about 4 KiB: Nexent's `limit` 5 keeps all five and a Nexent answer
//! carries each item's whole text, so all of it flows through the gateway). More providers: Nexent
//! search on the last provider of a gateway configured with 1000. Each row is read against the same
//! path's 32-connection row of the main table (about 1.5 KiB answers, the load gateway's
//! [`LOAD_PROVIDERS`] providers) and against the nginx hop with answers of the same size.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Result;

use crate::gateway::{self, Gateway};
use crate::nginx::Nginx;
use crate::{Case, LOAD_PROVIDERS, Route, Row, Scenario, kib, measure, only, upstream, write_config, wrk};

/// Connections of every row here.
const CONNECTIONS: u32 = 32;
/// Providers of the many-providers gateway.
const MANY: usize = 1000;

/// One row: what was measured, and the rows it is read against.
pub struct Scaled {
    label: String,
    measured: wrk::Measured,
    /// The same path's 32-connection row of the main table.
    base: Option<wrk::Measured>,
    /// The nginx hop at 32 connections with answers of the same size (none for the hop itself).
    peer: Option<wrk::Measured>,
}

/// The rows `MEMGATE_BENCH_ONLY` asks for (keys `20k` and `1000-providers`; unset: both): the
/// large answers through `large` (the load gateway's provider for the large upstream; its nginx is
/// started here), the many providers beside `fast`'s upstream and nginx.
pub fn run(work: &Path, rows: &[Row], fast: Route<'_>, large: Route<'_>, seconds: Duration) -> Result<Vec<Scaled>> {
    let mut scaled = Vec::new();
    if only("20k") {
        scaled.extend(large_answers(work, rows, large, seconds)?);
    }
    if only("1000-providers") {
        scaled.push(many_providers(work, rows, fast, seconds)?);
    }
    Ok(scaled)
}

/// The nginx hop, then Nexent search, against the upstream of `large`.
fn large_answers(work: &Path, rows: &[Row], large: Route<'_>, seconds: Duration) -> Result<Vec<Scaled>> {
    let nginx = Nginx::start(&work.join("nginx-large"), large.upstream.address)?;
    let route = Route { nginx: &nginx, ..large };
    let size = kib(upstream::large_answer_body().len());
    let hop = one_run(work, Scenario::NginxHop, route, seconds)?;
    let search = one_run(work, Scenario::NexentSearch, route, seconds)?;
    Ok(vec![
        Scaled {
            label: format!("{}, {size} answers", Scenario::NginxHop.label()),
            measured: hop,
            base: base_row(rows, Scenario::NginxHop),
            peer: None,
        },
        Scaled {
            label: format!("{}, {size} answers", Scenario::NexentSearch.label()),
            measured: search,
            base: base_row(rows, Scenario::NexentSearch),
            peer: Some(hop),
        },
    ])
}

/// Nexent search on the last provider of a gateway serving [`MANY`], all pointing at `fast`'s
/// upstream.
fn many_providers(work: &Path, rows: &[Row], fast: Route<'_>, seconds: Duration) -> Result<Scaled> {
    let config = work.join("config-many");
    write_config(&config, MANY, fast.upstream.address)?;
    let many = Gateway::start(&config, MANY, &work.join("gateway-many.log"))?;
    let last = gateway::provider_name(MANY - 1);
    let measured = one_run(work, Scenario::NexentSearch, Route { gateway: &many, provider: &last, ..fast }, seconds)?;
    Ok(Scaled {
        label: format!("{}, provider {MANY} of {MANY}", Scenario::NexentSearch.label()),
        measured,
        base: base_row(rows, Scenario::NexentSearch),
        peer: base_row(rows, Scenario::NginxHop),
    })
}

/// `scenario` along `route` at [`CONNECTIONS`].
fn one_run(work: &Path, scenario: Scenario, route: Route<'_>, seconds: Duration) -> Result<wrk::Measured> {
    let case = Case { scenario, connections: CONNECTIONS, slow: false };
    let measured = measure(work, &case, route, seconds)?;
    eprintln!("{:<30} c={CONNECTIONS:<3} {:<16} {:>9.0} req/s", scenario.label(), route.provider, measured.per_second);
    Ok(measured)
}

/// The main table's row of `scenario` at [`CONNECTIONS`] against the fast upstream, if it ran.
fn base_row(rows: &[Row], scenario: Scenario) -> Option<wrk::Measured> {
    rows.iter()
        .find(|(case, _)| case.scenario == scenario && case.connections == CONNECTIONS && !case.slow)
        .map(|(_, measured)| *measured)
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
        "\"vs base\": over the same path's {CONNECTIONS}-connection row above ({} answers, a gateway of \
         {LOAD_PROVIDERS} providers); \"vs nginx\": over the nginx hop's with answers of the same size.\n",
        kib(upstream::answer_body().len())
    )?;
    writeln!(
        out,
        "| path | conns | req/s | p50 | p99 | CPU per request | req/s vs base | CPU vs base | req/s vs nginx | CPU vs nginx |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|")?;
    for row in scaled {
        let m = &row.measured;
        let rate = |other: Option<wrk::Measured>| ratio(Some(m.per_second), other.map(|o| o.per_second));
        let cpu = |other: Option<wrk::Measured>| ratio(micros(m), other.as_ref().and_then(micros));
        writeln!(
            out,
            "| {} | {CONNECTIONS} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
            row.label,
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
