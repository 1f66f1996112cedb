//! MCP authorization discovery for OIDC-protected providers: RFC 9728 protected resource metadata
//! and the `WWW-Authenticate` challenge that points clients to it.
//!
//! Owns the documents and the header values (pure functions of the provider and the gateway's
//! public URL) and two read-only routes:
//!
//! | route | answer |
//! |---|---|
//! | `GET /.well-known/oauth-protected-resource/mcp/{provider}` | the metadata of that provider (the path-inserted form of RFC 9728 §3.1, which the MCP Python SDK and Qwen Code try for `/mcp/<provider>`) |
//! | `GET /.well-known/oauth-protected-resource` | the root form, served only when exactly one OIDC provider is served (otherwise which provider it describes would be a guess) |
//!
//! Both are 404 (the fixed Nexent body) for an unknown provider, one without `mcp.enabled` or
//! without `access.oidc`, or when the gateway has no `--public-url` (the `resource` must be the URL
//! tenants use, which the gateway cannot learn from a request's `Host`). It never reveals anything
//! beyond what the provider's config already publishes: its resource URL, issuer and required scopes.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::auth::{AuthError, mcp_resource_url};
use crate::config::Provider;
use crate::nexent::{ApiError, json_response};
use crate::state::AppState;

/// Well-known path prefix of protected resource metadata (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The two metadata routes.
pub fn router() -> Router<Arc<AppState>> {
    Router::new().route(&format!("{WELL_KNOWN}/mcp/{{provider}}"), get(for_provider)).route(WELL_KNOWN, get(root))
}

/// URL of `provider`'s metadata document behind `public_url`.
pub fn metadata_url(public_url: &str, provider: &str) -> String {
    format!("{}{WELL_KNOWN}/mcp/{provider}", public_url.trim_end_matches('/'))
}

/// The RFC 9728 document of `provider`, or `None` when it has no OIDC access or no MCP surface.
pub fn metadata(provider: &Provider, public_url: &str) -> Option<Value> {
    let oidc = provider.access.oidc.as_ref().filter(|_| provider.mcp)?;
    Some(json!({
        "resource": mcp_resource_url(public_url, &provider.name),
        "authorization_servers": [oidc.issuer],
        "scopes_supported": oidc.required_scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": format!("memgate {}", provider.name),
    }))
}

/// The `WWW-Authenticate` value for refusing a caller of `provider` with `err`: for an OIDC
/// provider `Bearer resource_metadata="…", scope="…"` on 401 and
/// `Bearer error="insufficient_scope", scope="…", resource_metadata="…"` on a missing scope;
/// `None` for other refusals and providers (plain `Bearer` on 401 stays).
pub fn challenge(provider: &Provider, public_url: Option<&str>, err: AuthError) -> Option<HeaderValue> {
    let oidc = provider.access.oidc.as_ref()?;
    let mut parts = Vec::new();
    match err {
        AuthError::Unauthenticated => {}
        AuthError::InsufficientScope => parts.push("error=\"insufficient_scope\"".to_string()),
        AuthError::Forbidden | AuthError::Unavailable => return None,
    }
    if let Some(public_url) = public_url.filter(|_| provider.mcp) {
        parts.push(format!("resource_metadata=\"{}\"", metadata_url(public_url, &provider.name)));
    }
    if !oidc.required_scopes.is_empty() {
        parts.push(format!("scope=\"{}\"", oidc.required_scopes.join(" ")));
    }
    let value = if parts.is_empty() { "Bearer".to_string() } else { format!("Bearer {}", parts.join(", ")) };
    // Scopes are scope tokens and the public URL a checked URL, so this never fails in practice;
    // falling back to the plain challenge keeps the 401 well-formed regardless.
    HeaderValue::from_str(&value).ok()
}

async fn for_provider(State(state): State<Arc<AppState>>, Path(provider): Path<String>) -> Response {
    let document = state
        .auth()
        .public_url()
        .zip(state.provider(&provider))
        .and_then(|(public_url, provider)| metadata(&provider, public_url));
    answer(document)
}

async fn root(State(state): State<Arc<AppState>>) -> Response {
    let snapshot = state.config().snapshot();
    let mut oidc = snapshot.providers.values().filter(|p| p.mcp && p.access.oidc.is_some());
    let document = match (oidc.next(), oidc.next(), state.auth().public_url()) {
        (Some(only), None, Some(public_url)) => metadata(only, public_url),
        _ => None,
    };
    answer(document)
}

fn answer(document: Option<Value>) -> Response {
    match document {
        Some(document) => json_response(StatusCode::OK, &document),
        None => ApiError::not_found().into_response(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use memgate_crds::manifest::documents;

    use super::*;
    use crate::config::build_snapshot;

    fn provider(access: &str, mcp: bool) -> Arc<Provider> {
        let text = format!(
            "apiVersion: memgate.io/v1alpha1\nkind: MemoryProvider\nmetadata: {{name: team, namespace: agents}}\nspec:\n  \
             dialect: {{builtin: mem0-oss-rest-2026-08}}\n  endpoint: {{origin: \"https://mem0.example.com\"}}\n  \
             credentials: {{secretRef: {{name: mem0-api, key: api-key}}}}\n  scope: {{userId: u, agentId: a}}\n  \
             mcp: {{enabled: {mcp}}}\n  access: {access}\n---\napiVersion: v1\nkind: Secret\n\
             metadata: {{name: mem0-api, namespace: agents}}\nstringData: {{api-key: k}}\n"
        );
        let docs: Vec<_> = documents(&text).expect("yaml").into_iter().map(|(i, v)| (format!("t#{i}"), v)).collect();
        let snapshot = build_snapshot(&docs, &BTreeMap::new()).expect("valid");
        Arc::clone(snapshot.provider("team").expect("served"))
    }

    const OIDC: &str = "{oidc: {issuer: \"https://login.example.com\", requiredScopes: [memory.read, memory.write]}}";
    const PUBLIC: &str = "https://memgate.example.com/";

    fn text(value: Option<HeaderValue>) -> Option<String> {
        value.and_then(|v| v.to_str().ok().map(str::to_string))
    }

    #[test]
    fn a_401_names_the_metadata_and_the_scopes() {
        let p = provider(OIDC, true);
        assert_eq!(
            text(challenge(&p, Some(PUBLIC), AuthError::Unauthenticated)).as_deref(),
            Some(
                "Bearer resource_metadata=\"https://memgate.example.com/.well-known/oauth-protected-resource/mcp/team\", \
                 scope=\"memory.read memory.write\""
            )
        );
        assert_eq!(
            text(challenge(&p, Some(PUBLIC), AuthError::InsufficientScope)).as_deref().map(|v| v.starts_with(
                "Bearer error=\"insufficient_scope\", resource_metadata=\"https://memgate.example.com/.well-known/"
            )),
            Some(true)
        );
        assert_eq!(
            text(challenge(&p, None, AuthError::Unauthenticated)).as_deref(),
            Some("Bearer scope=\"memory.read memory.write\"")
        );
        assert_eq!(challenge(&p, Some(PUBLIC), AuthError::Forbidden), None);
    }

    #[test]
    fn providers_without_oidc_keep_the_plain_challenge_and_publish_nothing() {
        let p = provider("{anonymous: true}", true);
        assert_eq!(challenge(&p, Some(PUBLIC), AuthError::Unauthenticated), None);
        assert_eq!(metadata(&p, PUBLIC), None);
        assert_eq!(metadata(&provider(OIDC, false), PUBLIC), None, "no MCP surface, no MCP resource");
    }

    #[test]
    fn the_metadata_names_resource_issuer_and_scopes() {
        let document = metadata(&provider(OIDC, true), PUBLIC).expect("document");
        assert_eq!(document["resource"], "https://memgate.example.com/mcp/team");
        assert_eq!(document["authorization_servers"], json!(["https://login.example.com"]));
        assert_eq!(document["scopes_supported"], json!(["memory.read", "memory.write"]));
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    }
}
