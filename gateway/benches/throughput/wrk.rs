//! Driving `wrk` (Debian's package) and reading its report: requests per second, latency
//! percentiles from `--latency`, and the counts that say whether every answer was a success.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};

/// One POST request shape for `wrk`.
pub struct Load<'a> {
    pub url: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a str,
}

/// What one `wrk` run measured.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub requests: u64,
    pub per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// The gateway's CPU time (user + system) per request, when a gateway served them.
    pub gateway_cpu_per_request: Option<Duration>,
}

/// Run `wrk` for `duration` with `connections` (and as many threads as cores, at most
/// `connections`) and return its figures. Fails on any socket error or non-2xx answer.
pub fn run(work: &Path, load: &Load<'_>, connections: u32, duration: Duration) -> Result<Measured> {
    let script = work.join("load.lua");
    let body = work.join("body.json");
    std::fs::write(&body, load.body)?;
    std::fs::write(&script, lua(&body, load.headers))?;
    let threads = connections.min(2);
    let output = std::process::Command::new("wrk")
        .args(["--latency", "-t", &threads.to_string(), "-c", &connections.to_string()])
        .args(["-d", &format!("{}s", duration.as_secs().max(1)), "--timeout", "10s", "-s"])
        .arg(&script)
        .arg(load.url)
        .output()
        .context("running wrk (apt-get install wrk; bench/run.sh installs it)")?;
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(output.status.success(), "wrk failed: {report}{}", String::from_utf8_lossy(&output.stderr));
    parse(&report).with_context(|| format!("reading wrk's report:\n{report}"))
}

fn lua(body: &Path, headers: &[(&str, &str)]) -> String {
    let mut script = String::from("wrk.method = \"POST\"\n");
    script.push_str(&format!("local f = assert(io.open({:?}, \"rb\"))\nwrk.body = f:read(\"*a\")\nf:close()\n", body));
    script.push_str("wrk.headers[\"Content-Type\"] = \"application/json\"\n");
    for (name, value) in headers {
        script.push_str(&format!("wrk.headers[{name:?}] = {value:?}\n"));
    }
    script
}

/// Read the figures out of a `wrk --latency` report.
pub fn parse(report: &str) -> Result<Measured> {
    let mut requests = None;
    let mut per_second = None;
    let (mut p50, mut p99) = (None, None);
    for line in report.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", value] => per_second = Some(value.parse::<f64>()?),
            [count, "requests", "in", ..] => requests = Some(count.parse::<u64>()?),
            ["50%", value] => p50 = Some(duration(value)?),
            ["99%", value] => p99 = Some(duration(value)?),
            ["Non-2xx", "or", "3xx", "responses:", count] => bail!("{count} answers were not 2xx"),
            ["Socket", "errors:", ..] => bail!("socket errors: {line}"),
            _ => {}
        }
    }
    Ok(Measured {
        requests: requests.context("no request count")?,
        per_second: per_second.context("no Requests/sec")?,
        p50: p50.context("no 50% latency")?,
        p99: p99.context("no 99% latency")?,
        gateway_cpu_per_request: None,
    })
}

/// `wrk`'s duration notation: `812.00us`, `1.23ms`, `2.01s`, `1.00m`.
fn duration(text: &str) -> Result<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic()).context("a unit")?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse()?;
    let seconds = match unit {
        "us" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" => value * 60.0,
        other => bail!("unknown unit {other:?}"),
    };
    Ok(Duration::from_secs_f64(seconds))
}
