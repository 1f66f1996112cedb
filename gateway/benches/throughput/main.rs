//! The gateway benchmark of issue 12: one run, one table.
//!
//! A fixed-answer Mem0-compatible upstream (about 1 KiB per answer) is called directly and through
//! the release gateway (Nexent search, MCP `context_search` as a stateless 2026-07-28 client and as
//! a handshake-era client), each at 1 and 32 connections with `wrk`, and once more at 16 connections
//! (the per-provider upstream concurrency) against an upstream that takes 2 ms, as a real search
//! would take at least; then the gateway's peak memory
//! under that load, its idle memory and CPU with 1, 100 and 1000 providers, and the binaries' sizes;
//! last, the cost of the audit trail and `spec.limits`: Nexent search through a gateway with neither
//! and through one with both, CPU per request side by side.
//! Figures are printed beside the direct baseline measured in the same run, never asserted.
//!
//! `bench/run.sh` runs it (and installs `wrk`); by hand: `cargo bench -p memgate-gateway --bench
//! throughput`. `MEMGATE_BENCH_SECONDS` (default 10) is the length of each load run,
//! `MEMGATE_BENCH_IDLE_SECONDS` (default 60, so one of the watcher's once-a-minute full reads falls
//! inside) of each idle measurement; `MEMGATE_RELEASE_DIR` names the folder of the binaries to
//! measure (default: the ones cargo built for this bench). For profiling one path,
//! `MEMGATE_BENCH_ONLY=nexent|mcp-stateless|mcp-legacy` runs just it (and the direct baseline) and
//! skips the idle part.

mod gateway;
mod upstream;
mod wrk;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gateway::Gateway;
use memgate_e2e::procfs;
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
    let work = tempfile::tempdir()?;
    let seconds = env_seconds("MEMGATE_BENCH_SECONDS", 10);
    let idle_seconds = env_seconds("MEMGATE_BENCH_IDLE_SECONDS", 60);
    eprintln!("gateway under test: {}", gateway::binary().display());

    let config = work.path().join("config-load");
    write_config(&config, 1, upstream.address)?;
    std::fs::write(config.join("slow.yaml"), gateway::slow_provider_yaml(slow_upstream.address))?;
    let gw = Gateway::start(&config, 2, &work.path().join("gateway-load.log"))?;
    let mut rows = Vec::new();
    let runs = [(1, &upstream, false), (32, &upstream, false), (SLOW_CONNECTIONS, &slow_upstream, true)];
    for (connections, target, slow) in runs {
        for scenario in Scenario::ALL.into_iter().filter(|s| s.selected()) {
            let case = Case { scenario, connections, slow };
            let measured = measure(work.path(), &case, target, &gw, seconds)?;
            eprintln!("{:<28} c={connections:<3} slow={slow:<5} {:>9.0} req/s", scenario.label(), measured.per_second);
            rows.push((case, measured));
        }
    }
    let load_peak = procfs::memory(gw.pid())?.peak;
    let accounted = if Scenario::NexentSearch.selected() {
        measure_audit_and_limits(work.path(), &upstream, &gw, seconds)?
    } else {
        Vec::new()
    };
    drop(gw);

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

    print!("{}", report(&rows, load_peak, &idle, idle_seconds)?);
    print!("{}", audit_and_limits_report(&accounted)?);
    Ok(())
}

/// Nexent search at 1 and 32 connections through `plain` and through a second gateway that writes
/// an audit event per call (`--audit-log` to a file) and checks every call against
/// [`gateway::NEVER_REFUSING_LIMITS`]: the pairs (plain, audited) per connection count.
fn measure_audit_and_limits(
    work: &Path,
    upstream: &upstream::Upstream,
    plain: &Gateway,
    seconds: Duration,
) -> Result<Vec<(u32, wrk::Measured, wrk::Measured)>> {
    let config = work.join("config-audited");
    std::fs::create_dir_all(&config)?;
    std::fs::write(config.join("providers.yaml"), gateway::limited_config_yaml(upstream.address))?;
    let audit = work.join("audit.jsonl");
    let audit_arg = audit.to_str().context("a UTF-8 path")?;
    let log = work.join("gateway-audited.log");
    let audited = Gateway::start_with(&config, 1, &log, &["--audit-log", audit_arg])?;
    let mut pairs = Vec::new();
    for connections in [1, 32] {
        let case = Case { scenario: Scenario::NexentSearch, connections, slow: false };
        let without = measure(work, &case, upstream, plain, seconds)?;
        let with = measure(work, &case, upstream, &audited, seconds)?;
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

/// The four ways of asking for the same search.
#[derive(Clone, Copy, PartialEq)]
enum Scenario {
    Direct,
    NexentSearch,
    McpStateless,
    McpLegacy,
}

impl Scenario {
    const ALL: [Scenario; 4] = [Scenario::Direct, Scenario::NexentSearch, Scenario::McpStateless, Scenario::McpLegacy];

    /// Whether `MEMGATE_BENCH_ONLY` (unset: everything) asks for this path; the baseline always runs.
    fn selected(self) -> bool {
        let key = match self {
            Scenario::Direct => return true,
            Scenario::NexentSearch => "nexent",
            Scenario::McpStateless => "mcp-stateless",
            Scenario::McpLegacy => "mcp-legacy",
        };
        std::env::var("MEMGATE_BENCH_ONLY").map_or(true, |only| only.split(',').any(|k| k.trim() == key))
    }

    fn label(self) -> &'static str {
        match self {
            Scenario::Direct => "direct to the upstream",
            Scenario::NexentSearch => "gateway, Nexent search",
            Scenario::McpStateless => "gateway, MCP 2026-07-28",
            Scenario::McpLegacy => "gateway, MCP 2025-11-25",
        }
    }

    /// URL, headers and body of one request.
    fn request(
        self,
        upstream: &str,
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
            Scenario::Direct => (
                format!("http://{upstream}/search"),
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
            Scenario::Direct => "\"results\"",
            Scenario::NexentSearch => "\"content\"",
            Scenario::McpStateless | Scenario::McpLegacy => "\"isError\":false",
        }
    }
}

fn measure(
    work: &Path,
    case: &Case,
    upstream: &upstream::Upstream,
    gw: &Gateway,
    seconds: Duration,
) -> Result<wrk::Measured> {
    let (scenario, connections) = (&case.scenario, case.connections);
    let provider = if case.slow { gateway::SLOW_PROVIDER } else { "bench" };
    let (url, headers, body) = scenario.request(&upstream.address.to_string(), &gw.base, provider);
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
    wrk::run(work, &load, connections, Duration::from_secs(2)).context("warm-up")?;
    let searches_before = upstream.searches();
    let cpu_before = procfs::cpu_time(gw.pid())?;
    let mut measured = wrk::run(work, &load, connections, seconds)?;
    let cpu = procfs::cpu_time(gw.pid())?.saturating_sub(cpu_before);
    measured.gateway_cpu_per_request =
        (*scenario != Scenario::Direct).then(|| cpu.div_f64(measured.requests.max(1) as f64));
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

fn report(rows: &[Row], load_peak: u64, idle: &[(usize, u64, Duration)], idle_window: Duration) -> Result<String> {
    let mut out = String::new();
    writeln!(out, "\n## Gateway: throughput and latency (wrk, ~1 KiB upstream answers)\n")?;
    writeln!(
        out,
        "Upstream answering at once, at 1 and 32 connections; then one taking {} ms per search, at {SLOW_CONNECTIONS}.\n",
        SLOW_UPSTREAM.as_millis()
    )?;
    writeln!(
        out,
        "| path | conns | req/s | ratio to direct | p50 | p99 | added p50 | added p99 | gateway CPU per request | target |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|---|")?;
    for (case, m) in rows {
        let (scenario, connections) = (&case.scenario, &case.connections);
        let direct = rows
            .iter()
            .find(|(c, _)| c.scenario == Scenario::Direct && c.connections == *connections && c.slow == case.slow)
            .map(|(_, d)| *d)
            .context("a direct row")?;
        let ratio = m.per_second / direct.per_second;
        let target = match (scenario, connections) {
            (Scenario::Direct, _) => "baseline".to_string(),
            (_, _) if case.slow => "-".to_string(),
            (Scenario::NexentSearch | Scenario::McpStateless | Scenario::McpLegacy, 32) => {
                format!("ratio >= 0.5: {}", verdict(ratio >= 0.5))
            }
            (_, _) => {
                let extra = m.p99.saturating_sub(direct.p99);
                format!("added p99 <= 2 ms: {}", verdict(extra <= Duration::from_millis(2)))
            }
        };
        let (added_p50, added_p99) = if *scenario == Scenario::Direct {
            ("-".to_string(), "-".to_string())
        } else {
            (added(m.p50, direct.p50), added(m.p99, direct.p99))
        };
        let cpu = m.gateway_cpu_per_request.map_or("-".to_string(), |d| format!("{:.0} us", d.as_secs_f64() * 1e6));
        let upstream = if case.slow { format!(", {} ms upstream", SLOW_UPSTREAM.as_millis()) } else { String::new() };
        writeln!(
            out,
            "| {}{upstream} | {connections} | {:.0} | {ratio:.2} | {} | {} | {added_p50} | {added_p99} | {cpu} | {target} |",
            scenario.label(),
            m.per_second,
            ms(m.p50),
            ms(m.p99),
        )?;
    }
    writeln!(out, "\n## Gateway: memory, idle cost, size\n")?;
    writeln!(out, "| figure | value | target |")?;
    writeln!(out, "|---|---|---|")?;
    let limit = 64 * 1024 * 1024;
    writeln!(
        out,
        "| peak RSS over all load runs above | {} | <= 64 MiB: {} |",
        mib(load_peak),
        verdict(load_peak <= limit)
    )?;
    for (providers, rss, cpu) in idle {
        let share = cpu.as_secs_f64() / idle_window.as_secs_f64() * 100.0;
        let target = if *providers == 100 {
            format!("RSS <= 32 MiB: {}", verdict(*rss <= 32 * 1024 * 1024))
        } else {
            "-".to_string()
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
