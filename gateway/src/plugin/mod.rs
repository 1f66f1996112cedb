//! The Nexent plugin directories of a config: pure rendering here, atomic writing in [`mod@write`].
//!
//! For each served provider with Nexent search or ingest, one directory `memgate-<provider>/`
//! (`reference/nexent.md` §1):
//!
//! - `plugin.yaml`: `name: memgate-<provider>`, quoted `version` (this binary's), `entry_point:
//!   memgate_plugin.py`, `class_name`, `implements` (`searchable` when search is served,
//!   `ingestible` only when ingest is served AND the dialect has a verified write contract),
//!   `description` and `config_schema` with `gateway_url` and `provider` pre-filled as defaults and
//!   `access_token` as `type: secret` with an empty default;
//! - `memgate_plugin.py`: the Python entry file, the same for every provider, embedded from
//!   `nexent-plugin/memgate_plugin.py`;
//! - [`MARKER_FILE`]: the ownership marker ([`MARKER_TEXT`]); only directories holding it are ever
//!   replaced or removed.
//!
//! Nothing rendered holds a credential: the access token is a schema key the Nexent operator fills
//! in, never a value. `access_token` is `required: true` unless the provider allows anonymous
//! callers (then the plugin sends no `Authorization` header when it is empty, as the gateway
//! refuses a wrong token even where anonymous calls are allowed).

pub mod write;

use crate::config::{Provider, Snapshot};

pub use write::{LOCK_FILE, STAGING_DIR, WriteError, WriteReport, write_plugins};

/// Prefix of every plugin directory and plugin name.
pub const DIR_PREFIX: &str = "memgate-";
/// The manifest file name.
pub const MANIFEST_FILE: &str = "plugin.yaml";
/// The entry file name (case matters to Nexent's loader).
pub const ENTRY_POINT: &str = "memgate_plugin.py";
/// The provider class of the entry file.
pub const CLASS_NAME: &str = "MemgateMemoryProvider";
/// The plugin version: this binary's.
pub const PLUGIN_VERSION: &str = env!("CARGO_PKG_VERSION");
/// The entry file's source.
pub const ENTRY_SOURCE: &str = include_str!("../../../nexent-plugin/memgate_plugin.py");
/// The ownership marker file of a directory memgate writes.
pub const MARKER_FILE: &str = ".memgate-owned";
/// The exact content of [`MARKER_FILE`].
pub const MARKER_TEXT: &str =
    "This directory is written by `memgate-gateway write-nexent-plugins`, which replaces or removes it.\n";
/// Longest provider name that still gives a directory name within the usual 255-byte limit.
pub const MAX_PROVIDER_NAME: usize = 255 - DIR_PREFIX.len();

/// Why plugins cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// `--gateway-url` is not a usable base URL.
    #[error("the gateway URL {0}")]
    GatewayUrl(&'static str),
    /// A provider name cannot be a directory name.
    #[error(
        "provider {0:?}: the name cannot name a plugin directory (lower-case letters, digits, `-` and `.`, at most 247 characters)"
    )]
    ProviderName(String),
}

/// What a plugin directory depends on, from one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginSource {
    /// Provider name.
    pub provider: String,
    /// Nexent search served.
    pub search: bool,
    /// Nexent ingest served and writable (verified write contract).
    pub ingest: bool,
    /// Anonymous callers allowed (the access token is then optional).
    pub anonymous: bool,
}

impl PluginSource {
    /// The plugin source of `provider`, or `None` when it serves neither Nexent operation.
    pub fn of(provider: &Provider) -> Option<PluginSource> {
        let source = PluginSource {
            provider: provider.name.clone(),
            search: provider.nexent_search,
            ingest: provider.nexent_ingest && provider.write.is_some(),
            anonymous: provider.access.anonymous && !provider.access.bind_user_id_to_subject,
        };
        (source.search || source.ingest).then_some(source)
    }
}

/// One rendered plugin directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginDir {
    /// Directory (and plugin) name: `memgate-<provider>`.
    pub name: String,
    /// Files as `(name, content)`, manifest first.
    pub files: Vec<(&'static str, String)>,
}

/// `raw` as the gateway base URL the plugins default to: `http` or `https`, a host, no user info,
/// query or fragment; a trailing `/` is dropped.
pub fn gateway_url(raw: &str) -> Result<String, RenderError> {
    let url = url::Url::parse(raw.trim()).map_err(|_| RenderError::GatewayUrl("is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(RenderError::GatewayUrl("must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(RenderError::GatewayUrl("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(RenderError::GatewayUrl("must not hold user info (credentials belong in the access token)"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(RenderError::GatewayUrl("must not have a query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// The plugin directories of every provider of `snapshot` serving Nexent, by name; `gateway_url`
/// as checked by [`gateway_url`].
pub fn render_all(snapshot: &Snapshot, gateway_url: &str) -> Result<Vec<PluginDir>, RenderError> {
    snapshot.providers.values().filter_map(|p| PluginSource::of(p)).map(|s| render(&s, gateway_url)).collect()
}

/// The plugin directory of `source`.
pub fn render(source: &PluginSource, gateway_url: &str) -> Result<PluginDir, RenderError> {
    let provider = &source.provider;
    let valid = !provider.is_empty()
        && provider.len() <= MAX_PROVIDER_NAME
        && provider.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && provider.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    if !valid {
        return Err(RenderError::ProviderName(provider.clone()));
    }
    let name = format!("{DIR_PREFIX}{provider}");
    let files = vec![
        (MANIFEST_FILE, manifest(source, &name, gateway_url)),
        (ENTRY_POINT, ENTRY_SOURCE.to_string()),
        (MARKER_FILE, MARKER_TEXT.to_string()),
    ];
    Ok(PluginDir { name, files })
}

/// A YAML double-quoted scalar (JSON string syntax is valid YAML).
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

fn manifest(source: &PluginSource, name: &str, gateway_url: &str) -> String {
    let mut implements = Vec::new();
    if source.search {
        implements.push("searchable");
    }
    if source.ingest {
        implements.push("ingestible");
    }
    let operations = match (source.search, source.ingest) {
        (true, true) => "search and ingest",
        (true, false) => "search",
        _ => "ingest",
    };
    let description =
        format!("External memory {operations} through the memgate gateway (provider {}).", source.provider);
    let fields = [
        ("gateway_url", "memgate gateway URL", "string", true, gateway_url),
        ("provider", "memgate provider name", "string", true, source.provider.as_str()),
        ("access_token", "Access token for the memgate gateway", "secret", !source.anonymous, ""),
    ];
    let mut out = String::from(
        "# Written by `memgate-gateway write-nexent-plugins`; replaced whenever the gateway's config changes.\n",
    );
    out.push_str(&format!("name: {}\n", quoted(name)));
    out.push_str(&format!("version: {}\n", quoted(PLUGIN_VERSION)));
    out.push_str(&format!("entry_point: {}\n", quoted(ENTRY_POINT)));
    out.push_str(&format!("class_name: {}\n", quoted(CLASS_NAME)));
    out.push_str("implements:\n");
    for operation in implements {
        out.push_str(&format!("  - {}\n", quoted(operation)));
    }
    out.push_str(&format!("description: {}\n", quoted(&description)));
    out.push_str("config_schema:\n");
    for (key, label, kind, required, default) in fields {
        out.push_str(&format!("  - key: {}\n", quoted(key)));
        out.push_str(&format!("    label: {}\n", quoted(label)));
        out.push_str(&format!("    type: {}\n", quoted(kind)));
        out.push_str(&format!("    required: {required}\n"));
        out.push_str(&format!("    default: {}\n", quoted(default)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(search: bool, ingest: bool) -> PluginSource {
        PluginSource { provider: "repo-memory".into(), search, ingest, anonymous: false }
    }

    #[test]
    fn gateway_urls_are_checked_and_normalised() {
        assert_eq!(
            gateway_url("http://memgate-gateway.agents.svc:8080/").as_deref(),
            Ok("http://memgate-gateway.agents.svc:8080")
        );
        assert_eq!(gateway_url(" https://gw.example/base/ ").as_deref(), Ok("https://gw.example/base"));
        for bad in ["", "gw:8080", "ftp://gw", "http://user:pw@gw", "http://gw/?q=1", "http://gw/#f", "file:///x"] {
            assert!(gateway_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn manifest_lists_what_is_served() {
        let both = render(&source(true, true), "http://gw:8080").expect("renders");
        assert_eq!(both.name, "memgate-repo-memory");
        let yaml = &both.files[0].1;
        assert!(yaml.contains("implements:\n  - \"searchable\"\n  - \"ingestible\"\n"), "{yaml}");
        assert!(yaml.contains(&format!("version: \"{PLUGIN_VERSION}\"\n")));
        assert!(yaml.contains("entry_point: \"memgate_plugin.py\"\n"));
        assert!(yaml.contains("    default: \"http://gw:8080\"\n"));
        let search_only = render(&source(true, false), "http://gw:8080").expect("renders");
        assert!(!search_only.files[0].1.contains("ingestible"));
        let files: Vec<&str> = both.files.iter().map(|(name, _)| *name).collect();
        assert_eq!(files, [MANIFEST_FILE, ENTRY_POINT, MARKER_FILE]);
        assert!(ENTRY_SOURCE.contains(&format!("class {CLASS_NAME}")));
    }

    #[test]
    fn provider_names_must_be_directory_names() {
        for bad in ["", "../x", "a/b", ".hidden", "UPPER", &"a".repeat(MAX_PROVIDER_NAME + 1)] {
            let mut s = source(true, false);
            s.provider = bad.to_string();
            assert!(render(&s, "http://gw").is_err(), "{bad}");
        }
    }
}
