//! What `/proc` says about a process the tests or benchmarks started: its memory and CPU time.
//! Linux only, like everything this crate runs.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`: 100 on every Linux ABI).
const TICKS_PER_SECOND: u64 = 100;

/// Resident memory of a process, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memory {
    /// Resident now (`VmRSS`).
    pub rss: u64,
    /// Peak resident so far (`VmHWM`).
    pub peak: u64,
}

fn read(path: &str) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::Io { action: format!("reading {path}"), source: Arc::new(e) })
}

fn malformed(path: &str, what: &str) -> Error {
    let source = std::io::Error::new(std::io::ErrorKind::InvalidData, format!("no readable {what}"));
    Error::Io { action: format!("parsing {path}"), source: Arc::new(source) }
}

/// `VmRSS` and `VmHWM` of `pid`.
pub fn memory(pid: u32) -> Result<Memory, Error> {
    let path = format!("/proc/{pid}/status");
    let status = read(&path)?;
    let kib = |field: &str| -> Result<u64, Error> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|value| value.split_whitespace().next())
            .and_then(|value| value.parse::<u64>().ok())
            .ok_or_else(|| malformed(&path, field))
    };
    Ok(Memory { rss: kib("VmRSS:")? * 1024, peak: kib("VmHWM:")? * 1024 })
}

/// CPU time `pid` has used so far (user + system).
pub fn cpu_time(pid: u32) -> Result<Duration, Error> {
    let path = format!("/proc/{pid}/stat");
    let stat = read(&path)?;
    // The fields after the parenthesised command name (which may hold spaces) start with the
    // state (field 3): utime and stime (fields 14 and 15) are the 12th and 13th of them.
    let rest = stat.rsplit_once(')').map(|(_, rest)| rest).ok_or_else(|| malformed(&path, "command name"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks =
        |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or_else(|| malformed(&path, "utime/stime"));
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_millis(total * 1000 / TICKS_PER_SECOND))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let pid = std::process::id();
        let now = memory(pid).expect("memory");
        assert!(now.rss > 0 && now.peak >= now.rss, "{now:?}");
        let spin = std::time::Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(cpu_time(pid).expect("cpu") >= Duration::from_millis(20), "the spin above used CPU");
        assert!(memory(u32::MAX).is_err(), "no such process");
    }
}
