//! The memgate CRDs on a real kube-apiserver: they install, their structural schemas and CEL rules
//! compile within the server's cost budget, valid examples are stored, and every single-object rule
//! refuses its invalid example at admission with the message that names the field.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use memgate_crds::manifest::{Object, classify, documents};
use memgate_crds::{DialectPreset, MemoryProvider};
use memgate_e2e::ControlPlane;

fn repo_file(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Install both CRDs by server-side apply and wait until the server serves them.
async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in memgate_crds::crd::all() {
        let name = crd.metadata.name.clone().expect("CRD name");
        crds.patch(&name, &PatchParams::apply("memgate-e2e").force(), &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("the API server refused CRD {name}: {e}"));
    }
    for _ in 0..100 {
        let mut established = 0;
        for crd in memgate_crds::crd::all() {
            let name = crd.metadata.name.clone().expect("CRD name");
            let live = crds.get(&name).await.expect("CRD readable");
            let ok = live
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established += usize::from(ok);
        }
        if established == 2 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the memgate CRDs never became Established");
}

async fn setup() -> (Client, String) {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    install_crds(&client).await;
    let ns = cp.new_namespace("crds").await.expect("namespace");
    (client, ns)
}

fn objects(text: &str) -> Vec<Object> {
    documents(text).expect("yaml").into_iter().map(|(_, v)| classify(&v).expect("parses")).collect()
}

/// Create one object; Err carries the API server's message.
async fn create(client: &Client, ns: &str, object: Object, rename: Option<&str>) -> Result<(), String> {
    let pp = PostParams::default();
    match object {
        Object::MemoryProvider(mut p) => {
            p.meta_mut().namespace = Some(ns.to_string());
            Api::<MemoryProvider>::namespaced(client.clone(), ns).create(&pp, &p).await.map(drop)
        }
        Object::DialectPreset(mut d) => {
            if let Some(name) = rename {
                d.meta_mut().name = Some(name.to_string());
            }
            Api::<DialectPreset>::all(client.clone()).create(&pp, &d).await.map(drop)
        }
        Object::Secret(_) | Object::Other => Ok(()),
    }
    .map_err(|e| e.to_string())
}

#[tokio::test]
async fn quickstart_objects_are_accepted_and_defaulted_by_the_server() {
    let (client, ns) = setup().await;
    let preset = objects(&repo_file("examples/gitops/team-dialect.yaml")).into_iter().next().expect("preset");
    create(&client, &ns, preset, Some(&format!("team-search-{ns}"))).await.expect("preset accepted");
    // Send the provider exactly as written (no serde defaults filled in), then read it back raw:
    // every default must come from the CRD schema, applied by the API server.
    let resource = ApiResource::erase::<MemoryProvider>(&());
    let api = Api::<DynamicObject>::namespaced_with(client, &ns, &resource);
    for (_, mut value) in documents(&repo_file("examples/quickstart/mem0-oss.yaml")).expect("yaml") {
        if value["kind"] != "MemoryProvider" {
            continue;
        }
        value["metadata"]["namespace"] = serde_json::Value::String(ns.clone());
        let object: DynamicObject = serde_json::from_value(value).expect("an object");
        api.create(&PostParams::default(), &object).await.expect("provider accepted");
    }
    let raw = api.get("repo-memory").await.expect("stored");
    let spec = &raw.data["spec"];
    assert_eq!(spec["enabled"], true, "{spec}");
    assert_eq!(spec["endpoint"]["basePath"], "", "{spec}");
    assert_eq!(spec["access"]["bindUserIdToSubject"], false, "{spec}");
    assert_eq!(spec["nexent"]["pluginClaim"], serde_json::Value::Null, "{spec}");
    let written = documents(&repo_file("examples/quickstart/mem0-oss.yaml")).expect("yaml");
    assert!(
        written[0].1["spec"]["endpoint"].get("basePath").is_none(),
        "the example must leave basePath to the default"
    );
}

#[tokio::test]
async fn cel_rules_refuse_every_single_object_violation_naming_the_field() {
    let (client, ns) = setup().await;
    for (example, needle) in [
        ("origin-with-path", "spec.endpoint.origin"),
        ("http-without-opt-in", "spec.endpoint.origin"),
        ("basepath-traversal", "spec.endpoint.basePath"),
        ("two-dialects", "spec.dialect"),
        ("reserved-builtin", "spec.dialect.builtin"),
        ("timeout-range", "spec.timeoutMs"),
        ("no-access", "spec.access"),
        ("custom-preset-ingest", "spec.nexent.ingest"),
        ("builtin-name-taken", "metadata.name"),
        ("get-with-json-body", "spec.search"),
        ("bind-without-service-accounts", "spec.access.bindUserIdToSubject"),
        ("scope-whitespace", "spec.scope.userId"),
    ] {
        let text = repo_file(&format!("testdata/invalid/{example}.yaml"));
        let object = objects(&text).into_iter().next().expect("one object");
        let err = create(&client, &ns, object, None).await.expect_err(example);
        assert!(err.contains(needle), "{example}: the API server's message should name {needle}: {err}");
    }
}

#[tokio::test]
async fn dialect_preset_spec_is_immutable() {
    let (client, ns) = setup().await;
    let text = repo_file("examples/gitops/team-dialect.yaml");
    let name = format!("immutable-{ns}");
    let preset = objects(&text).into_iter().next().expect("preset");
    create(&client, &ns, preset, Some(&name)).await.expect("created");
    let api = Api::<DialectPreset>::all(client);
    let patch = serde_json::json!({"spec": {"search": {"path": "/api/v2/search"}}});
    let err = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.expect_err("spec must not change");
    assert!(err.to_string().contains("spec is immutable"), "{err}");
    let labels = serde_json::json!({"metadata": {"labels": {"team": "platform"}}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&labels)).await.expect("metadata may change");
}
