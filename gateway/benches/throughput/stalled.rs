//! Memory under stalled readers (issue 24): clients that pipeline four Nexent searches with about
//! 1 MiB answers each, on a 4 KiB receive buffer, and never read. A fresh gateway (default flags:
//! `--max-held-response-bytes` 32 MiB, the default write timeout) per client count, so its peak
//! resident memory (`VmHWM`) is this scenario's alone; the figure is that peak over the gateway's
//! resident memory just before the clients connected.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use memgate_e2e::procfs;

use crate::gateway::{self, Gateway};
use crate::upstream::Upstream;

/// Client counts measured.
pub const COUNTS: [usize; 2] = [100, 300];

/// How long the readers stay connected (under the gateway's default write timeout of 10 s, so
/// nothing is dropped for being slow before the peak is read).
const HOLD: Duration = Duration::from_secs(5);

/// Peak resident memory above the idle gateway's.
pub struct Stalled {
    /// Clients.
    pub clients: usize,
    /// Resident memory just before they connected.
    pub idle: u64,
    /// Peak resident memory while they were connected, over `idle`.
    pub growth: u64,
}

/// One 20-result Nexent search of `provider`, as raw HTTP/1.1 (pipelined four times per client).
fn search_request(provider: &str) -> String {
    let body = r#"{"query":"payments retries","limit":20}"#;
    format!(
        "POST /nexent/v1/{provider}/search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A client with a 4 KiB receive buffer that sent four searches and will never read.
fn stalled_client(address: SocketAddr, request: &str) -> Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.set_recv_buffer_size(4 * 1024)?;
    socket.connect(&address.into())?;
    let mut stream: TcpStream = socket.into();
    stream.write_all(request.as_bytes())?;
    Ok(stream)
}

/// Each count of [`COUNTS`] against a fresh gateway whose one provider answers from `upstream`
/// (about 1 MiB per answer).
pub fn run(work: &Path, upstream: &Upstream) -> Result<Vec<Stalled>> {
    let mut measured = Vec::new();
    for clients in COUNTS {
        let config = work.join(format!("config-stalled-{clients}"));
        std::fs::create_dir_all(&config)?;
        std::fs::write(config.join("providers.yaml"), gateway::config_yaml(1, upstream.address))?;
        let gw = Gateway::start(&config, 1, &work.join(format!("gateway-stalled-{clients}.log")))?;
        let address: SocketAddr = gw.base.trim_start_matches("http://").parse().context("the gateway's address")?;
        // One search first, so the idle figure includes what every first call allocates.
        let (status, _) = gateway::http_post(
            &format!("{}/nexent/v1/{}/search", gw.base, gateway::provider_name(0)),
            &[],
            r#"{"query":"payments retries","limit":20}"#,
        )?;
        anyhow::ensure!(status == 200, "the warm-up search answered {status}");
        std::thread::sleep(Duration::from_millis(500));
        let idle = procfs::memory(gw.pid())?.rss;
        let request = search_request(&gateway::provider_name(0)).repeat(4);
        let readers: Vec<TcpStream> = (0..clients).map(|_| stalled_client(address, &request)).collect::<Result<_>>()?;
        std::thread::sleep(HOLD);
        let peak = procfs::memory(gw.pid())?.peak;
        drop(readers);
        eprintln!(
            "{clients} stalled readers: peak {} over {} idle",
            crate::mib(peak.saturating_sub(idle)),
            crate::mib(idle)
        );
        measured.push(Stalled { clients, idle, growth: peak.saturating_sub(idle) });
    }
    Ok(measured)
}

/// The stalled-readers table.
pub fn report(measured: &[Stalled]) -> Result<String> {
    use std::fmt::Write as _;
    let mut out = String::new();
    if measured.is_empty() {
        return Ok(out);
    }
    writeln!(out, "\n## Gateway: memory under stalled readers (about 1 MiB answers)\n")?;
    writeln!(
        out,
        "Each client pipelines four 20-result Nexent searches on a 4 KiB receive buffer and never reads; a fresh \
         gateway with default flags per row; peak resident memory over the idle gateway's, {} s after they connected.\n",
        HOLD.as_secs()
    )?;
    writeln!(out, "| clients | idle RSS | peak RSS over idle | target (issue 24) |")?;
    writeln!(out, "|---|---|---|---|")?;
    for row in measured {
        let target = if row.clients == 300 {
            format!("< 64 MiB: {}", crate::verdict(row.growth < 64 * 1024 * 1024))
        } else {
            "-".to_string()
        };
        writeln!(out, "| {} | {} | {} | {target} |", row.clients, crate::mib(row.idle), crate::mib(row.growth))?;
    }
    Ok(out)
}
