//! Writing plugin directories into Nexent's plugin folder (`MEMORY_PROVIDER_PLUGINS_DIR`).
//!
//! Rules:
//! - **Ownership**: a direct child of the folder is memgate's only when it is a real directory (not
//!   a symlink) holding [`MARKER_FILE`] with exactly [`MARKER_TEXT`]. Only those are replaced or
//!   removed. A wanted name taken by anything else (a partner plugin, a file, a symlink, a directory
//!   without the marker) is left alone and reported in [`WriteReport::foreign`].
//! - **Atomicity**: a plugin directory is complete before it appears. It is built in
//!   [`STAGING_DIR`] (a hidden direct child, created only while needed, whose own top level never
//!   holds a `plugin.yaml`: Nexent's loader, which scans every direct child, skips it as a bad
//!   plugin) and renamed into place (same file system). A changed directory is replaced by two
//!   renames (old one into staging, new one into place), so for that instant the plugin is absent,
//!   never half-written. Removal renames into staging first, then deletes.
//! - **Idempotence**: an owned directory whose files already hold the wanted content is not
//!   touched (files Nexent adds, such as `__pycache__/`, are ignored), so a re-run changes no mtime.
//! - **Concurrency**: writers (e.g. the init containers of several gateway replicas) take an
//!   exclusive lock on [`LOCK_FILE`] (a hidden regular file, kept); where the file system cannot
//!   lock, the write goes ahead unlocked and [`WriteReport::locked`] is false.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{MARKER_FILE, MARKER_TEXT, PluginDir};

/// The staging directory inside the plugin folder.
pub const STAGING_DIR: &str = ".memgate-staging";
/// The lock file inside the plugin folder.
pub const LOCK_FILE: &str = ".memgate-write.lock";

/// Largest file read back when comparing content.
const MAX_COMPARED_BYTES: u64 = 4 * 1024 * 1024;

/// What a write did, by directory name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WriteReport {
    /// Created or replaced.
    pub written: Vec<String>,
    /// Already up to date.
    pub unchanged: Vec<String>,
    /// Owned but no longer wanted: removed.
    pub removed: Vec<String>,
    /// Wanted names taken by something memgate does not own: left alone, plugin not installed.
    pub foreign: Vec<String>,
    /// The write held the folder's lock.
    pub locked: bool,
}

/// Why the write stopped. Directories already handled stay as they are (each is complete).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A file system operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path it was applied to.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The plugin folder is missing or not a directory.
    #[error("the plugin folder {0} is not a directory")]
    NotADirectory(PathBuf),
    /// The staging directory exists but is not memgate's.
    #[error("{0} exists and is not memgate's; remove it or rename it")]
    ForeignStaging(PathBuf),
}

fn io_error(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> WriteError {
    let path = path.to_path_buf();
    move |source| WriteError::Io { what, path, source }
}

/// Bring the plugin folder `dest` in line with `plugins` (see the module rules).
pub fn write_plugins(dest: &Path, plugins: &[PluginDir]) -> Result<WriteReport, WriteError> {
    if !fs::metadata(dest).is_ok_and(|m| m.is_dir()) {
        return Err(WriteError::NotADirectory(dest.to_path_buf()));
    }
    let lock_path = dest.join(LOCK_FILE);
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_error("opening", &lock_path))?;
    let mut report = WriteReport { locked: lock.lock().is_ok(), ..WriteReport::default() };
    let mut staging = Staging::open(dest)?;

    let wanted: BTreeSet<&str> = plugins.iter().map(|p| p.name.as_str()).collect();
    for plugin in plugins {
        let target = dest.join(&plugin.name);
        match state_of(&target, plugin) {
            State::Foreign => report.foreign.push(plugin.name.clone()),
            State::Current => report.unchanged.push(plugin.name.clone()),
            State::Absent => {
                let staged = staging.stage(plugin)?;
                rename(&staged, &target)?;
                report.written.push(plugin.name.clone());
            }
            State::Outdated => {
                let staged = staging.stage(plugin)?;
                let old = staging.path(&format!("{}.old", plugin.name))?;
                rename(&target, &old)?;
                if let Err(err) = rename(&staged, &target) {
                    let _ = fs::rename(&old, &target);
                    return Err(err);
                }
                fs::remove_dir_all(&old).map_err(io_error("removing", &old))?;
                report.written.push(plugin.name.clone());
            }
        }
    }

    let entries = fs::read_dir(dest).map_err(io_error("listing", dest))?;
    let mut stale = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error("listing", dest))?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if name != STAGING_DIR && !wanted.contains(name.as_str()) && owned(&entry.path()) {
            stale.push(name);
        }
    }
    stale.sort();
    for name in stale {
        let old = staging.path(&format!("{name}.old"))?;
        rename(&dest.join(&name), &old)?;
        fs::remove_dir_all(&old).map_err(io_error("removing", &old))?;
        report.removed.push(name);
    }

    staging.finish()?;
    sync_dir(dest);
    drop(lock);
    Ok(report)
}

/// How a wanted plugin directory stands.
enum State {
    Absent,
    Foreign,
    Current,
    Outdated,
}

fn state_of(target: &Path, plugin: &PluginDir) -> State {
    match fs::symlink_metadata(target) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => State::Absent,
        _ if !owned(target) => State::Foreign,
        _ if plugin.files.iter().all(|(name, content)| holds(&target.join(name), content)) => State::Current,
        _ => State::Outdated,
    }
}

/// Whether `dir` is a real directory holding memgate's marker.
pub fn owned(dir: &Path) -> bool {
    fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) && holds(&dir.join(MARKER_FILE), MARKER_TEXT)
}

/// Whether `path` is a regular file (not a symlink) holding exactly `content`.
fn holds(path: &Path, content: &str) -> bool {
    if !fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut found = Vec::new();
    File::open(path).and_then(|f| f.take(MAX_COMPARED_BYTES).read_to_end(&mut found)).is_ok()
        && found == content.as_bytes()
}

fn rename(from: &Path, to: &Path) -> Result<(), WriteError> {
    fs::rename(from, to).map_err(io_error("renaming into", to))
}

/// Best effort: make the directory's entries durable (not every file system can sync a directory).
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// The staging directory, created on first use and removed by [`Staging::finish`].
struct Staging {
    dir: PathBuf,
    created: bool,
}

impl Staging {
    /// Clear what a crashed earlier write left (only when it is memgate's).
    fn open(dest: &Path) -> Result<Staging, WriteError> {
        let dir = dest.join(STAGING_DIR);
        match fs::symlink_metadata(&dir) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(WriteError::Io { what: "inspecting", path: dir, source: err }),
            Ok(_) if owned(&dir) => fs::remove_dir_all(&dir).map_err(io_error("removing", &dir))?,
            Ok(_) => return Err(WriteError::ForeignStaging(dir)),
        }
        Ok(Staging { dir, created: false })
    }

    /// `name` inside the staging directory, creating that directory when needed.
    fn path(&mut self, name: &str) -> Result<PathBuf, WriteError> {
        if !self.created {
            fs::create_dir(&self.dir).map_err(io_error("creating", &self.dir))?;
            self.created = true;
            write_file(&self.dir.join(MARKER_FILE), MARKER_TEXT)?;
        }
        Ok(self.dir.join(name))
    }

    /// Build `plugin` completely in staging; its path.
    fn stage(&mut self, plugin: &PluginDir) -> Result<PathBuf, WriteError> {
        let dir = self.path(&plugin.name)?;
        fs::create_dir(&dir).map_err(io_error("creating", &dir))?;
        for (name, content) in &plugin.files {
            write_file(&dir.join(name), content)?;
        }
        sync_dir(&dir);
        Ok(dir)
    }

    fn finish(self) -> Result<(), WriteError> {
        if self.created {
            fs::remove_dir_all(&self.dir).map_err(io_error("removing", &self.dir))?;
        }
        Ok(())
    }
}

fn write_file(path: &Path, content: &str) -> Result<(), WriteError> {
    let mut file = File::create(path).map_err(io_error("creating", path))?;
    file.write_all(content.as_bytes()).map_err(io_error("writing", path))?;
    file.sync_all().map_err(io_error("syncing", path))
}
