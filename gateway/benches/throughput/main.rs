//! The gateway benchmark of issue 12: one run, one table.
//!
//! A fixed-answer Mem0-compatible upstream (about 1.5 KiB per answer) is called directly, through nginx
//! as a plain reverse-proxy hop (the peer every gateway path is read against: issue 24), and through
//! the release gateway (Nexent search, MCP `context_search` as a stateless 2026-07-28 client and as
//! a handshake-era client), each at 1 and 32 connections with `wrk`, and once more at 16 connections
//! (the per-provider upstream concurrency) against an upstream that takes 2 ms, as a real search
//! would take at least; then the gateway's peak memory
//! under that load, its idle memory and CPU with 1, 100 and 1000 providers, and the binaries' sizes;
//! then how the cost grows (issue 24): Nexent search and the nginx hop at 32 connections against an
//! upstream answering about 20 KiB, and Nexent search on the last provider of a gateway configured
//! with 1000; last, the cost of the audit trail and `spec.limits`: Nexent search through a gateway
//! with neither and through one with both, CPU per request side by side; and the gateway's peak
//! memory under 100 and 300 clients that pipeline searches with about 1 MiB answers and never read.
//! After the first table, the p99 at one connection of the nginx hop and of every gateway path is
//! measured again over interleaved short rounds (module `tail`): the added-p99 target reads their
//! median, as one run's p99 moves with whatever else the machine did during it.
//! Figures are printed beside the direct baseline measured in the same run, never asserted.
//!
//! `bench/run.sh` runs it (and installs `wrk`); by hand: `cargo bench -p memgate-gateway --bench
//! throughput`. `MEMGATE_BENCH_SECONDS` (default 10) is the length of each load run,
//! `MEMGATE_BENCH_IDLE_SECONDS` (default 60, so one of the watcher's once-a-minute full reads falls
//! inside) of each idle measurement; `MEMGATE_BENCH_TAIL_ROUNDS` (default 9) and
//! `MEMGATE_BENCH_TAIL_SECONDS` (default 3) shape the p99 rounds; `MEMGATE_RELEASE_DIR` names the
//! folder of the binaries to measure (default: the ones cargo built for this bench). For profiling
//! one path, `MEMGATE_BENCH_ONLY=nexent|mcp-stateless|mcp-legacy|tail|20k|1000-providers|nginx|stalled`
//! (comma-separated) runs just those (`tail`: the p99 rounds over the gateway paths selected; the
//! direct and nginx baselines always run; `nginx` alone: only them) and skips the idle part.

mod gateway;
mod nginx;
mod scaling;
mod stalled;
mod tail;
mod upstream;
mod wrk;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gateway::Gateway;
use memgate_e2e::procfs;
use nginx::Nginx;
use serde_json::json;

/// How long the second upstream takes per search.
const SLOW_UPSTREAM: Duration = Duration::from_millis(2);
/// Connections of the slow-upstream runs: the per-provider upstream concurrency (16 permits), so
/// that the bound itself does not queue calls.
const SLOW_CONNECTIONS: u32 = 16;

const QUERY: &str = "how does the payments service retry idempotent writes";

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let upstream = runtime.block_on(upstream::start(Duration::ZERO))?;
    let slow_upstream = runtime.block_on(upstream::start(SLOW_UPSTREAM))?;
    let large_upstream = runtime.block_on(upstream::start_with(Duration::ZERO, upstream::large_answer_body()))?;
    let work = tempfile::tempdir()?;
    let seconds = env_seconds("MEMGATE_BENCH_SECONDS", 10);
    let idle_seconds = env_seconds("MEMGATE_BENCH_IDLE_SECONDS", 60);
    eprintln!("gateway under test: {}", gateway::binary().display());

    let config = work.path().join("config-load");
    write_config(&config, 1, upstream.address)?;
    std::fs::write(config.join("slow.yaml"), gateway::provider_yaml(gateway::SLOW_PROVIDER, slow_upstream.address))?;
    let large_yaml = gateway::provider_yaml(gateway::LARGE_PROVIDER, large_upstream.address);
    std::fs::write(config.join("large.yaml"), large_yaml)?;
    let gw = Gateway::start(&config, LOAD_PROVIDERS, &work.path().join("gateway-load.log"))?;
    let nginx = Nginx::start(&work.path().join("nginx"), upstream.address)?;
    let fast = Route { gateway: &gw, nginx: &nginx, upstream: &upstream, provider: "bench" };
    let slow = Route { upstream: &slow_upstream, provider: gateway::SLOW_PROVIDER, ..fast };
    let rows = measure_rows(work.path(), fast, slow, seconds)?;
    let load_peak = procfs::memory(gw.pid())?.peak;
    let gateway_paths: Vec<Scenario> = Scenario::ALL.into_iter().filter(|s| s.selected() && s.is_gateway()).collect();
    let tails = if only("tail") && !gateway_paths.is_empty() {
        tail::run(work.path(), fast, &gateway_paths)?
    } else {
        Vec::new()
    };
    let large = Route { upstream: &large_upstream, provider: gateway::LARGE_PROVIDER, ..fast };
    let scaled = scaling::run(work.path(), fast, large, seconds)?;
    let accounted = if Scenario::NexentSearch.selected() {
        measure_audit_and_limits(work.path(), fast, seconds)?
    } else {
        Vec::new()
    };
    drop(gw);
    drop(nginx);
    let stalled = if only("stalled") {
        let megabyte_upstream =
            runtime.block_on(upstream::start_with(Duration::ZERO, upstream::megabyte_answer_body()))?;
        stalled::run(work.path(), &megabyte_upstream)?
    } else {
        Vec::new()
    };

    let mut idle = Vec::new();
    let idle_configs: &[usize] = if std::env::var_os("MEMGATE_BENCH_ONLY").is_some() { &[] } else { &[1, 100, 1000] };
    for &providers in idle_configs {
        let config = work.path().join(format!("config-{providers}"));
        write_config(&config, providers, upstream.address)?;
        let gw = Gateway::start(&config, providers, &work.path().join(format!("gateway-idle-{providers}.log")))?;
        std::thread::sleep(Duration::from_secs(3));
        let before = procfs::cpu_time(gw.pid())?;
        std::thread::sleep(idle_seconds);
        let cpu = procfs::cpu_time(gw.pid())?.saturating_sub(before);
        let rss = procfs::memory(gw.pid())?.rss;
        eprintln!("idle, {providers} providers: {:.2} s CPU, {} RSS", cpu.as_secs_f64(), mib(rss));
        idle.push((providers, rss, cpu));
    }

    print!("{}", report(&rows)?);
    print!("{}", tail::report(&tails)?);
    print!("{}", scaling::report(&scaled)?);
    print!("{}", memory_report(load_peak, &idle, idle_seconds)?);
    print!("{}", audit_and_limits_report(&accounted)?);
    print!("{}", stalled::report(&stalled)?);
    Ok(())
}

/// Providers of the load gateway: `bench`, [`gateway::SLOW_PROVIDER`], [`gateway::LARGE_PROVIDER`].
const LOAD_PROVIDERS: usize = 3;

/// The rows of the main table: every selected path at 1 and 32 connections through `fast`, then
/// at [`SLOW_CONNECTIONS`] through `slow` (the nginx peer proxies to the fast upstream only).
fn measure_rows(work: &Path, fast: Route<'_>, slow: Route<'_>, seconds: Duration) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for (connections, route, is_slow) in [(1, fast, false), (32, fast, false), (SLOW_CONNECTIONS, slow, true)] {
        let paths = Scenario::ALL.into_iter().filter(|s| s.selected() && !(is_slow && *s == Scenario::NginxHop));
        for scenario in paths {
            let case = Case { scenario, connections, slow: is_slow };
            let measured = measure(work, &case, route, seconds)?;
            eprintln!(
                "{:<30} c={connections:<3} slow={is_slow:<5} {:>9.0} req/s",
                scenario.label(),
                measured.per_second
            );
            rows.push((case, measured));
        }
    }
    Ok(rows)
}

/// Nexent search at 1 and 32 connections through `plain` and through a second gateway that writes
/// an audit event per call (`--audit-log` to a file) and checks every call against
/// [`gateway::NEVER_REFUSING_LIMITS`]: the pairs (plain, audited) per connection count.
fn measure_audit_and_limits(
    work: &Path,
    plain: Route<'_>,
    seconds: Duration,
) -> Result<Vec<(u32, wrk::Measured, wrk::Measured)>> {
    let config = work.join("config-audited");
    std::fs::create_dir_all(&config)?;
    std::fs::write(config.join("providers.yaml"), gateway::limited_config_yaml(plain.upstream.address))?;
    let audit = work.join("audit.jsonl");
    let audit_arg = audit.to_str().context("a UTF-8 path")?;
    let log = work.join("gateway-audited.log");
    let audited = Gateway::start_with(&config, 1, &log, &["--audit-log", audit_arg])?;
    let mut pairs = Vec::new();
    for connections in [1, 32] {
        let case = Case { scenario: Scenario::NexentSearch, connections, slow: false };
        let without = measure(work, &case, plain, seconds)?;
        let with = measure(work, &case, Route { gateway: &audited, ..plain }, seconds)?;
        eprintln!("audit + limits c={connections:<3} {:>9.0} vs {:>9.0} req/s", with.per_second, without.per_second);
        pairs.push((connections, without, with));
    }
    let events = std::fs::read_to_string(&audit).map(|text| text.lines().count()).unwrap_or(0);
    ensure!(events > 0, "the audited gateway wrote no audit event");
    Ok(pairs)
}

fn audit_and_limits_report(pairs: &[(u32, wrk::Measured, wrk::Measured)]) -> Result<String> {
    let mut out = String::new();
    if pairs.is_empty() {
        return Ok(out);
    }
    writeln!(out, "\n## Gateway: the cost of the audit trail and spec.limits (Nexent search)\n")?;
    writeln!(out, "The same search through a gateway without either and through one writing an audit event per call")?;
    writeln!(out, "to a file and checking a per-caller bucket, an upstream-rate bucket and maxInFlight slots.\n")?;
    writeln!(
        out,
        "| conns | req/s without | req/s with | CPU per request without | CPU per request with | CPU ratio |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|")?;
    let micros = |m: &wrk::Measured| m.gateway_cpu_per_request.map_or(0.0, |d| d.as_secs_f64() * 1e6);
    for (connections, without, with) in pairs {
        let ratio = if micros(without) > 0.0 { micros(with) / micros(without) } else { f64::NAN };
        writeln!(
            out,
            "| {connections} | {:.0} | {:.0} | {:.0} us | {:.0} us | {ratio:.2} |",
            without.per_second,
            with.per_second,
            micros(without),
            micros(with),
        )?;
    }
    Ok(out)
}

fn env_seconds(name: &str, default: u64) -> Duration {
    let seconds = std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    Duration::from_secs(seconds)
}

fn write_config(dir: &Path, providers: usize, upstream: std::net::SocketAddr) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("providers.yaml"), gateway::config_yaml(providers, upstream))?;
    Ok(())
}

/// One row of the table: a path, a connection count and which upstream.
#[derive(Clone, Copy)]
struct Case {
    scenario: Scenario,
    connections: u32,
    slow: bool,
}

/// The ways of asking for the same search.
#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    Direct,
    NginxHop,
    NexentSearch,
    McpStateless,
    McpLegacy,
}

impl Scenario {
    const ALL: [Scenario; 5] =
        [Scenario::Direct, Scenario::NginxHop, Scenario::NexentSearch, Scenario::McpStateless, Scenario::McpLegacy];

    /// Whether `MEMGATE_BENCH_ONLY` (unset: everything) asks for this path; the baselines (direct
    /// and the nginx peer) always run.
    fn selected(self) -> bool {
        match self {
            Scenario::Direct | Scenario::NginxHop => true,
            Scenario::NexentSearch => only("nexent"),
            Scenario::McpStateless => only("mcp-stateless"),
            Scenario::McpLegacy => only("mcp-legacy"),
        }
    }

    /// Whether the gateway serves this path (not a baseline).
    fn is_gateway(self) -> bool {
        !matches!(self, Scenario::Direct | Scenario::NginxHop)
    }

    fn label(self) -> &'static str {
        match self {
            Scenario::Direct => "direct to the upstream",
            Scenario::NginxHop => "nginx reverse proxy (the peer)",
            Scenario::NexentSearch => "gateway, Nexent search",
            Scenario::McpStateless => "gateway, MCP 2026-07-28",
            Scenario::McpLegacy => "gateway, MCP 2025-11-25",
        }
    }

    /// URL, headers and body of one request (`nginx`: the peer's address, proxying to `upstream`).
    fn request(
        self,
        upstream: &str,
        nginx: &str,
        gateway: &str,
        provider: &str,
    ) -> (String, Vec<(&'static str, &'static str)>, String) {
        let call = |meta: bool| {
            let mut params = json!({"name": "context_search", "arguments": {"query": QUERY}});
            if meta {
                params["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "memgate-bench", "version": "1.0.0"},
                });
            }
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).to_string()
        };
        let accept = ("Accept", "application/json, text/event-stream");
        match self {
            Scenario::Direct | Scenario::NginxHop => (
                format!("http://{}/search", if self == Scenario::NginxHop { nginx } else { upstream }),
                vec![("X-API-Key", gateway::UPSTREAM_KEY), ("Accept", "application/json")],
                json!({"query": QUERY, "filters": {"user_id": "bench", "agent_id": "bench"}, "top_k": 5}).to_string(),
            ),
            Scenario::NexentSearch => (
                format!("{gateway}/nexent/v1/{provider}/search"),
                vec![("Accept", "application/json")],
                json!({"query": QUERY, "limit": 5}).to_string(),
            ),
            Scenario::McpStateless => (
                format!("{gateway}/mcp/{provider}"),
                vec![
                    accept,
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "context_search"),
                ],
                call(true),
            ),
            Scenario::McpLegacy => {
                (format!("{gateway}/mcp/{provider}"), vec![accept, ("MCP-Protocol-Version", "2025-11-25")], call(false))
            }
        }
    }

    /// What a successful answer contains (checked once before the load; `wrk` then counts non-2xx).
    fn success_marker(self) -> &'static str {
        match self {
            Scenario::Direct | Scenario::NginxHop => "\"results\"",
            Scenario::NexentSearch => "\"content\"",
            Scenario::McpStateless | Scenario::McpLegacy => "\"isError\":false",
        }
    }
}

/// Whether `MEMGATE_BENCH_ONLY` is unset or names `key` among its comma-separated keys.
fn only(key: &str) -> bool {
    std::env::var("MEMGATE_BENCH_ONLY").map_or(true, |only| only.split(',').any(|k| k.trim() == key))
}

/// Where a run's requests go: the processes between `wrk` and the upstream (whose CPU time a run
/// reads), the upstream, and the gateway's provider for it.
#[derive(Clone, Copy)]
struct Route<'a> {
    gateway: &'a Gateway,
    nginx: &'a Nginx,
    upstream: &'a upstream::Upstream,
    provider: &'a str,
}

impl Route<'_> {
    /// CPU time so far of the process serving `scenario` (`None` for the direct baseline).
    fn cpu_time(&self, scenario: Scenario) -> Result<Option<Duration>> {
        Ok(match scenario {
            Scenario::Direct => None,
            Scenario::NginxHop => Some(self.nginx.cpu_time()?),
            _ => Some(procfs::cpu_time(self.gateway.pid())?),
        })
    }
}

/// One checked call, a 2 s warm-up, then `wrk` for `seconds` along `route`: its figures, with the
/// middle process's CPU per request; fails unless every answer reached the upstream once.
fn measure(work: &Path, case: &Case, route: Route<'_>, seconds: Duration) -> Result<wrk::Measured> {
    measure_after(work, case, route, Duration::from_secs(2), seconds)
}

/// [`measure`] with a warm-up of `warm_up`.
fn measure_after(
    work: &Path,
    case: &Case,
    route: Route<'_>,
    warm_up: Duration,
    seconds: Duration,
) -> Result<wrk::Measured> {
    let (scenario, connections, upstream) = (&case.scenario, case.connections, route.upstream);
    let nginx = route.nginx.address.to_string();
    let (url, headers, body) =
        scenario.request(&upstream.address.to_string(), &nginx, &route.gateway.base, route.provider);
    if *scenario == Scenario::McpLegacy {
        // A handshake-era client initializes first; the stateless gateway hands out no session.
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "memgate-bench", "version": "1.0.0"}}});
        let (status, answer) = gateway::http_post(&url, &headers, &init.to_string())?;
        ensure!(status == 200 && answer.contains("\"protocolVersion\""), "initialize failed: {status} {answer}");
    }
    let (status, answer) = gateway::http_post(&url, &headers, &body)?;
    ensure!(
        status == 200 && answer.contains(scenario.success_marker()),
        "{}: a single call failed: {status} {answer}",
        scenario.label()
    );
    let load = wrk::Load { url: &url, headers: &headers, body: &body };
    wrk::run(work, &load, connections, warm_up).context("warm-up")?;
    let searches_before = upstream.searches();
    let cpu_before = route.cpu_time(*scenario)?;
    let mut measured = wrk::run(work, &load, connections, seconds)?;
    let cpu_after = route.cpu_time(*scenario)?;
    measured.gateway_cpu_per_request = cpu_before
        .zip(cpu_after)
        .map(|(before, after)| after.saturating_sub(before).div_f64(measured.requests.max(1) as f64));
    let upstream_calls = upstream.searches() - searches_before;
    // Every measured request must have reached the upstream once (wrk counts only answers it read;
    // a request cut off at the end may still have been sent, so the upstream may count a few more).
    ensure!(
        upstream_calls >= measured.requests && upstream_calls <= measured.requests + u64::from(connections) * 2,
        "{}: {} answers but {upstream_calls} upstream searches",
        scenario.label(),
        measured.requests
    );
    Ok(measured)
}

fn kib(bytes: usize) -> String {
    format!("{:.1} KiB", bytes as f64 / 1024.0)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1e3)
}

fn added(gateway: Duration, direct: Duration) -> String {
    format!("{:+.3} ms", (gateway.as_secs_f64() - direct.as_secs_f64()) * 1e3)
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

type Row = (Case, wrk::Measured);

/// The main table: every row with its ratios to the direct baseline and to the nginx peer, and
/// the issue-24 targets read against the peer.
fn report(rows: &[Row]) -> Result<String> {
    let mut out = String::new();
    let size = kib(upstream::answer_body().len());
    writeln!(out, "\n## Gateway: throughput and latency (wrk, {size} upstream answers)\n")?;
    writeln!(
        out,
        "Upstream answering at once, at 1 and 32 connections; then one taking {} ms per search, at {SLOW_CONNECTIONS}. \
         \"vs nginx\" is req/s over the nginx hop's at the same connections, \"CPU vs nginx\" the middle process's CPU per \
         request over nginx's (master and workers). \"added p99 over nginx\" is this one run's; the issue 24 target \
         for it is read over interleaved rounds (the next table).\n",
        SLOW_UPSTREAM.as_millis()
    )?;
    writeln!(
        out,
        "| path | conns | req/s | vs direct | vs nginx | p50 | p99 | added p99 over nginx | CPU per request | CPU vs nginx | target (issue 24) |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|")?;
    for (case, m) in rows {
        let (scenario, connections) = (&case.scenario, &case.connections);
        let same = |wanted: Scenario, slow: bool| {
            rows.iter()
                .find(|(c, _)| c.scenario == wanted && c.connections == *connections && c.slow == slow)
                .map(|(_, d)| *d)
        };
        let direct = same(Scenario::Direct, case.slow).context("a direct row")?;
        // The peer runs against the fast upstream only.
        let peer = same(Scenario::NginxHop, false).filter(|_| !case.slow);
        let micros = |m: &wrk::Measured| m.gateway_cpu_per_request.map(|d| d.as_secs_f64() * 1e6);
        let ratio = m.per_second / direct.per_second;
        let vs_peer = peer.map(|p| m.per_second / p.per_second);
        let cpu_vs_peer = peer.and_then(|p| Some(micros(m)? / micros(&p)?));
        let added_over_peer = peer.map(|p| added(m.p99, p.p99));
        let (cpu_bound, rate_bound) = match scenario {
            Scenario::NexentSearch => (2.0, 0.5),
            _ => (3.0, 0.35),
        };
        let target = match (scenario, connections, vs_peer, cpu_vs_peer) {
            (Scenario::Direct, _, _, _) => "baseline".to_string(),
            (Scenario::NginxHop, _, _, _) => "the peer".to_string(),
            (_, 32, Some(rate), Some(cpu)) => format!(
                "req/s >= {rate_bound}x: {}; CPU <= {cpu_bound}x: {}",
                verdict(rate >= rate_bound),
                verdict(cpu <= cpu_bound)
            ),
            // The added-p99 target is read over interleaved rounds (module `tail`), not one run.
            (_, 1, _, Some(cpu)) => format!("CPU <= {cpu_bound}x: {}", verdict(cpu <= cpu_bound)),
            _ => "-".to_string(),
        };
        let dash = || "-".to_string();
        let cpu = micros(m).map_or_else(dash, |us| format!("{us:.0} us"));
        let upstream = if case.slow { format!(", {} ms upstream", SLOW_UPSTREAM.as_millis()) } else { String::new() };
        writeln!(
            out,
            "| {}{upstream} | {connections} | {:.0} | {ratio:.2} | {} | {} | {} | {} | {cpu} | {} | {target} |",
            scenario.label(),
            m.per_second,
            vs_peer.map_or_else(dash, |r| format!("{r:.2}")),
            ms(m.p50),
            ms(m.p99),
            added_over_peer.filter(|_| *scenario != Scenario::NginxHop).unwrap_or_else(dash),
            cpu_vs_peer.filter(|_| *scenario != Scenario::NginxHop).map_or_else(dash, |r| format!("{r:.1}x")),
        )?;
    }
    Ok(out)
}

/// The memory table: peak RSS under load, idle RSS and CPU per provider count, binary sizes.
fn memory_report(load_peak: u64, idle: &[(usize, u64, Duration)], idle_window: Duration) -> Result<String> {
    let mut out = String::new();
    writeln!(out, "\n## Gateway: memory, idle cost, size\n")?;
    writeln!(out, "| figure | value | target |")?;
    writeln!(out, "|---|---|---|")?;
    writeln!(
        out,
        "| peak RSS over the throughput runs (first table) | {} | <= 24 MiB (issue 24): {} |",
        mib(load_peak),
        verdict(load_peak <= 24 * 1024 * 1024)
    )?;
    for (providers, rss, cpu) in idle {
        let share = cpu.as_secs_f64() / idle_window.as_secs_f64() * 100.0;
        let target = match providers {
            100 => format!("RSS <= 32 MiB: {}", verdict(*rss <= 32 * 1024 * 1024)),
            1000 => format!("RSS <= 32 MiB (issue 24): {}", verdict(*rss <= 32 * 1024 * 1024)),
            _ => "-".to_string(),
        };
        writeln!(out, "| idle RSS, {providers} providers | {} | {target} |", mib(*rss))?;
        writeln!(
            out,
            "| idle CPU, {providers} providers | {:.2} s per {} s ({share:.2} % of a core) | near zero |",
            cpu.as_secs_f64(),
            idle_window.as_secs()
        )?;
    }
    for binary in ["memgate-gateway", "memgate-operator"] {
        let path = gateway::binary().with_file_name(binary);
        match std::fs::metadata(&path) {
            Ok(meta) => writeln!(out, "| release binary size, {binary} | {} | - |", mib(meta.len()))?,
            Err(_) => writeln!(out, "| release binary size, {binary} | not built ({}) | - |", path.display())?,
        }
    }
    Ok(out)
}
