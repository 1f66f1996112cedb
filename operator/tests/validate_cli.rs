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

#[test]
fn quickstart_oauth_gitops_and_cluster_examples_are_valid() {
    let out = run(&["validate", "examples/quickstart", "examples/oauth", "examples/gitops"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "");
    // The cluster quickstart declares the same provider as the local one: checked on its own.
    let out = run(&["validate", "examples/cluster"]);
    assert_eq!((out.status.code(), stdout(&out)), (Some(0), String::new()));
}

#[test]
fn every_invalid_example_exits_1_naming_its_field() {
    let dir = repo().join("examples/invalid");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/invalid") {
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
    let out = run(&["validate", "examples/invalid/timeout-range.yaml"]);
    assert_eq!(
        stdout(&out).trim(),
        "examples/invalid/timeout-range.yaml: document 0: MemoryProvider/timeout-range: spec.timeoutMs: must be between 1 and 30000"
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
    let bad = std::fs::read_to_string(repo().join("examples/invalid/no-access.yaml")).expect("example");
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
    let out = run(&["validate", &root_arg, &file_arg]);
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
    let doc = std::fs::read_to_string(repo().join("examples/invalid/basepath-traversal.yaml"))
        .expect("example")
        .replace("/tenant/%2e%2e/admin", "/a//../b?x");
    std::fs::write(&file, doc).expect("write");
    let out = run(&["validate", &file.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out).matches("spec.endpoint.basePath: ").count(), 3, "{}", stdout(&out));
}
