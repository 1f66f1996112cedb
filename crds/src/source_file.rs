//! Reading YAML source files with bounds: the only file I/O of this crate, shared by
//! `memgate-operator validate` and the gateway's config folder reader so both treat hostile input
//! (a pull request, a mounted volume) the same way.
//!
//! - Folders are walked once each (symlinks followed, so a loop ends), in name order; hidden entries
//!   are skipped (the `..data` folders of mounted volumes hold the same files again).
//! - Only regular files are read. The type is checked on the path (symlinks followed) before
//!   opening, so a device or FIFO is never opened; the file is opened with `O_NONBLOCK`, so a FIFO
//!   swapped in after the check cannot block the open; and the type is checked again on the open
//!   handle, so whatever was swapped in is refused before a byte is read.
//! - No file is read past its limit (plus one byte, to tell "exactly the limit" from "more"), and
//!   no read goes past what is left of the total budget: memory stays proportional to the limits
//!   whatever the file claims or turns out to be.
//!
//! It never parses (that is [`crate::manifest`]) and never puts file contents into an error.

use std::collections::BTreeSet;
use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Default most bytes read from one file: 4 MiB (one Kubernetes object is at most 1.5 MiB).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Default most bytes read from all files of one run or one config load: 64 MiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;

/// How much may be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Most bytes read from one file.
    pub max_file_bytes: u64,
    /// Most bytes read from all files together.
    pub max_total_bytes: u64,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits { max_file_bytes: DEFAULT_MAX_FILE_BYTES, max_total_bytes: DEFAULT_MAX_TOTAL_BYTES }
    }
}

/// Why a source file was not read. Messages carry no file content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The OS refused (missing file, permissions, too many open files, ...).
    #[error("unreadable: {0}")]
    Io(String),
    /// A device, FIFO, socket or folder where a file was expected.
    #[error("not a regular file ({0}); only regular files are read")]
    NotRegular(&'static str),
    /// The file is larger than the per-file limit.
    #[error("larger than the limit of {limit} bytes per file")]
    FileTooLarge {
        /// The per-file limit.
        limit: u64,
    },
    /// The files read so far exceed the total limit.
    #[error("reading it would exceed the limit of {limit} bytes for all files together")]
    TotalTooLarge {
        /// The total limit.
        limit: u64,
    },
    /// Not UTF-8 text.
    #[error("not UTF-8 text")]
    NotUtf8,
}

fn io_error(err: &std::io::Error) -> SourceError {
    // `std::io::Error`'s text is the OS message ("Too many open files (os error 24)"): no path.
    SourceError::Io(err.to_string())
}

/// What kind of non-regular file `metadata` describes.
fn file_type_name(metadata: &Metadata) -> Option<&'static str> {
    let kind = metadata.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Some("a FIFO");
        }
        if kind.is_char_device() || kind.is_block_device() {
            return Some("a device");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a file")
}

/// Reads source files against one total budget.
#[derive(Debug, Clone)]
pub struct SourceReader {
    limits: ReadLimits,
    used: u64,
}

impl SourceReader {
    /// A reader with nothing read yet.
    pub fn new(limits: ReadLimits) -> SourceReader {
        SourceReader { limits, used: 0 }
    }

    /// Bytes read so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The limits.
    pub fn limits(&self) -> ReadLimits {
        self.limits
    }

    /// Read `path` as UTF-8 text, within the per-file limit and the remaining total budget.
    pub fn read_text(&mut self, path: &Path) -> Result<String, SourceError> {
        let bytes = self.read_bytes(path, self.limits.max_file_bytes)?;
        String::from_utf8(bytes).map_err(|_| SourceError::NotUtf8)
    }

    /// Read `path` as bytes, at most `max_bytes` (and the per-file limit) and within the remaining
    /// total budget.
    pub fn read_bytes(&mut self, path: &Path, max_bytes: u64) -> Result<Vec<u8>, SourceError> {
        let per_file = max_bytes.min(self.limits.max_file_bytes);
        let remaining = self.limits.max_total_bytes.saturating_sub(self.used);
        // Before opening: a device or FIFO is never opened at all.
        let before = std::fs::metadata(path).map_err(|e| io_error(&e))?;
        if let Some(kind) = file_type_name(&before) {
            return Err(SourceError::NotRegular(kind));
        }
        let file = open_nonblocking(path).map_err(|e| io_error(&e))?;
        // On the handle: what was opened is what is read, whatever replaced the path meanwhile.
        let opened = file.metadata().map_err(|e| io_error(&e))?;
        if let Some(kind) = file_type_name(&opened) {
            return Err(SourceError::NotRegular(kind));
        }
        if opened.len() > per_file {
            return Err(SourceError::FileTooLarge { limit: per_file });
        }
        if opened.len() > remaining {
            return Err(SourceError::TotalTooLarge { limit: self.limits.max_total_bytes });
        }
        // The size can change after the check (a file being written, a /proc file): never read more
        // than the smaller bound plus one byte, which tells "over the bound" from "exactly at it".
        let bound = per_file.min(remaining);
        let mut bytes = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
        file.take(bound.saturating_add(1)).read_to_end(&mut bytes).map_err(|e| io_error(&e))?;
        let read = bytes.len() as u64;
        if read > per_file {
            return Err(SourceError::FileTooLarge { limit: per_file });
        }
        if read > remaining {
            return Err(SourceError::TotalTooLarge { limit: self.limits.max_total_bytes });
        }
        self.used += read;
        Ok(bytes)
    }
}

/// Open `path` for reading without blocking on a FIFO (`O_NONBLOCK` has no effect on regular files).
fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Whether `path` names a `*.yaml` or `*.yml` file.
pub fn is_yaml_name(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "yaml" || e == "yml")
}

/// Every `*.yaml`/`*.yml` under `path`, in name order, each once; `path` itself when it is not a
/// folder (whatever its name: it was named explicitly). Symlinks are followed but each folder is
/// visited once (`seen` holds canonical paths), hidden entries are skipped. Entries that are neither
/// folders nor YAML names are not looked at; the files returned are checked when read.
pub fn collect_yaml_files(path: &Path, out: &mut Vec<PathBuf>, seen: &mut BTreeSet<PathBuf>) -> std::io::Result<()> {
    let canonical = std::fs::canonicalize(path)?;
    if !seen.insert(canonical.clone()) {
        return Ok(());
    }
    if !canonical.is_dir() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() || is_yaml_name(&entry) {
            collect_yaml_files(&entry, out, seen)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(file: u64, total: u64) -> SourceReader {
        SourceReader::new(ReadLimits { max_file_bytes: file, max_total_bytes: total })
    }

    #[test]
    fn regular_files_are_read_within_both_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.yaml");
        std::fs::write(&a, "0123456789").expect("write");
        let mut r = reader(10, 15);
        assert_eq!(r.read_text(&a).as_deref(), Ok("0123456789"));
        assert_eq!(r.used(), 10);
        assert_eq!(r.read_text(&a), Err(SourceError::TotalTooLarge { limit: 15 }));
        assert_eq!(reader(9, 100).read_text(&a), Err(SourceError::FileTooLarge { limit: 9 }));
        assert_eq!(reader(100, 100).read_bytes(&a, 4), Err(SourceError::FileTooLarge { limit: 4 }));
        std::fs::write(&a, [0xff, 0xfe]).expect("write");
        assert_eq!(reader(10, 10).read_text(&a), Err(SourceError::NotUtf8));
    }

    #[cfg(unix)]
    #[test]
    fn devices_folders_and_symlinks_to_them_are_refused_without_reading() {
        let dir = tempfile::tempdir().expect("tempdir");
        let zero = dir.path().join("evil.yaml");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
        let mut r = reader(1024, 1024);
        assert_eq!(r.read_text(&zero), Err(SourceError::NotRegular("a device")));
        assert_eq!(r.read_text(dir.path()), Err(SourceError::NotRegular("a folder")));
        assert_eq!(r.used(), 0);
        let missing = r.read_text(&dir.path().join("missing.yaml")).expect_err("missing");
        assert!(matches!(missing, SourceError::Io(_)), "{missing:?}");
    }

    /// A FIFO is refused by its type, and even opening one (as after a swap between the check and
    /// the open) does not wait for a writer.
    #[cfg(unix)]
    #[test]
    fn a_fifo_never_blocks() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("pipe.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success());
        let (done, finished) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let refused = reader(1024, 1024).read_text(&path);
            let opened = open_nonblocking(&path).and_then(|f| f.metadata()).map(|m| m.file_type().is_fifo());
            let _ = done.send((refused, opened.ok()));
        });
        let (refused, opened) =
            finished.recv_timeout(std::time::Duration::from_secs(20)).expect("reading a FIFO must not block");
        assert_eq!(refused, Err(SourceError::NotRegular("a FIFO")));
        assert_eq!(opened, Some(true), "the non-blocking open returns at once and the handle shows the FIFO");
    }

    #[test]
    fn yaml_files_are_collected_once_in_order_skipping_hidden_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["b.yaml", "a.yml", "c.txt", ".hidden.yaml", "sub/d.yaml", "..data/e.yaml"] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, "x: 1").expect("write");
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path(), dir.path().join("sub/loop")).expect("symlink");
        let mut files = Vec::new();
        collect_yaml_files(dir.path(), &mut files, &mut BTreeSet::new()).expect("walk");
        let names: Vec<_> =
            files.iter().map(|p| p.strip_prefix(dir.path()).expect("inside").display().to_string()).collect();
        assert_eq!(names, ["a.yml", "b.yaml", "sub/d.yaml"]);
    }
}
