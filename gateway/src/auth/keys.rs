//! Where verification keys come from: an OpenID provider's discovery document and JWKS, or the
//! Kubernetes API server's (for offline ServiceAccount tokens), cached per issuer.
//!
//! Owns the only HTTP memgate performs towards identity providers (the bounded engine owns the
//! upstream memory services). The fetch is bounded: [`FETCH_TIMEOUT`] per document,
//! [`MAX_DOCUMENT_BYTES`] per body, no proxy, no retries, and redirects followed only within the
//! same origin (at most 3). Documents are read strictly: the discovery `issuer` must equal the
//! configured issuer exactly (OpenID Connect Discovery §4.3) and `jwks_uri` must be https (http only
//! when the provider opted in). Nothing fetched, and no URL, is ever logged.
//!
//! Cache policy per issuer (one fetch at a time; callers wait for it):
//! - keys are fetched on first use and again when older than [`MAX_KEY_AGE`];
//! - a token whose `kid` is not in the cached set triggers a refresh, at most once per
//!   `min_refresh` interval (so made-up `kid`s cannot make memgate hammer the issuer);
//! - when a refresh fails the last good keys stay in use (an issuer briefly unreachable does not
//!   lock callers out); only an issuer never reached leaves callers unverifiable (HTTP 503).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use memgate_crds::validation::destination::Placement;
use serde::Deserialize;
use tokio::time::Instant;

use super::verify::KeySet;
use crate::engine::destination::{GuardedResolver, refused_url};

/// Timeout of one discovery or JWKS request.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest discovery document or JWKS read.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Keys older than this are refreshed on next use.
pub const MAX_KEY_AGE: Duration = Duration::from_secs(3600);
/// Default shortest time between two fetches of one issuer's keys.
pub const DEFAULT_MIN_REFRESH: Duration = Duration::from_secs(30);
/// Path of the Kubernetes API server's OIDC discovery document.
const KUBE_DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

/// Where an issuer's keys are read from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeySource {
    /// An OpenID provider: `<issuer>/.well-known/openid-configuration`, then its `jwks_uri`.
    Issuer {
        /// The exact issuer.
        issuer: String,
        /// Plain http allowed for the discovery document and the JWKS.
        allow_http: bool,
    },
    /// The Kubernetes API server, through the gateway's Kubernetes client (its discovery document
    /// and `jwks_uri` path, e.g. `/openid/v1/jwks`).
    KubernetesApi,
}

/// Why keys could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The issuer has never been reached (or no Kubernetes client is configured).
    #[error("the token issuer's keys are unavailable")]
    Unavailable,
}

/// An issuer's verified identity and its keys.
#[derive(Debug, Clone)]
pub struct IssuerKeys {
    /// The issuer as its discovery document states it (for Kubernetes: the service account issuer).
    pub issuer: String,
    /// Usable signing keys.
    pub keys: KeySet,
}

#[derive(Default)]
struct CacheState {
    current: Option<IssuerKeys>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
}

/// Per-issuer key cache with the fetch policy above.
pub struct KeyStore {
    http: reqwest::Client,
    placement: Placement,
    kube: Option<kube::Client>,
    min_refresh: Duration,
    entries: Mutex<HashMap<KeySource, Arc<tokio::sync::Mutex<CacheState>>>>,
}

impl std::fmt::Debug for KeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyStore").field("min_refresh", &self.min_refresh).finish_non_exhaustive()
    }
}

/// The HTTP client could not be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the identity provider HTTP client could not be initialised")]
pub struct KeyStoreInitError;

impl KeyStore {
    /// A store fetching at most once per `min_refresh` per issuer; `kube` serves
    /// [`KeySource::KubernetesApi`]. Destinations are guarded as on a person's machine.
    pub fn new(kube: Option<kube::Client>, min_refresh: Duration) -> Result<KeyStore, KeyStoreInitError> {
        KeyStore::with_placement(kube, min_refresh, Placement::Standalone)
    }

    /// [`KeyStore::new`] for a gateway running at `placement`: every fetch is guarded like the
    /// engine's upstream requests (`engine::destination`).
    pub fn with_placement(
        kube: Option<kube::Client>,
        min_refresh: Duration,
        placement: Placement,
    ) -> Result<KeyStore, KeyStoreInitError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let same_origin = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin() && attempt.previous().len() <= 3);
                if same_origin { attempt.follow() } else { attempt.stop() }
            }))
            .retry(reqwest::retry::never())
            .timeout(FETCH_TIMEOUT)
            .no_proxy()
            .dns_resolver(GuardedResolver::new(placement))
            .build()
            .map_err(|_| KeyStoreInitError)?;
        Ok(KeyStore { http, placement, kube, min_refresh, entries: Mutex::default() })
    }

    /// The keys of `source`, refreshed per the cache policy; `kid` is the presented token's key id.
    pub async fn keys(&self, source: &KeySource, kid: Option<&str>) -> Result<IssuerKeys, KeyError> {
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(entries.entry(source.clone()).or_default())
        };
        let mut state = entry.lock().await;
        let now = Instant::now();
        let stale = state.fetched_at.is_none_or(|at| now.duration_since(at) >= MAX_KEY_AGE);
        let unknown_kid =
            kid.is_some_and(|kid| state.current.as_ref().is_some_and(|current| !current.keys.has_kid(kid)));
        let may_fetch = state.last_attempt.is_none_or(|at| now.duration_since(at) >= self.min_refresh);
        if (stale || unknown_kid) && may_fetch {
            state.last_attempt = Some(now);
            match self.fetch(source).await {
                Ok(fresh) => {
                    tracing::info!(keys = fresh.keys.len(), "token issuer keys fetched");
                    state.current = Some(fresh);
                    state.fetched_at = Some(now);
                }
                Err(reason) => {
                    tracing::warn!(
                        reason,
                        kept_previous_keys = state.current.is_some(),
                        "token issuer keys could not be fetched"
                    );
                }
            }
        }
        state.current.clone().ok_or(KeyError::Unavailable)
    }

    async fn fetch(&self, source: &KeySource) -> Result<IssuerKeys, &'static str> {
        match source {
            KeySource::Issuer { issuer, allow_http } => self.fetch_issuer(issuer, *allow_http).await,
            KeySource::KubernetesApi => self.fetch_kubernetes().await,
        }
    }

    async fn fetch_issuer(&self, issuer: &str, allow_http: bool) -> Result<IssuerKeys, &'static str> {
        let discovery_url = discovery_url(issuer).ok_or("issuer URL unusable")?;
        let discovery: Discovery = self.get_json(&discovery_url, allow_http).await?;
        if discovery.issuer != issuer {
            return Err("discovery document names another issuer");
        }
        let jwks_url = url::Url::parse(&discovery.jwks_uri).map_err(|_| "jwks_uri unusable")?;
        let jwks: JwkSet = self.get_json(&jwks_url, allow_http).await?;
        Ok(IssuerKeys { issuer: discovery.issuer, keys: KeySet::from_jwks(&jwks) })
    }

    async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &url::Url,
        allow_http: bool,
    ) -> Result<T, &'static str> {
        let scheme_ok = url.scheme() == "https" || (allow_http && url.scheme() == "http");
        if !scheme_ok || !url.username().is_empty() || url.password().is_some() || url.host_str().is_none() {
            return Err("URL scheme or shape refused");
        }
        if let Some(why) = refused_url(url, self.placement) {
            tracing::warn!(reason = why, "identity provider destination refused; nothing fetched");
            return Err("destination refused");
        }
        let mut response = self
            .http
            .get(url.clone())
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|_| "request failed")?;
        if !response.status().is_success() {
            return Err("non-success status");
        }
        if response.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
            return Err("document too large");
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| "reading failed")? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err("document too large");
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|_| "document is not the expected JSON")
    }

    async fn fetch_kubernetes(&self) -> Result<IssuerKeys, &'static str> {
        let client = self.kube.as_ref().ok_or("no Kubernetes client configured")?;
        let discovery: Discovery = kube_get(client, KUBE_DISCOVERY_PATH).await?;
        // The API server advertises an absolute jwks_uri on its external address; the path is
        // what the gateway's own client can reach.
        let path =
            url::Url::parse(&discovery.jwks_uri).map(|u| u.path().to_string()).map_err(|_| "jwks_uri unusable")?;
        let jwks: JwkSet = kube_get(client, &path).await?;
        Ok(IssuerKeys { issuer: discovery.issuer, keys: KeySet::from_jwks(&jwks) })
    }
}

async fn kube_get<T: serde::de::DeserializeOwned>(client: &kube::Client, path: &str) -> Result<T, &'static str> {
    let request = http::Request::get(path).body(Vec::new()).map_err(|_| "request unusable")?;
    let text = tokio::time::timeout(FETCH_TIMEOUT, client.request_text(request))
        .await
        .map_err(|_| "request timed out")?
        .map_err(|_| "request failed")?;
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err("document too large");
    }
    serde_json::from_str(&text).map_err(|_| "document is not the expected JSON")
}

/// `<issuer>/.well-known/openid-configuration` (OpenID Connect Discovery §4: appended to the
/// issuer, whose trailing `/` is dropped first).
pub fn discovery_url(issuer: &str) -> Option<url::Url> {
    url::Url::parse(&format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'))).ok()
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_is_appended_to_the_issuer() {
        assert_eq!(
            discovery_url("https://login.example.com/").map(String::from).as_deref(),
            Some("https://login.example.com/.well-known/openid-configuration")
        );
        assert_eq!(
            discovery_url("https://login.example.com/realms/team").map(String::from).as_deref(),
            Some("https://login.example.com/realms/team/.well-known/openid-configuration")
        );
    }
}
