//! `memgate-gateway write-nexent-plugins` on a real folder: ownership (partner directories and
//! unmarked look-alikes are never touched), removal of stale owned directories, idempotent re-runs,
//! and atomicity (a concurrent scanner in the manner of Nexent's loader never sees a half-written
//! plugin directory).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use memgate_gateway::plugin::{
    ENTRY_POINT, ENTRY_SOURCE, LOCK_FILE, MANIFEST_FILE, MARKER_FILE, MARKER_TEXT, PluginSource, STAGING_DIR, render,
    write_plugins,
};
use serde_json::Value;

const GATEWAY: &str = "http://memgate-gateway.agents.svc:8080";

fn provider(name: &str, nexent: &str) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
         dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"http://127.0.0.1:9\", \
         allowInsecureHttp: true}}\n  credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  \
         scope: {{userId: repository-memory, agentId: qwen-code}}\n  nexent: {nexent}\n  access: {{anonymous: true}}\n"
    )
}

fn write_config(dir: &Path, providers: &[(&str, &str)]) {
    let mut text = String::from(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: upstream, namespace: agents}\nstringData: {api-key: k}\n",
    );
    for (name, nexent) in providers {
        text.push_str("---\n");
        text.push_str(&provider(name, nexent));
    }
    std::fs::write(dir.join("config.yaml"), text).expect("write config");
}

/// Run the command; its exit success, the parsed stdout report (when any) and stderr.
fn run(config: &Path, dest: &Path, url: &str) -> (bool, Value, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_memgate-gateway"))
        .args(["write-nexent-plugins", "--config"])
        .arg(config)
        .arg("--dest")
        .arg(dest)
        .args(["--gateway-url", url])
        .env("RUST_LOG", "info")
        .output()
        .expect("runs");
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.success(), report, String::from_utf8_lossy(&output.stderr).into_owned())
}

fn names(report: &Value, key: &str) -> Vec<String> {
    report[key].as_array().expect("list").iter().map(|v| v.as_str().expect("name").to_string()).collect()
}

fn children(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    names
}

fn mtime(path: &Path) -> SystemTime {
    std::fs::metadata(path).and_then(|m| m.modified()).expect("mtime")
}

#[test]
fn writes_owned_directories_and_never_touches_others() {
    let config = tempfile::tempdir().expect("tempdir");
    let dest = tempfile::tempdir().expect("tempdir");
    write_config(config.path(), &[("repo-memory", "{search: true, ingest: true}"), ("taken", "{search: true}")]);
    // A partner plugin, and a look-alike without the marker at a name memgate wants.
    let partner = dest.path().join("partner-memory");
    std::fs::create_dir(&partner).expect("mkdir");
    std::fs::write(partner.join(MANIFEST_FILE), "name: partner-memory\n").expect("write");
    let lookalike = dest.path().join("memgate-taken");
    std::fs::create_dir(&lookalike).expect("mkdir");
    std::fs::write(lookalike.join(MANIFEST_FILE), "name: hand-made\n").expect("write");
    std::fs::write(lookalike.join(MARKER_FILE), "not the marker\n").expect("write");

    let (ok, report, _) = run(config.path(), dest.path(), GATEWAY);
    assert!(ok, "{report}");
    assert_eq!(names(&report, "written"), ["memgate-repo-memory"]);
    assert_eq!(names(&report, "foreign"), ["memgate-taken"]);
    assert_eq!(report["locked"], true);
    assert_eq!(children(dest.path()), [LOCK_FILE, "memgate-repo-memory", "memgate-taken", "partner-memory"]);
    let plugin = dest.path().join("memgate-repo-memory");
    assert_eq!(children(&plugin), [MARKER_FILE, ENTRY_POINT, MANIFEST_FILE]);
    assert_eq!(std::fs::read_to_string(plugin.join(ENTRY_POINT)).expect("read"), ENTRY_SOURCE);
    assert_eq!(std::fs::read_to_string(plugin.join(MARKER_FILE)).expect("read"), MARKER_TEXT);
    assert!(std::fs::read_to_string(plugin.join(MANIFEST_FILE)).expect("read").contains("  - \"ingestible\"\n"));
    assert_eq!(std::fs::read_to_string(lookalike.join(MANIFEST_FILE)).expect("read"), "name: hand-made\n");
    assert_eq!(std::fs::read_to_string(partner.join(MANIFEST_FILE)).expect("read"), "name: partner-memory\n");

    // The provider goes away: its owned directory is removed, the others stay.
    write_config(config.path(), &[("taken", "{search: true}")]);
    let (ok, report, _) = run(config.path(), dest.path(), GATEWAY);
    assert!(ok, "{report}");
    assert_eq!(names(&report, "removed"), ["memgate-repo-memory"]);
    assert_eq!(children(dest.path()), [LOCK_FILE, "memgate-taken", "partner-memory"]);
    assert_eq!(std::fs::read_to_string(lookalike.join(MARKER_FILE)).expect("read"), "not the marker\n");
}

#[test]
fn reruns_are_idempotent_and_changes_replace_the_directory() {
    let config = tempfile::tempdir().expect("tempdir");
    let dest = tempfile::tempdir().expect("tempdir");
    write_config(config.path(), &[("repo-memory", "{search: true, ingest: true}")]);
    let plugin = dest.path().join("memgate-repo-memory");
    assert!(run(config.path(), dest.path(), GATEWAY).0);
    // Nexent's import leaves bytecode behind; that is not a change.
    std::fs::create_dir(plugin.join("__pycache__")).expect("mkdir");
    let before = mtime(&plugin.join(MANIFEST_FILE));

    let (ok, report, _) = run(config.path(), dest.path(), &format!("{GATEWAY}/"));
    assert!(ok);
    assert_eq!(names(&report, "unchanged"), ["memgate-repo-memory"]);
    assert!(names(&report, "written").is_empty() && names(&report, "removed").is_empty());
    assert_eq!(mtime(&plugin.join(MANIFEST_FILE)), before, "nothing rewritten");
    assert!(plugin.join("__pycache__").is_dir());

    // A new gateway URL or a tampered file: the whole directory is replaced.
    let (ok, report, _) = run(config.path(), dest.path(), "http://gw.other:9090");
    assert!(ok);
    assert_eq!(names(&report, "written"), ["memgate-repo-memory"]);
    assert!(std::fs::read_to_string(plugin.join(MANIFEST_FILE)).expect("read").contains("\"http://gw.other:9090\""));
    std::fs::write(plugin.join(ENTRY_POINT), "print('tampered')\n").expect("write");
    let (_, report, _) = run(config.path(), dest.path(), "http://gw.other:9090");
    assert_eq!(names(&report, "written"), ["memgate-repo-memory"]);
    assert_eq!(std::fs::read_to_string(plugin.join(ENTRY_POINT)).expect("read"), ENTRY_SOURCE);
    assert_eq!(children(dest.path()), [LOCK_FILE, "memgate-repo-memory"], "no staging left behind");
}

#[test]
fn leftovers_and_refusals() {
    let config = tempfile::tempdir().expect("tempdir");
    let dest = tempfile::tempdir().expect("tempdir");
    write_config(config.path(), &[("repo-memory", "{search: true}")]);
    // What a crashed earlier write left: cleaned.
    let staging = dest.path().join(STAGING_DIR);
    std::fs::create_dir_all(staging.join("memgate-repo-memory")).expect("mkdir");
    std::fs::write(staging.join(MARKER_FILE), MARKER_TEXT).expect("write");
    assert!(run(config.path(), dest.path(), GATEWAY).0);
    assert_eq!(children(dest.path()), [LOCK_FILE, "memgate-repo-memory"]);

    // A staging directory that is not memgate's: refused, nothing changed.
    std::fs::create_dir(&staging).expect("mkdir");
    write_config(config.path(), &[]);
    let (ok, _, stderr) = run(config.path(), dest.path(), GATEWAY);
    assert!(!ok);
    assert!(stderr.contains(STAGING_DIR), "{stderr}");
    assert!(dest.path().join("memgate-repo-memory").is_dir());

    let missing = dest.path().join("missing");
    assert!(!run(config.path(), &missing, GATEWAY).0, "the plugin folder must exist");
    assert!(!run(config.path(), dest.path(), "http://user:pw@gw").0, "credentials in the URL are refused");
}

/// Every direct child the loader would take for a plugin (it has `plugin.yaml`) is complete.
fn assert_complete_if_visible(dir: &Path, manifests: &[String]) {
    let inode = |dir: &Path| std::fs::symlink_metadata(dir).map(|m| m.ino()).ok();
    let before = inode(dir);
    let Ok(manifest) = std::fs::read_to_string(dir.join(MANIFEST_FILE)) else { return };
    assert!(manifests.contains(&manifest), "partial or foreign manifest in {}: {manifest}", dir.display());
    match std::fs::read_to_string(dir.join(ENTRY_POINT)) {
        Ok(entry) => assert_eq!(entry, ENTRY_SOURCE, "partial entry file in {}", dir.display()),
        // Missing is only fine when the directory was swapped away between the reads.
        Err(_) => assert_ne!(before, inode(dir), "{} has a manifest but no entry file", dir.display()),
    }
}

#[test]
fn a_concurrent_scanner_never_sees_a_half_written_plugin() {
    let dest = tempfile::tempdir().expect("tempdir");
    let dest_path: PathBuf = dest.path().to_path_buf();
    let source = |name: &str| PluginSource { provider: name.into(), search: true, ingest: true, anonymous: false };
    let urls = ["http://gw-a:8080", "http://gw-b:8080"];
    let sets: Vec<Vec<_>> = urls
        .iter()
        .map(|url| vec![render(&source("one"), url).expect("render"), render(&source("two"), url).expect("render")])
        .collect();
    let manifests: Vec<String> = sets.iter().flatten().map(|p| p.files[0].1.clone()).collect();

    let done = Arc::new(AtomicBool::new(false));
    let scanner = {
        let done = Arc::clone(&done);
        let dest = dest_path.clone();
        std::thread::spawn(move || {
            let mut scans = 0u64;
            while !done.load(Ordering::SeqCst) || scans == 0 {
                for entry in std::fs::read_dir(&dest).expect("list").flatten() {
                    assert_complete_if_visible(&entry.path(), &manifests);
                }
                scans += 1;
            }
            scans
        })
    };
    // Two writers at once (two replicas' init containers), alternating contents and sets.
    let writers: Vec<_> = (0..2)
        .map(|writer| {
            let sets = sets.clone();
            let dest = dest_path.clone();
            std::thread::spawn(move || {
                for round in 0..60 {
                    let set = &sets[(round + writer) % 2];
                    let plugins = if round % 5 == 4 { &set[..1] } else { &set[..] };
                    let report = write_plugins(&dest, plugins).expect("write succeeds");
                    assert!(report.foreign.is_empty(), "{report:?}");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    done.store(true, Ordering::SeqCst);
    assert!(scanner.join().expect("scanner never saw a partial plugin") > 0);
    let final_names = children(&dest_path);
    assert!(final_names.iter().all(|n| n == LOCK_FILE || n.starts_with("memgate-")), "{final_names:?}");
}
