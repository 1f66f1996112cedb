//! Rendering the Nexent plugin directories of a real config folder: which providers get one, what
//! `plugin.yaml` says (read back with a YAML parser), and that no credential value is rendered.

use memgate_gateway::config::load_dir;
use memgate_gateway::plugin::{
    CLASS_NAME, ENTRY_POINT, ENTRY_SOURCE, MANIFEST_FILE, MARKER_FILE, MARKER_TEXT, PLUGIN_VERSION, PluginDir,
    gateway_url, render_all,
};
use serde_json::{Value, json};

const UPSTREAM_KEY: &str = "UPSTREAM-KEY-plugin-0b1f";
const CALLER_TOKEN: &str = "CALLER-TOKEN-plugin-7e2d";
const GATEWAY: &str = "http://memgate-gateway.agents.svc:8080";

fn provider(name: &str, dialect: &str, enabled: bool, nexent: &str, access: &str) -> String {
    format!(
        "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: {name}, namespace: agents}}\nspec:\n  \
         enabled: {enabled}\n  dialect: {{builtin: {dialect}}}\n  endpoint: {{origin: \"http://127.0.0.1:9\", \
         allowInsecureHttp: true}}\n  credentials: {{secretRef: {{name: upstream, key: api-key}}}}\n  \
         scope: {{userId: repository-memory, agentId: qwen-code}}\n  nexent: {nexent}\n  access: {access}\n"
    )
}

fn rendered() -> Vec<PluginDir> {
    let dir = tempfile::tempdir().expect("tempdir");
    let anonymous = "{anonymous: true}";
    let bearer = "{bearerToken: {secretRef: {name: callers, key: token}}}";
    let oss = "mem0-oss-rest-2026-08";
    let documents = [
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: upstream, namespace: agents}}\nstringData: {{api-key: {UPSTREAM_KEY}}}\n"
        ),
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: callers, namespace: agents}}\nstringData: {{token: {CALLER_TOKEN}}}\n"
        ),
        provider("both", oss, true, "{search: true, ingest: true}", bearer),
        provider("search-only", oss, true, "{search: true}", anonymous),
        provider("no-nexent", oss, true, "{search: false}", anonymous),
        provider("switched-off", oss, false, "{search: true, ingest: true}", anonymous),
    ];
    std::fs::write(dir.path().join("config.yaml"), documents.join("---\n")).expect("write");
    let snapshot = load_dir(dir.path()).expect("valid config");
    render_all(&snapshot, GATEWAY).expect("renders")
}

fn file<'a>(plugin: &'a PluginDir, name: &str) -> &'a str {
    plugin.files.iter().find(|(n, _)| *n == name).map(|(_, text)| text.as_str()).expect("file present")
}

fn manifest(plugin: &PluginDir) -> Value {
    serde_saphyr::from_str(file(plugin, MANIFEST_FILE)).expect("plugin.yaml is YAML")
}

#[test]
fn one_directory_per_provider_serving_nexent() {
    let plugins = rendered();
    let names: Vec<&str> = plugins.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["memgate-both", "memgate-search-only"], "disabled and non-Nexent providers get none");
    for plugin in &plugins {
        let files: Vec<&str> = plugin.files.iter().map(|(name, _)| *name).collect();
        assert_eq!(files, [MANIFEST_FILE, ENTRY_POINT, MARKER_FILE]);
        assert_eq!(file(plugin, ENTRY_POINT), ENTRY_SOURCE);
        assert_eq!(file(plugin, MARKER_FILE), MARKER_TEXT);
    }
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../nexent-plugin/memgate_plugin.py"))
        .expect("entry file");
    assert_eq!(ENTRY_SOURCE, on_disk, "the binary embeds nexent-plugin/memgate_plugin.py");
}

#[test]
fn manifest_has_the_nexent_keys_and_ingestible_only_when_ingest_is_allowed() {
    let plugins = rendered();
    let both = manifest(&plugins[0]);
    assert_eq!(
        both,
        json!({
            "name": "memgate-both",
            "version": PLUGIN_VERSION,
            "entry_point": "memgate_plugin.py",
            "class_name": CLASS_NAME,
            "implements": ["searchable", "ingestible"],
            "description": "External memory search and ingest through the memgate gateway (provider both).",
            "config_schema": [
                {"key": "gateway_url", "label": "memgate gateway URL", "type": "string", "required": true, "default": GATEWAY},
                {"key": "provider", "label": "memgate provider name", "type": "string", "required": true, "default": "both"},
                {"key": "access_token", "label": "Access token for the memgate gateway", "type": "secret", "required": true, "default": ""}
            ]
        })
    );
    let search_only = manifest(&plugins[1]);
    assert_eq!(search_only["implements"], json!(["searchable"]));
    assert_eq!(search_only["config_schema"][2]["required"], false, "anonymous provider: the token is optional");
    // The version is a quoted string in the text itself, as Nexent's manifest rule asks.
    let text = file(&plugins[0], MANIFEST_FILE);
    assert!(text.contains(&format!("\nversion: \"{PLUGIN_VERSION}\"\n")), "{text}");
    assert!(PLUGIN_VERSION.split('.').count() == 3 && PLUGIN_VERSION.split('.').all(|p| p.parse::<u32>().is_ok()));
}

#[test]
fn no_credential_value_is_rendered() {
    for plugin in rendered() {
        for (name, text) in &plugin.files {
            for secret in [UPSTREAM_KEY, CALLER_TOKEN, "127.0.0.1:9"] {
                assert!(!text.contains(secret), "{secret} in {}/{name}", plugin.name);
            }
        }
    }
}

#[test]
fn gateway_url_is_checked() {
    assert_eq!(gateway_url(&format!("{GATEWAY}/")).as_deref(), Ok(GATEWAY));
    assert!(gateway_url("http://user:secret@gw:8080").is_err_and(|e| !e.to_string().contains("secret")));
}
