//! Turning parsed documents and Secret data into a [`Snapshot`], as a pure function.
//!
//! Every rule is the shared validation of `memgate-crds`, so the gateway refuses exactly what the
//! operator and `memgate-operator validate` refuse.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use memgate_crds::MemoryProvider;
use memgate_crds::bundle::{Bundle, MissingSecrets, provider_references};
use memgate_crds::manifest::{Object, classify, identity, is_secret_mount, secret_data};
use memgate_crds::references::{bearer_token_use, credential_use};
use memgate_crds::validation::{Violation, memory_provider, parse_origin, provider_identity};
use memgate_presets::ContentEncoding;
use serde_json::Value;

use super::model::{Access, Provider, Snapshot};
use crate::engine::{Target, UrlCache};

/// Why a config could not be built: one line per problem, naming the document and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid gateway config:\n  {}", .problems.join("\n  "))]
pub struct BuildError {
    /// `source: kind/name: field: message` lines; never a credential value.
    pub problems: Vec<String>,
}

/// One parsed document and where it came from (for messages).
pub type SourcedDocument = (String, Value);

/// Build a snapshot from documents (`(source, value)`) and the data of mounted Secrets
/// (`(namespace, name) -> key -> bytes`). All-or-nothing.
pub fn build_snapshot(
    documents: &[SourcedDocument],
    mounted_secrets: &BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
) -> Result<Snapshot, BuildError> {
    let mut problems = Vec::new();
    let mut bundle = Bundle { secrets: mounted_secrets.clone(), ..Bundle::default() };
    let mut providers: Vec<(String, MemoryProvider)> = Vec::new();
    for (source, value) in documents {
        if is_secret_mount(value) {
            continue;
        }
        let id = identity(value);
        match classify(value) {
            Ok(Object::DialectPreset(preset)) => {
                let name = preset.metadata.name.clone().unwrap_or_default();
                for v in bundle.add_preset(&name, preset.spec) {
                    problems.push(format!("{source}: {id}: {v}"));
                }
            }
            Ok(Object::MemoryProvider(provider)) => providers.push((format!("{source}: {id}"), *provider)),
            Ok(Object::Secret(secret)) => {
                let ns = secret.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                let name = secret.metadata.name.clone().unwrap_or_default();
                bundle.secrets.insert((ns, name), secret_data(&secret));
            }
            // How the namespace's gateway pods run is the operator's business, not the config's.
            Ok(Object::MemoryGateway(_) | Object::Other) => {}
            Err(violations) => problems.extend(violations.iter().map(|v| format!("{source}: {id}: {v}"))),
        }
    }
    let mut snapshot = Snapshot::default();
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for (origin, provider) in &providers {
        let name = provider.metadata.name.clone().unwrap_or_default();
        if let Some(first) = seen.insert(name.clone(), origin.clone()) {
            problems.push(format!(
                "{origin}: metadata.name: another provider named \"{name}\" ({first}) is in this config; provider names must be unique per gateway"
            ));
            continue;
        }
        let namespace = provider.metadata.namespace.as_deref().unwrap_or("default");
        let mut found = provider_identity(&name, namespace);
        found.extend(memory_provider(&provider.spec));
        // A disabled provider is never served, so what it refers to need not be usable: switching a
        // provider off must work precisely when its Secret is gone.
        if found.is_empty() && provider.spec.enabled {
            found.extend(provider_references(provider, &bundle, memgate_presets::view, MissingSecrets::Refused));
        }
        if !found.is_empty() {
            problems.extend(found.iter().map(|v| format!("{origin}: {v}")));
            continue;
        }
        if !provider.spec.enabled {
            snapshot.disabled.push(name);
            continue;
        }
        match resolve(provider, &bundle) {
            Ok(resolved) => {
                snapshot.providers.insert(name, Arc::new(resolved));
            }
            Err(v) => problems.push(format!("{origin}: {v}")),
        }
    }
    if problems.is_empty() { Ok(snapshot) } else { Err(BuildError { problems }) }
}

/// Resolve an already validated provider into what is served.
fn resolve(provider: &MemoryProvider, bundle: &Bundle) -> Result<Provider, Violation> {
    let spec = &provider.spec;
    let namespace = provider.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let dialect = bundle.resolve_dialect(provider, memgate_presets::view)?;
    let builtin = spec.dialect.builtin.as_deref().and_then(memgate_presets::get);
    let origin = parse_origin("spec.endpoint.origin", &spec.endpoint.origin, spec.endpoint.allow_insecure_http)?;
    let credential = bundle.credential(&namespace, credential_use(spec))?;
    let bearer_token = bearer_token_use(spec).map(|used| bundle.credential(&namespace, used)).transpose()?;
    Ok(Provider {
        name: provider.metadata.name.clone().unwrap_or_default(),
        namespace,
        dialect_id: dialect.id.to_string(),
        dialect: dialect.view.spec.clone(),
        encoding: builtin.map_or(ContentEncoding::Plain, |b| b.content_encoding),
        write: builtin.and_then(|b| b.write.clone()),
        target: Target {
            origin,
            base_path: spec.endpoint.base_path.clone(),
            scope: spec.scope.clone(),
            credential,
            timeout: Duration::from_millis(u64::from(spec.timeout_ms)),
            max_in_flight: spec
                .limits
                .as_ref()
                .and_then(|limits| limits.upstream)
                .and_then(|upstream| upstream.max_in_flight)
                .and_then(|n| usize::try_from(n).ok()),
            urls: UrlCache::default(),
        },
        mcp: spec.mcp.enabled,
        nexent_search: spec.nexent.search,
        nexent_ingest: spec.nexent.ingest,
        access: Access {
            anonymous: spec.access.anonymous,
            bearer_token,
            bearer_token_secret: bearer_token_use(spec).map(|used| used.secret_ref.name.clone()),
            service_accounts: spec.access.service_accounts.clone(),
            oidc: spec.access.oidc.clone(),
            bind_user_id_to_subject: spec.access.bind_user_id_to_subject,
        },
        limits: spec.limits.clone(),
        series: Default::default(),
        key_text: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use memgate_crds::manifest::documents;
    use memgate_crds::validation::Credential;

    const PROVIDER: &str = r#"
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {name: repo-memory, namespace: agents}
spec:
  dialect: {builtin: mem0-oss-rest-2026-08}
  endpoint: {origin: "http://127.0.0.1:18888", allowInsecureHttp: true}
  credentials: {secretRef: {name: mem0-api, key: api-key}}
  scope: {userId: repository-memory, agentId: qwen-code}
  nexent: {search: true}
  access: {anonymous: true}
"#;
    const SECRET: &str =
        "apiVersion: v1\nkind: Secret\nmetadata: {name: mem0-api, namespace: agents}\nstringData: {api-key: dev-key}\n";

    fn docs(text: &str) -> Vec<SourcedDocument> {
        documents(text).expect("yaml").into_iter().map(|(i, v)| (format!("test.yaml#{i}"), v)).collect()
    }

    #[test]
    fn provider_with_inline_secret_is_resolved() {
        let snapshot = build_snapshot(&docs(&format!("{PROVIDER}---\n{SECRET}")), &BTreeMap::new()).expect("valid");
        let p = snapshot.provider("repo-memory").expect("served");
        assert_eq!(p.target.credential.expose(), "dev-key");
        assert_eq!(p.target.origin, "http://127.0.0.1:18888");
        assert_eq!(p.dialect_id, "mem0-oss-rest-2026-08");
        assert!(p.write.is_some() && p.mcp && p.nexent_search && !p.nexent_ingest);
        assert_eq!(p.target.timeout, Duration::from_millis(5000));
        // Its key names it by namespace and name, the same text on every call (formatted once).
        let key = p.key();
        assert_eq!(key, format!("{}/repo-memory", p.namespace));
        assert!(std::ptr::eq(key, p.key()));
    }

    #[test]
    fn mounted_secret_is_used_when_no_inline_secret() {
        let mut mounted = BTreeMap::new();
        mounted.insert(
            ("agents".to_string(), "mem0-api".to_string()),
            BTreeMap::from([("api-key".to_string(), b"from-file\n".to_vec())]),
        );
        let snapshot = build_snapshot(&docs(PROVIDER), &mounted).expect("valid");
        assert_eq!(snapshot.provider("repo-memory").expect("served").target.credential.expose(), "from-file");
    }

    #[test]
    fn missing_secret_refuses_the_whole_config_without_echoing_values() {
        let err = build_snapshot(&docs(PROVIDER), &BTreeMap::new()).unwrap_err();
        assert!(err.problems[0].contains("spec.credentials.secretRef.name"), "{err}");
        let blank = SECRET.replace("dev-key", "\"${MEM0_KEY}\"");
        let err = build_snapshot(&docs(&format!("{PROVIDER}---\n{blank}")), &BTreeMap::new()).unwrap_err();
        assert!(err.to_string().contains("placeholder") && !err.to_string().contains("MEM0_KEY"), "{err}");
    }

    #[test]
    fn invalid_provider_names_file_and_field() {
        let text = format!("{PROVIDER}---\n{SECRET}")
            .replace("timeoutMs", "x")
            .replace("nexent: {search: true}", "timeoutMs: 0");
        let err = build_snapshot(&docs(&text), &BTreeMap::new()).unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert!(err.problems[0].starts_with("test.yaml#0: MemoryProvider/repo-memory: spec.timeoutMs:"), "{err}");
    }

    #[test]
    fn disabled_provider_is_not_served() {
        let text = format!("{PROVIDER}---\n{SECRET}").replace("spec:\n", "spec:\n  enabled: false\n");
        let snapshot = build_snapshot(&docs(&text), &BTreeMap::new()).expect("valid");
        assert!(snapshot.provider("repo-memory").is_none());
        assert_eq!(snapshot.disabled, ["repo-memory"]);
    }

    #[test]
    fn a_disabled_provider_needs_no_secret() {
        let text = PROVIDER.replace("spec:\n", "spec:\n  enabled: false\n");
        let snapshot = build_snapshot(&docs(&text), &BTreeMap::new()).expect("a disabled provider without its Secret");
        assert!(snapshot.provider("repo-memory").is_none());
        assert_eq!(snapshot.disabled, ["repo-memory"]);
    }

    #[test]
    fn duplicate_names_are_refused() {
        let other = PROVIDER.replace("namespace: agents", "namespace: other");
        let text = format!("{PROVIDER}---\n{other}---\n{SECRET}---\n{}", SECRET.replace("agents", "other"));
        let err = build_snapshot(&docs(&text), &BTreeMap::new()).unwrap_err();
        assert!(err.problems[0].contains("must be unique"), "{err}");
    }

    #[test]
    fn bearer_token_is_resolved_from_its_secret() {
        let text = format!("{PROVIDER}---\n{SECRET}")
            .replace("access: {anonymous: true}", "access: {bearerToken: {secretRef: {name: callers, key: nexent}}}");
        let callers = "apiVersion: v1\nkind: Secret\nmetadata: {name: callers, namespace: agents}\nstringData: {nexent: caller-token}\n";
        let snapshot = build_snapshot(&docs(&format!("{text}---\n{callers}")), &BTreeMap::new()).expect("valid");
        let access = &snapshot.provider("repo-memory").expect("served").access;
        assert_eq!(access.bearer_token.as_ref().map(Credential::expose), Some("caller-token"));
        assert!(!access.anonymous);
    }
}
