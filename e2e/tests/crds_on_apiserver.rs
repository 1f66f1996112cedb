//! The memgate CRDs on a real kube-apiserver: they install, their structural schemas and CEL rules
//! compile within the server's cost budget, valid examples are stored, and every single-object rule
//! refuses its invalid example at admission with the message that names the field.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use memgate_crds::manifest::{Object, classify, documents};
use memgate_crds::{DialectPreset, MemoryGateway, MemoryProvider};
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
        if established == memgate_crds::crd::all().len() {
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
        Object::MemoryGateway(mut g) => {
            g.meta_mut().namespace = Some(ns.to_string());
            Api::<MemoryGateway>::namespaced(client.clone(), ns).create(&pp, &g).await.map(drop)
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
        ("limits-range", "spec.limits.perCaller.requestsPerMinute"),
        ("no-access", "spec.access"),
        ("custom-preset-ingest", "spec.nexent.ingest"),
        ("builtin-name-taken", "metadata.name"),
        ("get-with-json-body", "spec.search"),
        ("bind-without-service-accounts", "spec.access.bindUserIdToSubject"),
        ("scope-whitespace", "spec.scope.userId"),
        ("gateway-replicas-and-autoscaling", "set replicas or autoscaling, not both"),
        ("gateway-public-url-query", "spec.publicURL"),
        ("gateway-privileged", "spec.podTemplate.spec.containerSecurityContext.privileged"),
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

/// The API resource of a kind `examples/platform/` holds.
fn platform_resource(kind: &str) -> ApiResource {
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret};
    match kind {
        "Namespace" => ApiResource::erase::<Namespace>(&()),
        "Secret" => ApiResource::erase::<Secret>(&()),
        "PersistentVolumeClaim" => ApiResource::erase::<PersistentVolumeClaim>(&()),
        "DialectPreset" => ApiResource::erase::<DialectPreset>(&()),
        "MemoryProvider" => ApiResource::erase::<MemoryProvider>(&()),
        other => panic!("examples/platform holds a {other}: teach this test its resource"),
    }
}

/// Whether everything `sent` states is in `stored` (the server may add defaults, never change a
/// value it was given).
fn stored_as_sent(sent: &serde_json::Value, stored: &serde_json::Value) -> bool {
    match (sent, stored) {
        (serde_json::Value::Object(sent), serde_json::Value::Object(stored)) => {
            sent.iter().all(|(k, v)| stored.get(k).is_some_and(|s| stored_as_sent(v, s)))
        }
        _ => sent == stored,
    }
}

/// What a platform team runs, `kubectl apply -f examples/platform/`, done by server-side apply
/// against the real API server with the memgate CRDs installed: every object (Namespace, Secrets,
/// plugin claim, DialectPreset, MemoryProviders) is admitted, CEL rules included, and stored as
/// written.
#[tokio::test]
async fn platform_examples_are_admitted_and_stored_as_written() {
    let cp = ControlPlane::shared().await.expect("control plane");
    let client = cp.client().expect("client");
    install_crds(&client).await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/platform");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/platform")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in &files {
        let name = file.file_name().expect("file name").to_string_lossy().into_owned();
        for (_, value) in documents(&std::fs::read_to_string(file).expect("readable")).expect("yaml") {
            docs.push((name.clone(), value));
        }
    }
    // The Namespace first, as `kubectl apply -f` of a folder would need on a second try.
    docs.sort_by_key(|(_, v)| v["kind"] != "Namespace");
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for (file, value) in &docs {
        let kind = value["kind"].as_str().expect("kind").to_string();
        let name = value["metadata"]["name"].as_str().expect("name").to_string();
        let resource = platform_resource(&kind);
        let api: Api<DynamicObject> = match value["metadata"]["namespace"].as_str() {
            Some(ns) => {
                assert_eq!(ns, "agents", "{file}: {kind}/{name}: examples/platform lives in namespace agents");
                Api::namespaced_with(client.clone(), ns, &resource)
            }
            None => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(value.clone()).expect("an object");
        api.patch(&name, &PatchParams::apply("memgate-e2e").force(), &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{file}: the API server refused {kind}/{name}: {e}"));
        let stored = api.get(&name).await.unwrap_or_else(|e| panic!("{file}: {kind}/{name} not stored: {e}"));
        if kind == "Secret" {
            // stringData is write-only: the server stores it under data.
            let secret: k8s_openapi::api::core::v1::Secret =
                Api::namespaced(client.clone(), "agents").get(&name).await.expect("Secret stored");
            let data = secret.data.unwrap_or_default();
            for (key, written) in value["stringData"].as_object().expect("stringData") {
                let written = written.as_str().expect("a string value").as_bytes();
                assert_eq!(data.get(key).map(|b| b.0.as_slice()), Some(written), "{file}: Secret/{name} key {key}");
            }
        } else if let Some(spec) = value.get("spec") {
            assert!(
                stored_as_sent(spec, &stored.data["spec"]),
                "{file}: {kind}/{name}: {spec} became {}",
                stored.data["spec"]
            );
        }
        *kinds.entry(kind).or_default() += 1;
    }
    let want =
        [("DialectPreset", 1), ("MemoryProvider", 4), ("Namespace", 1), ("PersistentVolumeClaim", 1), ("Secret", 5)];
    let want: std::collections::BTreeMap<String, usize> = want.into_iter().map(|(k, n)| (k.to_string(), n)).collect();
    assert_eq!(kinds, want, "examples/platform changed: update this test and the README");
    // A provider read back typed, with the server's defaults applied.
    let team = Api::<MemoryProvider>::namespaced(client, "agents").get("team-memory").await.expect("team-memory");
    assert_eq!(team.spec.endpoint.origin, "http://mem0.memory.svc:8888");
    assert!(team.spec.enabled && team.spec.mcp.enabled && team.spec.nexent.ingest);
}
