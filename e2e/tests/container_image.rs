//! The container image, checked without a container engine: the `Dockerfile`'s stages, user and copied
//! paths against the release build that `scripts/build-release.sh` (the script the Dockerfile's build
//! stage runs, and the test command runs before `cargo test`) leaves in `target/release/`.
//!
//! What is proven here: the build stage runs exactly that script; every `COPY --from=build` source is
//! a file that script produced, and executable; the final stage is distroless (no shell) with a
//! numeric non-root user and an exec-form entrypoint naming a copied binary; both binaries start and
//! report the workspace version (the image's `VERSION` default); and each binary needs no shared
//! library beyond the glibc/libgcc that distroless `cc` ships.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Shared libraries present in `gcr.io/distroless/cc-debian12` (glibc + libgcc_s).
const DISTROLESS_CC_LIBRARIES: &[&str] = &[
    "linux-vdso.so.1",
    "libc.so.6",
    "libm.so.6",
    "libgcc_s.so.1",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("e2e/ has a parent").to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

/// One instruction of the Dockerfile: keyword and its arguments (continuation lines joined).
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(trimmed);
        joined.push(std::mem::take(&mut current));
    }
    joined
        .into_iter()
        .map(|line| {
            let (keyword, rest) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
            (keyword.to_ascii_uppercase(), rest.trim().to_string())
        })
        .collect()
}

/// One build stage: its name (`AS name`), base image and instructions `(KEYWORD, arguments)`.
struct Stage {
    name: String,
    base: String,
    steps: Vec<(String, String)>,
}

/// Instructions grouped by stage.
fn stages(text: &str) -> Vec<Stage> {
    let mut out: Vec<Stage> = Vec::new();
    for (keyword, args) in instructions(text) {
        if keyword == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_kw, name] if as_kw.eq_ignore_ascii_case("as") => (*name).to_string(),
                _ => String::new(),
            };
            out.push(Stage { name, base: words.first().copied().unwrap_or_default().to_string(), steps: Vec::new() });
        } else if let Some(stage) = out.last_mut() {
            stage.steps.push((keyword, args));
        }
    }
    out
}

fn dockerfile() -> String {
    std::fs::read_to_string(workspace_root().join("Dockerfile")).expect("Dockerfile at the workspace root")
}

fn release_binary(name: &str) -> PathBuf {
    let path = target_dir().join("release").join(name);
    assert!(
        path.is_file(),
        "{} is missing: run ./scripts/build-release.sh first (./scripts/test.sh does)",
        path.display()
    );
    path
}

#[test]
fn dockerfile_has_a_build_stage_running_the_release_script_and_a_distroless_runtime() {
    let stages = stages(&dockerfile());
    let names: Vec<&str> = stages.iter().map(|stage| stage.name.as_str()).collect();
    assert_eq!(names, ["build", "runtime"], "stages");
    let runs: Vec<&str> = stages[0].steps.iter().filter(|(k, _)| k == "RUN").map(|(_, args)| args.as_str()).collect();
    assert_eq!(runs, ["./scripts/build-release.sh"], "the build stage runs exactly the release script");
    let script = std::fs::read_to_string(workspace_root().join("scripts/build-release.sh")).expect("release script");
    let cargo = script.lines().find(|l| l.trim_start().starts_with("cargo build")).expect("a cargo build line");
    for flag in ["--release", "--locked", "--bin memgate-gateway", "--bin memgate-operator"] {
        assert!(cargo.contains(flag), "release build lacks {flag}: {cargo}");
    }
    let runtime_base = &stages[1].base;
    assert!(runtime_base.starts_with("gcr.io/distroless/cc-debian12"), "runtime base {runtime_base}");
    assert!(!stages[1].steps.iter().any(|(k, _)| k == "RUN"), "the runtime stage has no shell, so it can run nothing");
}

#[test]
fn runtime_stage_copies_the_release_binaries_and_runs_as_a_numeric_non_root_user() {
    let stages = stages(&dockerfile());
    let runtime = &stages.last().expect("a runtime stage").steps;
    let copies: Vec<(String, String)> = runtime
        .iter()
        .filter(|(k, _)| k == "COPY")
        .map(|(_, args)| {
            let words: Vec<&str> = args.split_whitespace().collect();
            assert_eq!(words.len(), 3, "COPY --from=build SRC DEST: {args}");
            assert_eq!(words[0], "--from=build", "{args}");
            (words[1].to_string(), words[2].to_string())
        })
        .collect();
    let mut copied_names = Vec::new();
    for (source, dest) in &copies {
        let relative = source.strip_prefix("/src/target/").unwrap_or_else(|| panic!("{source} is not a build output"));
        let built = target_dir().join(relative);
        let name = built.file_name().and_then(|n| n.to_str()).expect("a file name").to_string();
        let built = release_binary(&name);
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&built).expect("metadata").permissions());
        assert!(mode & 0o111 != 0, "{} is not executable", built.display());
        assert_eq!(dest, &format!("/usr/local/bin/{name}"), "destination of {source}");
        copied_names.push(name);
    }
    copied_names.sort();
    assert_eq!(copied_names, ["memgate-gateway", "memgate-operator"]);

    let user = runtime.iter().rev().find(|(k, _)| k == "USER").map(|(_, a)| a.clone()).expect("a USER");
    let ids: Vec<u32> = user.split(':').map(|id| id.parse().expect("numeric uid:gid")).collect();
    assert_eq!(ids.len(), 2, "USER uid:gid, got {user}");
    assert!(ids.iter().all(|id| *id != 0), "USER must not be root: {user}");

    let entrypoint = runtime.iter().rev().find(|(k, _)| k == "ENTRYPOINT").map(|(_, a)| a.clone()).expect("ENTRYPOINT");
    let argv: Vec<String> = serde_json::from_str(&entrypoint).expect("exec-form ENTRYPOINT (no shell)");
    assert_eq!(argv, ["/usr/local/bin/memgate-operator"]);
}

#[test]
fn release_binaries_start_and_report_the_image_version() {
    let version_default = instructions(&dockerfile())
        .into_iter()
        .find_map(|(k, args)| (k == "ARG").then_some(args).and_then(|a| a.strip_prefix("VERSION=").map(str::to_string)))
        .expect("ARG VERSION=<default>");
    assert_eq!(version_default, env!("CARGO_PKG_VERSION"), "the image's VERSION default is the workspace version");
    for name in ["memgate-gateway", "memgate-operator"] {
        let output = Command::new(release_binary(name)).arg("--version").output().expect("runs");
        assert!(output.status.success(), "{name} --version failed");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(printed.trim(), format!("{name} {version_default}"));
    }
}

#[test]
fn release_binaries_need_only_the_libraries_distroless_cc_ships() {
    for name in ["memgate-gateway", "memgate-operator"] {
        let output = Command::new("ldd").arg(release_binary(name)).output().expect("ldd runs");
        assert!(output.status.success(), "ldd {name} failed");
        let listing = String::from_utf8_lossy(&output.stdout);
        for line in listing.lines() {
            let library = line.split_whitespace().next().unwrap_or_default();
            let file = Path::new(library).file_name().and_then(|f| f.to_str()).unwrap_or(library);
            assert!(
                DISTROLESS_CC_LIBRARIES.contains(&file),
                "{name} needs {library}, which gcr.io/distroless/cc-debian12 does not ship"
            );
        }
    }
}
