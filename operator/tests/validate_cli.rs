//! `memgate-operator validate` and `crds`, run as the real binary on the repository's examples.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memgate-operator")).args(args).current_dir(repo()).output().expect("binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every `*.yaml`/`*.yml` file under `dir`, recursively, in a stable order.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A copy of `examples/` with every `REPLACE-ME-…` credential filled in, as the README asks before
/// applying (the shipped files are refused until then: see the next test).
fn filled_in_examples() -> tempfile::TempDir {
    let copy = tempfile::tempdir().expect("tempdir");
    let source = repo().join("examples");
    for file in yaml_files(&source) {
        let target = copy.path().join("examples").join(file.strip_prefix(&source).expect("below examples"));
        std::fs::create_dir_all(target.parent().expect("a folder")).expect("folder");
        let text = std::fs::read_to_string(&file).expect("readable").replace("REPLACE-ME-", "filled-in-");
        std::fs::write(target, text).expect("written");
    }
    copy
}

/// The examples as shipped carry documentation placeholders where credentials go: validate refuses
/// every one of them (and nothing else), naming the Secret and key, never the value.
#[test]
fn validate_refuses_the_placeholder_credentials_of_the_shipped_examples() {
    let out = run(&["validate", "examples/platform"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 5, "{text}");
    assert!(lines.iter().all(|l| l.contains("the credential is a documentation placeholder")), "{text}");
    assert!(!text.contains("REPLACE-ME-mem0"), "the value is never printed: {text}");
}

/// `memgate-operator validate --standalone examples/` (with the placeholders filled in) is the
/// acceptance check of the examples: every
/// folder (quickstart, cluster, oauth, gitops, platform) is valid on its own and together with the
/// others (no name is declared twice), and the run checked every memgate document of every file.
/// The cluster folders are valid as cluster objects too (loopback destinations refused); the
/// quickstart and OAuth folders are a standalone gateway's (their upstream is on loopback).
#[test]
fn validate_examples_folder_exits_0_having_checked_every_document() {
    let files = yaml_files(&repo().join("examples"));
    let platform: Vec<_> = files
        .iter()
        .filter_map(|f| f.strip_prefix(repo().join("examples/platform")).ok())
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    let want = [
        "00-namespace.yaml",
        "custom-dialect.yaml",
        "mem0-oss.yaml",
        "mem0-platform.yaml",
        "nexent-plugin-claim.yaml",
        "polardb.yaml",
        "secrets.yaml",
    ];
    assert_eq!(platform, want, "examples/platform changed: update this test and the README");
    let mut expected = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable");
        let docs = memgate_crds::manifest::documents(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        assert!(!docs.is_empty(), "{}: no document", file.display());
        expected += docs
            .iter()
            .filter(|(_, d)| matches!(d["kind"].as_str(), Some("MemoryProvider" | "DialectPreset" | "MemoryGateway")))
            .count();
        assert!(text.starts_with('#'), "{}: must start with a comment saying what it is", file.display());
    }
    let filled = filled_in_examples();
    let examples = filled.path().join("examples");
    let examples = examples.to_string_lossy();
    let out = run(&["validate", "--standalone", &examples]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}{stderr}", stdout(&out));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr.contains(&format!("{expected} memgate object(s) checked: 0 problem(s), 0 unreadable input(s)")),
        "expected {expected} memgate objects: {stderr}"
    );
    // Each folder on its own too (a folder must not depend on a preset or Secret of another).
    for (folder, standalone) in [
        ("examples/quickstart", true),
        ("examples/cluster", false),
        ("examples/oauth", true),
        ("examples/gitops", false),
        ("examples/platform", false),
        ("examples/gateway", false),
    ] {
        let folder = filled.path().join(folder).to_string_lossy().into_owned();
        let out = if standalone { run(&["validate", "--standalone", &folder]) } else { run(&["validate", &folder]) };
        assert_eq!((out.status.code(), stdout(&out)), (Some(0), String::new()), "{folder}");
    }
    let quickstart = run(&["validate", "examples/quickstart"]);
    assert_eq!(quickstart.status.code(), Some(1), "loopback is refused for a cluster: {}", stdout(&quickstart));
    assert!(stdout(&quickstart).contains("spec.endpoint.origin: must not name loopback"), "{}", stdout(&quickstart));
}

/// The walk of `validate examples/` reaches every YAML file, those without memgate objects
/// (Namespace, Secrets, the plugin claim) included: a copy of the folder with an unparsable last
/// document in every file names each file.
#[test]
fn validate_examples_folder_reads_every_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = repo().join("examples");
    let files = yaml_files(&source);
    for file in &files {
        let relative = file.strip_prefix(&source).expect("under examples/");
        let copy = dir.path().join(relative);
        std::fs::create_dir_all(copy.parent().expect("parent")).expect("mkdir");
        let text = std::fs::read_to_string(file).expect("readable");
        std::fs::write(&copy, format!("{text}\n---\nkind: [MemoryProvider\n")).expect("write");
    }
    let out = run(&["validate", &dir.path().to_string_lossy()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    for file in &files {
        let copy = dir.path().join(file.strip_prefix(&source).expect("under examples/"));
        assert!(text.contains(&format!("{}: ", copy.display())), "{} was not read:\n{text}", file.display());
    }
}

#[test]
fn every_invalid_example_exits_1_naming_its_field() {
    let dir = repo().join("testdata/invalid");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("testdata/invalid") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("readable");
        let field = text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).expect("first line names the field");
        let file = path.to_string_lossy().into_owned();
        let out = run(&["validate", "examples/gitops/team-dialect.yaml", &file]);
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{file}: {text}");
        assert!(text.contains(&format!(": {field}: ")), "{file} should name {field}:\n{text}");
        assert!(text.lines().all(|l| l.starts_with(&file)), "problems belong to {file}:\n{text}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} invalid examples");
}

#[test]
fn output_line_names_file_document_kind_field() {
    let out = run(&["validate", "testdata/invalid/timeout-range.yaml"]);
    assert_eq!(
        stdout(&out).trim(),
        "testdata/invalid/timeout-range.yaml: document 0: MemoryProvider/timeout-range: spec.timeoutMs: must be between 1 and 30000"
    );
}

#[test]
fn secret_values_are_never_echoed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("leak.yaml");
    let doc = std::fs::read_to_string(repo().join("examples/quickstart/mem0-oss.yaml"))
        .expect("example")
        .replace("api-key: dev-only-key", "api-key: \"${SUPER_SECRET_TOKEN_VALUE}\"");
    std::fs::write(&file, doc).expect("write");
    let out = run(&["validate", &file.to_string_lossy()]);
    let all = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("spec.credentials.secretRef"), "{all}");
    assert!(!all.contains("SUPER_SECRET_TOKEN_VALUE"), "{all}");
}

#[test]
fn unparsable_or_missing_input_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("broken.yaml");
    std::fs::write(&file, "kind: [MemoryProvider\n").expect("write");
    assert_eq!(run(&["validate", &file.to_string_lossy()]).status.code(), Some(2));
    assert_eq!(run(&["validate", "does/not/exist.yaml"]).status.code(), Some(2));
}

#[test]
fn multi_document_index_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("multi.yaml");
    let good = std::fs::read_to_string(repo().join("examples/quickstart/mem0-oss.yaml")).expect("example");
    let bad = std::fs::read_to_string(repo().join("testdata/invalid/no-access.yaml")).expect("example");
    std::fs::write(&file, format!("{good}\n---\n{bad}")).expect("write");
    let out = run(&["validate", &file.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains(": document 2: MemoryProvider/no-access: spec.access: "), "{}", stdout(&out));
}

#[test]
fn readme_examples_validate_as_documented() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let blocks: Vec<&str> = readme.split("```yaml\n").skip(1).filter_map(|b| b.split("\n```").next()).collect();
    let (invalid, valid): (Vec<&str>, Vec<&str>) = blocks.into_iter().partition(|b| b.starts_with("# invalid: "));
    assert!(valid.len() >= 2 && !invalid.is_empty(), "README lost its examples");
    let dir = tempfile::tempdir().expect("tempdir");
    let valid_file = dir.path().join("valid.yaml");
    std::fs::write(&valid_file, valid.join("\n---\n")).expect("write");
    let out = run(&["validate", &valid_file.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "README's valid examples: {}", stdout(&out));
    for (i, block) in invalid.iter().enumerate() {
        let field = block.lines().next().and_then(|l| l.strip_prefix("# invalid: ")).expect("field");
        let file = dir.path().join(format!("invalid-{i}.yaml"));
        std::fs::write(&file, block).expect("write");
        let out = run(&["validate", &valid_file.to_string_lossy(), &file.to_string_lossy()]);
        assert_eq!(out.status.code(), Some(1), "README invalid example {i}");
        assert!(stdout(&out).contains(&format!(": {field}: ")), "README invalid example {i}: {}", stdout(&out));
    }
}

#[test]
fn crds_command_prints_the_committed_yaml() {
    let out = run(&["crds"]);
    assert_eq!(out.status.code(), Some(0));
    let committed = std::fs::read_to_string(repo().join("crds/memgate.io.yaml")).expect("committed CRDs");
    assert_eq!(stdout(&out), committed);
}

#[test]
fn folders_are_walked_once_skipping_hidden_mount_folders_and_loops() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::copy(repo().join("examples/quickstart/mem0-oss.yaml"), root.join("mem0-oss.yaml")).expect("copy");
    // A mounted ConfigMap repeats its files under `..data`; a loop points back at the folder.
    std::fs::create_dir(root.join("..data")).expect("mkdir");
    std::fs::copy(repo().join("examples/quickstart/mem0-oss.yaml"), root.join("..data/mem0-oss.yaml")).expect("copy");
    std::os::unix::fs::symlink(root, root.join("a")).expect("symlink");
    std::os::unix::fs::symlink(root, root.join("b")).expect("symlink");
    // Not memgate's: Helm values and a CI workflow are left alone.
    std::fs::write(root.join("values.yaml"), "replicaCount: 2\nimage: {tag: v1}\n").expect("write");
    let root_arg = root.to_string_lossy().into_owned();
    let file_arg = root.join("mem0-oss.yaml").to_string_lossy().into_owned();
    let out = run(&["validate", "--standalone", &root_arg, &file_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 memgate object(s) checked"));
}

#[test]
fn a_folder_without_yaml_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), "nothing here").expect("write");
    let out = run(&["validate", &dir.path().to_string_lossy()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("no *.yaml or *.yml files found"));
}

#[test]
fn every_problem_of_a_field_is_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("path.yaml");
    let doc = std::fs::read_to_string(repo().join("testdata/invalid/basepath-traversal.yaml"))
        .expect("example")
        .replace("/tenant/%2e%2e/admin", "/a//../b?x");
    std::fs::write(&file, doc).expect("write");
    let out = run(&["validate", &file.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out).matches("spec.endpoint.basePath: ").count(), 3, "{}", stdout(&out));
}

/// A pull request can add `evil.yaml -> /dev/zero` or a FIFO named `*.yaml`: neither is read (no
/// memory growth, no blocking), both are named, and the run ends as unreadable input.
#[cfg(unix)]
#[test]
fn devices_and_fifos_are_refused_without_reading_or_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("evil.yaml")).expect("symlink");
    let made = Command::new("mkfifo").arg(dir.path().join("pipe.yaml")).status().expect("mkfifo");
    assert!(made.success());
    std::fs::copy(repo().join("examples/quickstart/mem0-oss.yaml"), dir.path().join("ok.yaml")).expect("copy");
    let mut child = Command::new(env!("CARGO_BIN_EXE_memgate-operator"))
        .args(["validate", &dir.path().to_string_lossy()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("binary runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("validate blocked on a FIFO or kept reading /dev/zero");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("evil.yaml: not a regular file (a device)"), "{text}");
    assert!(text.contains("pipe.yaml: not a regular file (a FIFO)"), "{text}");
}

/// Bytes are capped per file and in total, with a message naming the file and the flag.
#[test]
fn oversized_input_is_unreadable_and_names_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let example = std::fs::read_to_string(repo().join("examples/quickstart/mem0-oss.yaml")).expect("example");
    std::fs::write(dir.path().join("a.yaml"), &example).expect("write");
    std::fs::write(dir.path().join("b.yaml"), &example).expect("write");
    let path = dir.path().to_string_lossy().into_owned();
    let small = (example.len() - 1).to_string();
    let out = run(&["validate", "--max-file-bytes", &small, &path]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains(&format!("a.yaml: larger than the limit of {small} bytes per file (--max-file-bytes)"))
    );
    let total = (example.len() + 1).to_string();
    let out = run(&["validate", "--max-total-bytes", &total, &path]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("b.yaml: reading it would exceed the limit") && text.contains("--max-total-bytes"), "{text}");
}

/// One 50 MiB memgate document: refused by the default per-file limit without being parsed, and,
/// when a larger limit lets it through, checked in memory a small multiple of its size (the
/// process runs under an address-space limit of 8 times the file; before the bound it needed 12).
#[cfg(unix)]
#[test]
fn a_50_mib_document_stays_within_a_small_multiple_of_its_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let example = std::fs::read_to_string(repo().join("examples/quickstart/mem0-oss.yaml")).expect("example");
    let huge = example.replacen("repository-memory", &"x".repeat(50 * 1024 * 1024), 1);
    assert!(huge.len() > 50 * 1024 * 1024, "the example must hold the scope id");
    let file = dir.path().join("huge.yaml");
    std::fs::write(&file, huge).expect("write");
    let binary = env!("CARGO_BIN_EXE_memgate-operator");
    let limited = |extra: &str| {
        let script = format!("ulimit -v {}; exec \"$0\" validate {extra} \"$1\"", 8 * 50 * 1024);
        Command::new("sh").args(["-c", &script, binary, &file.to_string_lossy()]).output().expect("sh runs")
    };
    let out = limited("");
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).contains("--max-file-bytes"), "{}", stdout(&out));
    let out = limited("--max-file-bytes 67108864");
    assert_eq!(out.status.code(), Some(1), "must finish within the memory limit: {}", stdout(&out));
    assert!(stdout(&out).contains("<document>: is larger than"), "{}", stdout(&out));
}

/// What the operator refuses in a cluster, `validate` refuses before anything reaches one: a
/// metadata destination (everywhere), loopback (unless `--standalone`), a Secret without the
/// credential label, and a destination outside `--allowed-upstream-origin`.
#[test]
fn validate_refuses_destinations_and_secrets_as_the_operator_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = |name: &str, origin: &str, secret: &str| {
        format!(
            "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
             dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"{origin}\", allowInsecureHttp: true}}\n  \
             credentials: {{secretRef: {{name: {secret}, key: api-key}}}}\n  scope: {{userId: u, agentId: a}}\n  access: {{anonymous: true}}\n"
        )
    };
    let secret = |name: &str, labels: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: agents{labels}}}\nstringData: {{api-key: real-value}}\n"
        )
    };
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path.to_string_lossy().into_owned()
    };
    let labelled = ", labels: {memgate.io/credential: \"true\"}";
    let local =
        write("local.yaml", [provider("local", "http://127.0.0.1:18888", "k"), secret("k", labelled)].join("---\n"));
    let out = run(&["validate", &local]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("spec.endpoint.origin: must not name loopback"), "{}", stdout(&out));
    assert_eq!(run(&["validate", "--standalone", &local]).status.code(), Some(0));

    let metadata = write("metadata.yaml", provider("meta", "http://169.254.169.254", "k"));
    let out = run(&["validate", "--standalone", &metadata]);
    assert_eq!(out.status.code(), Some(1), "refused wherever memgate runs: {}", stdout(&out));
    assert!(stdout(&out).contains("spec.endpoint.origin: must not name a link-local address"), "{}", stdout(&out));

    let unlabelled =
        write("unlabelled.yaml", [provider("thief", "https://mem0.example.com", "db"), secret("db", "")].join("---\n"));
    let out = run(&["validate", &unlabelled]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("spec.credentials.secretRef.name: Secret \"agents/db\" is not available to memgate"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("real-value"));

    let outside = write("outside.yaml", provider("elsewhere", "https://mem0.other.org", "absent"));
    let out = run(&["validate", "--allowed-upstream-origin", "*.example.com", &outside]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("outside the destinations the platform team allows"), "{}", stdout(&out));
    assert_eq!(run(&["validate", "--allowed-upstream-origin", "*.other.org", &outside]).status.code(), Some(0));
    assert_eq!(run(&["validate", "--allowed-upstream-origin", "not a host", &outside]).status.code(), Some(2));
}
