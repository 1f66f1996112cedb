//! Child processes of the control plane: spawning with a log file, noticing an unexpected exit, and the watchdog
//! that kills them and removes their folder when the test process goes away without running `Drop`.
//!
//! Why a watchdog: a lazily started shared control plane lives in a `static`, whose destructor never runs, and a
//! test binary killed by a signal runs no destructor at all. `prctl(PR_SET_PDEATHSIG)` would need `unsafe`
//! (forbidden here) and fires when the spawning *thread* ends, which for libtest is the end of one test. So each
//! control plane starts a tiny `sh` process whose stdin is a pipe from the test process: it reads the pids to guard
//! line by line, and when the pipe closes (the test process exited, however it exited) it kills them with SIGKILL
//! and removes the data folder. It ignores SIGINT/SIGTERM/SIGHUP so a Ctrl-C still gets cleaned up.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Mutex;

use crate::error::Error;

/// How many log lines an error shows.
const TAIL_LINES: usize = 40;

/// A control plane process whose stdout and stderr go to one log file.
#[derive(Debug)]
pub(crate) struct Managed {
    name: &'static str,
    pid: u32,
    child: Mutex<Child>,
    log: PathBuf,
}

impl Managed {
    /// Starts `program` with `args`, appending stdout and stderr to `log`.
    pub(crate) fn spawn(name: &'static str, program: &Path, args: &[String], log: PathBuf) -> Result<Self, Error> {
        let out = File::create(&log).map_err(|e| Error::io(format!("creating {}", log.display()), e))?;
        let err = out.try_clone().map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Spawn { program: program.display().to_string(), source: e.into() })?;
        Ok(Self { name, pid: child.id(), child: Mutex::new(child), log })
    }

    /// The process name used in messages (`etcd`, `kube-apiserver`).
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The operating system process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The log file holding the process's stdout and stderr.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// The exit status if the process has exited (the status is remembered once seen).
    pub(crate) fn exit_status(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        child.try_wait().ok().flatten()
    }

    /// `Err(ProcessDied)` when the process has exited, naming it and showing the end of its log.
    pub(crate) fn check_running(&self, phase: &'static str) -> Result<(), Error> {
        match self.exit_status() {
            None => Ok(()),
            Some(status) => Err(Error::ProcessDied {
                process: self.name,
                phase,
                status: status.to_string(),
                log: self.log.clone(),
                tail: tail(&self.log),
            }),
        }
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub(crate) fn kill(&self) {
        let mut child = self.child.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The last lines of a log file (at most the last 64 KiB are read), or a note when it cannot be read.
pub(crate) fn tail(log: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = File::open(log)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(TAIL_LINES);
            let shown = lines[start..].join("\n");
            if shown.is_empty() { "(empty log)".to_owned() } else { shown }
        }
        Err(e) => format!("(could not read {}: {e})", log.display()),
    }
}

/// The shell script run by the watchdog: `$1` is the folder to remove, pids arrive on stdin, EOF means "clean up".
const WATCHDOG_SCRIPT: &str = r#"dir=$1
trap '' INT TERM HUP
pids=
while read -r pid; do pids="$pids $pid"; done
[ -n "$pids" ] && kill -KILL $pids 2>/dev/null
sleep 0.2
rm -rf -- "$dir"
"#;

/// Kills the guarded processes and removes a folder once the test process has gone; see the module docs.
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts a watchdog that will remove `dir` (and kill every pid later passed to [`Watchdog::guard`]).
    pub(crate) fn start(dir: &Path) -> Result<Self, Error> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("memgate-e2e-watchdog")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::Spawn { program: "sh (watchdog)".to_owned(), source: e.into() })?;
        let stdin = child.stdin.take();
        Ok(Self { child, stdin })
    }

    /// Adds a process to kill when the test process goes away.
    pub(crate) fn guard(&mut self, pid: u32) -> Result<(), Error> {
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            Error::io("registering a pid with the watchdog", std::io::Error::other("watchdog already released"))
        })?;
        writeln!(stdin, "{pid}")
            .and_then(|()| stdin.flush())
            .map_err(|e| Error::io("registering a pid with the watchdog", e))
    }

    /// Stops the watchdog without letting it act: the owner cleans up itself.
    pub(crate) fn disarm(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdin = None;
    }

    /// Closes the pipe as the end of the test process would, and waits until the watchdog has cleaned up.
    #[cfg(test)]
    fn trigger_and_wait(&mut self) -> std::io::Result<ExitStatus> {
        self.stdin = None;
        self.child.wait()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_kills_guarded_processes_and_removes_the_folder_when_the_pipe_closes() {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        std::fs::write(dir.join("data"), "x").expect("write");
        let mut sleeper = Command::new("sleep").arg("600").spawn().expect("spawn sleep");
        let mut watchdog = Watchdog::start(&dir).expect("watchdog");
        watchdog.guard(sleeper.id()).expect("guard");

        watchdog.trigger_and_wait().expect("watchdog exits");

        let status = sleeper.wait().expect("reap sleep");
        assert!(!status.success(), "sleep was killed, not finished: {status}");
        assert!(!dir.exists(), "{} was removed", dir.display());
    }

    #[test]
    fn disarmed_watchdog_leaves_everything_alone() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut sleeper = Command::new("sleep").arg("600").spawn().expect("spawn sleep");
        let mut watchdog = Watchdog::start(dir.path()).expect("watchdog");
        watchdog.guard(sleeper.id()).expect("guard");

        watchdog.disarm();
        std::thread::sleep(std::time::Duration::from_millis(300));

        assert!(sleeper.try_wait().expect("try_wait").is_none(), "sleep still runs");
        assert!(dir.path().exists());
        sleeper.kill().expect("kill");
        let _ = sleeper.wait();
    }

    #[test]
    fn died_process_is_named_with_the_end_of_its_log() {
        let dir = tempfile::tempdir().expect("temp dir");
        let args = vec!["-c".to_owned(), "seq 1 100; echo 'fatal: boom' >&2; exit 3".to_owned()];
        let process = Managed::spawn("etcd", Path::new("sh"), &args, dir.path().join("etcd.log")).expect("spawn");
        while process.exit_status().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let message = process.check_running("during startup").expect_err("exited").to_string();
        assert!(message.starts_with("etcd exited during startup (exit status: 3)"), "{message}");
        assert!(message.ends_with("100\nfatal: boom"), "{message}");
        assert!(!message.contains("\n60\n"), "only the last {TAIL_LINES} lines: {message}");
    }
}
