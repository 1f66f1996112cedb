//! The gateway benchmark of issue 12: one run, one table.
//!
//! A fixed-answer Mem0-compatible upstream (about 1 KiB per answer) is called directly and through
//! the release gateway (Nexent search, MCP `context_search` as a stateless 2026-07-28 client and as
//! a handshake-era client), each at 1 and 32 connections with `wrk`; then the gateway's peak memory
//! under that load, its idle memory and CPU with 1, 100 and 1000 providers, and the binaries' sizes.
//! Figures are printed beside the direct baseline measured in the same run, never asserted.
//!
//! `bench/run.sh` runs it (and installs `wrk`); by hand: `cargo bench -p memgate-gateway --bench
//! throughput`. `MEMGATE_BENCH_SECONDS` (default 10) is the length of each load run,
//! `MEMGATE_BENCH_IDLE_SECONDS` (default 60, so one of the watcher's once-a-minute full reads falls
//! inside) of each idle measurement; `MEMGATE_RELEASE_DIR` names the folder of the binaries to
//! measure (default: the ones cargo built for this bench).

mod gateway;
mod upstream;
mod wrk;

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gateway::Gateway;
use serde_json::json;

const QUERY: &str = "how does the payments service retry idempotent writes";

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let upstream = runtime.block_on(upstream::start())?;
    let work = tempfile::tempdir()?;
    let seconds = env_seconds("MEMGATE_BENCH_SECONDS", 10);
    let idle_seconds = env_seconds("MEMGATE_BENCH_IDLE_SECONDS", 60);
    eprintln!("gateway under test: {}", gateway::binary().display());

    let config = work.path().join("config-1");
    write_config(&config, 1, upstream.address)?;
    let gw = Gateway::start(&config, 1, &work.path().join("gateway-load.log"))?;
    let mut rows = Vec::new();
    for connections in [1, 32] {
        for scenario in Scenario::ALL {
            let measured = measure(work.path(), &scenario, &upstream, &gw, connections, seconds)?;
            eprintln!("{:<28} c={connections:<3} {:>9.0} req/s", scenario.label(), measured.per_second);
            rows.push((scenario, connections, measured));
        }
    }
    let (_, load_peak) = gateway::memory(gw.pid())?;
    drop(gw);

    let ticks = gateway::ticks_per_second()?;
    let mut idle = Vec::new();
    for providers in [1, 100, 1000] {
        let config = work.path().join(format!("config-{providers}"));
        write_config(&config, providers, upstream.address)?;
        let gw = Gateway::start(&config, providers, &work.path().join(format!("gateway-idle-{providers}.log")))?;
        std::thread::sleep(Duration::from_secs(3));
        let before = gateway::cpu_time(gw.pid(), ticks)?;
        std::thread::sleep(idle_seconds);
        let cpu = gateway::cpu_time(gw.pid(), ticks)?.saturating_sub(before);
        let (rss, _) = gateway::memory(gw.pid())?;
        eprintln!("idle, {providers} providers: {:.2} s CPU, {} RSS", cpu.as_secs_f64(), mib(rss));
        idle.push((providers, rss, cpu));
    }

    print!("{}", report(&rows, load_peak, &idle, idle_seconds)?);
    Ok(())
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

    fn label(self) -> &'static str {
        match self {
            Scenario::Direct => "direct to the upstream",
            Scenario::NexentSearch => "gateway, Nexent search",
            Scenario::McpStateless => "gateway, MCP 2026-07-28",
            Scenario::McpLegacy => "gateway, MCP 2025-11-25",
        }
    }

    /// URL, headers and body of one request.
    fn request(self, upstream: &str, gateway: &str) -> (String, Vec<(&'static str, &'static str)>, String) {
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
                vec![("X-API-Key", "bench-upstream-key"), ("Accept", "application/json")],
                json!({"query": QUERY, "filters": {"user_id": "bench", "agent_id": "bench"}, "top_k": 5}).to_string(),
            ),
            Scenario::NexentSearch => (
                format!("{gateway}/nexent/v1/bench/search"),
                vec![("Accept", "application/json")],
                json!({"query": QUERY, "limit": 5}).to_string(),
            ),
            Scenario::McpStateless => (
                format!("{gateway}/mcp/bench"),
                vec![
                    accept,
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "context_search"),
                ],
                call(true),
            ),
            Scenario::McpLegacy => {
                (format!("{gateway}/mcp/bench"), vec![accept, ("MCP-Protocol-Version", "2025-11-25")], call(false))
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
    scenario: &Scenario,
    upstream: &upstream::Upstream,
    gw: &Gateway,
    connections: u32,
    seconds: Duration,
) -> Result<wrk::Measured> {
    let (url, headers, body) = scenario.request(&upstream.address.to_string(), &gw.base);
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
    let measured = wrk::run(work, &load, connections, seconds)?;
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

type Row = (Scenario, u32, wrk::Measured);

fn report(rows: &[Row], load_peak: u64, idle: &[(usize, u64, Duration)], idle_window: Duration) -> Result<String> {
    let mut out = String::new();
    writeln!(out, "\n## Gateway: throughput and latency (wrk, ~1 KiB upstream answers)\n")?;
    writeln!(out, "| path | conns | req/s | ratio to direct | p50 | p99 | added p50 | added p99 | target |")?;
    writeln!(out, "|---|---|---|---|---|---|---|---|---|")?;
    for (scenario, connections, m) in rows {
        let direct = rows
            .iter()
            .find(|(s, c, _)| *s == Scenario::Direct && c == connections)
            .map(|(_, _, d)| *d)
            .context("a direct row")?;
        let ratio = m.per_second / direct.per_second;
        let target = match (scenario, connections) {
            (Scenario::Direct, _) => "baseline".to_string(),
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
        writeln!(
            out,
            "| {} | {connections} | {:.0} | {ratio:.2} | {} | {} | {added_p50} | {added_p99} | {target} |",
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
