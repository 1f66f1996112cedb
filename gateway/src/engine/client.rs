//! The HTTP side of the engine: the one shared client, per-provider permits, the deadline and the
//! response-size cap.
//!
//! This is the only code in memgate that performs upstream HTTP. It never follows redirects, never
//! retries, never caches, never uses an environment proxy, and never logs or formats the query,
//! the URL, the credential, a body or a transport error (whose text contains the URL).
//!
//! Concurrency policy: each provider key has its own semaphore of `permits_per_provider` permits,
//! so a slow provider can only exhaust its own permits. A call waits for a permit until its
//! deadline (the provider timeout, which bounds permit wait plus request); if the deadline passes
//! while it is still queued, or the permit comes with less than [`min_time_left`] of the timeout
//! still to run (a request that could only time out), the call fails with
//! [`EngineError::Saturated`] (`rate_limited`, retryable) without contacting the upstream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memgate_crds::{DialectPresetSpec, SearchMethod};
use memgate_presets::ContentEncoding;
use reqwest::header::{HeaderValue, RETRY_AFTER};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, timeout_at};

use memgate_crds::validation::destination::Placement;

use super::destination::{GuardedResolver, refused_url};
use super::error::EngineError;
use super::normalize::{Item, normalize};
use super::request::{Target, UpstreamRequest, build_search_request};
use crate::held_bytes::{HeldBytes, UNCOUNTED_RESPONSE_BYTES};

/// Largest accepted response body: 1 MiB.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Default number of concurrent upstream requests per provider.
pub const DEFAULT_PERMITS_PER_PROVIDER: usize = 16;

/// How long an idle upstream connection stays pooled for reuse (reqwest's default is 90 s). The
/// pool checks once per this interval, so an idle connection is closed within twice it: after a
/// burst (an upstream answering 429 with keep-alive, say) the gateway's sockets and connection
/// tasks are back to normal within 20 s instead of up to 180 s.
pub const UPSTREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineConfig {
    /// Concurrent upstream requests allowed per provider key (at least 1).
    pub permits_per_provider: usize,
    /// Where the gateway runs: which destinations every connection refuses (see `destination`).
    pub placement: Placement,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { permits_per_provider: DEFAULT_PERMITS_PER_PROVIDER, placement: Placement::Standalone }
    }
}

/// The HTTP client could not be set up (TLS configuration); carries no detail by design.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the upstream HTTP client could not be initialised")]
pub struct EngineInitError;

/// The bounded request engine: one shared connection pool, bounded per provider.
///
/// Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct Engine {
    client: reqwest::Client,
    placement: Placement,
    permits_per_provider: usize,
    permits: Mutex<HashMap<String, Arc<Semaphore>>>,
    held: Option<HeldBytes>,
}

impl Engine {
    /// Build the engine and its HTTP client.
    ///
    /// TLS uses rustls with the `ring` provider (the one kube already links); if the process has
    /// no default rustls provider yet, `ring` is installed as the default.
    pub fn new(config: EngineConfig) -> Result<Engine, EngineInitError> {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race with another installer is fine: some provider is then installed.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // No retries at all: reqwest would otherwise replay refused HTTP/2 streams on its own.
            .retry(reqwest::retry::never())
            .no_proxy()
            .pool_idle_timeout(UPSTREAM_IDLE_TIMEOUT)
            .dns_resolver(GuardedResolver::new(config.placement))
            .build()
            .map_err(|_| EngineInitError)?;
        Ok(Engine {
            client,
            placement: config.placement,
            permits_per_provider: config.permits_per_provider.max(1),
            permits: Mutex::default(),
            held: None,
        })
    }

    /// Count upstream answers over 64 KiB against `held` (the budget the data listener counts
    /// unsent answers against) while they are read and turned into items: one that does not fit
    /// fails its call ([`EngineError::HeldFull`]) before its body is read.
    pub fn with_held_bytes(mut self, held: HeldBytes) -> Engine {
        self.held = Some(held);
        self
    }

    /// Run one search against `target` with `dialect`, returning at most `limit` items.
    ///
    /// `provider` keys the concurrency bound (use the provider's namespace/name). The target's
    /// timeout bounds the whole call; dropping the returned future aborts the upstream request
    /// (the connection is closed). Never retried.
    pub async fn search(
        &self,
        provider: &str,
        target: &Target,
        dialect: &DialectPresetSpec,
        encoding: ContentEncoding,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Item>, EngineError> {
        let result = self.search_inner(provider, target, dialect, encoding, query, limit).await;
        match &result {
            Ok(items) => tracing::debug!(provider, outcome = "ok", items = items.len(), "upstream search"),
            Err(err) => {
                tracing::debug!(provider, outcome = "error", error_code = err.code().as_str(), "upstream search")
            }
        }
        result
    }

    async fn search_inner(
        &self,
        provider: &str,
        target: &Target,
        dialect: &DialectPresetSpec,
        encoding: ContentEncoding,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Item>, EngineError> {
        let deadline = Instant::now() + target.timeout;
        let request = build_search_request(target, dialect.auth, &dialect.search, query, limit)?;
        let _permit = self.permit(provider, deadline, target.timeout).await?;
        let (body, _held) = timeout_at(deadline, self.fetch(request)).await.map_err(|_| EngineError::Timeout)??;
        normalize(&body, &dialect.response, encoding, usize::try_from(limit).unwrap_or(usize::MAX))
    }

    /// Wait for one of `provider`'s permits until `deadline` (the end of a call of `timeout`);
    /// [`EngineError::Saturated`] when the deadline passes first, or when less than
    /// [`min_time_left`] of `timeout` is left once the permit is granted (nothing was sent upstream).
    pub(super) async fn permit(
        &self,
        provider: &str,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<OwnedSemaphorePermit, EngineError> {
        let semaphore = self.semaphore(provider);
        let least = min_time_left(timeout);
        // Queue only while a granted permit would still leave enough time for the request.
        let last_useful = deadline.checked_sub(least).unwrap_or(deadline);
        let permit = timeout_at(last_useful, semaphore.acquire_owned())
            .await
            .map_err(|_| EngineError::Saturated)?
            // The semaphore is never closed.
            .map_err(|_| EngineError::Saturated)?;
        if deadline.saturating_duration_since(Instant::now()) < least {
            return Err(EngineError::Saturated);
        }
        Ok(permit)
    }

    /// The semaphore of `provider`, created on first use.
    fn semaphore(&self, provider: &str) -> Arc<Semaphore> {
        let mut permits = self.permits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(existing) = permits.get(provider) {
            return Arc::clone(existing);
        }
        let created = Arc::new(Semaphore::new(self.permits_per_provider));
        permits.insert(provider.to_string(), Arc::clone(&created));
        created
    }

    /// Send `request` and read its 2xx body, at most [`MAX_RESPONSE_BYTES`], with its share of the
    /// held-bytes budget (keep it until the body is turned into items).
    async fn fetch(&self, request: UpstreamRequest) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError> {
        let response = self.send(request).await?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response.headers().get(RETRY_AFTER).map(HeaderValue::as_bytes);
            return Err(EngineError::from_status(status.as_u16(), retry_after));
        }
        read_capped(response, self.held.as_ref()).await
    }

    /// Send `request` and return the response head, whatever its status (redirects are not
    /// followed). Fails with [`EngineError::Connect`] when nothing could be sent.
    pub(super) async fn send(&self, request: UpstreamRequest) -> Result<reqwest::Response, EngineError> {
        let method = match request.method {
            SearchMethod::Get => reqwest::Method::GET,
            SearchMethod::Post => reqwest::Method::POST,
        };
        if let Some(why) = refused_url(&request.url, self.placement) {
            tracing::warn!(reason = why, "upstream destination refused; nothing sent");
            return Err(EngineError::Connect);
        }
        let mut builder = self.client.request(method, request.url);
        for (name, value) in &request.headers {
            let mut value = HeaderValue::from_str(value).map_err(|_| EngineError::InvalidRequest)?;
            value.set_sensitive(*name == "authorization" || *name == "x-api-key");
            builder = builder.header(*name, value);
        }
        if let Some(body) = &request.body {
            builder = builder.body(serde_json::to_vec(body).map_err(|_| EngineError::InvalidRequest)?);
        }
        builder.send().await.map_err(transport_error)
    }
}

/// The least time a call of `timeout` must have left when it gets its permit to be sent upstream:
/// a tenth of the timeout, at least 100 ms, at most half the timeout. A call that waited longer in
/// the queue is refused as saturated (retryable) instead of sending a request that could only
/// time out.
pub fn min_time_left(timeout: Duration) -> Duration {
    (timeout / 10).max(Duration::from_millis(100)).min(timeout / 2)
}

/// Read `response`'s body, at most [`MAX_RESPONSE_BYTES`] (checked against the declared length and
/// while streaming). A body over 64 KiB takes its share of `held` (its declared length, or the cap
/// once an undeclared one passes 64 KiB); when that does not fit, the call fails with
/// [`EngineError::HeldFull`] without reading (further).
pub(super) async fn read_capped(
    mut response: reqwest::Response,
    held: Option<&HeldBytes>,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError> {
    let limit = MAX_RESPONSE_BYTES as u64;
    if response.content_length().is_some_and(|declared| declared > limit) {
        return Err(EngineError::TooLarge);
    }
    let take = |length: u64| held.map_or(Ok(None), |held| held.take(Some(length)).map_err(|_| EngineError::HeldFull));
    let mut share = match response.content_length() {
        Some(declared) => take(declared)?,
        None => None,
    };
    // Sized once from the declared length (within the cap), so a large answer is not copied while
    // its buffer doubles, nor left holding up to twice its size.
    let declared = response.content_length().map_or(0, |length| usize::try_from(length).unwrap_or(0));
    let mut body = Vec::with_capacity(declared.min(MAX_RESPONSE_BYTES));
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(EngineError::TooLarge);
        }
        body.extend_from_slice(&chunk);
        if share.is_none() && response.content_length().is_none() && body.len() > UNCOUNTED_RESPONSE_BYTES {
            share = take(limit)?;
        }
    }
    Ok((body, share))
}

/// Classify a transport error without keeping it (its text contains the URL).
fn transport_error(err: reqwest::Error) -> EngineError {
    if err.is_connect() {
        EngineError::Connect
    } else if err.is_timeout() {
        EngineError::Timeout
    } else {
        EngineError::Transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_needs_a_tenth_of_its_timeout_left_to_be_sent() {
        assert_eq!(min_time_left(Duration::from_secs(5)), Duration::from_millis(500));
        assert_eq!(min_time_left(Duration::from_secs(30)), Duration::from_secs(3));
        assert_eq!(min_time_left(Duration::from_millis(500)), Duration::from_millis(100));
        assert_eq!(min_time_left(Duration::from_millis(100)), Duration::from_millis(50));
    }

    /// Permits granted with less than the minimum left refuse without an upstream request.
    #[tokio::test]
    async fn a_permit_granted_too_close_to_the_deadline_is_refused() {
        let engine = Engine::new(EngineConfig { permits_per_provider: 1, ..EngineConfig::default() }).expect("engine");
        let timeout = Duration::from_secs(2);
        let held = engine.permit("p", Instant::now() + timeout, timeout).await.expect("free permit");
        let waiter = engine.permit("p", Instant::now() + timeout, timeout);
        let release = async {
            tokio::time::sleep(Duration::from_millis(1900)).await;
            drop(held);
        };
        let (granted, ()) = tokio::join!(waiter, release);
        assert_eq!(granted.err(), Some(EngineError::Saturated));
        assert!(engine.permit("p", Instant::now() + timeout, timeout).await.is_ok());
    }

    /// A keep-alive connection left idle after an answer is closed by the gateway within twice
    /// [`UPSTREAM_IDLE_TIMEOUT`] (before: kept for reqwest's 90 s default). The bound below adds
    /// 10 s for a loaded machine and is still far from 90 s.
    #[tokio::test]
    async fn an_idle_upstream_connection_is_closed_within_twice_the_idle_timeout() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = url::Url::parse(&format!("http://{}/search", listener.local_addr().expect("address"))).expect("url");
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                assert_eq!(stream.read(&mut byte).await.expect("read"), 1, "request head");
                head.extend_from_slice(&byte);
            }
            stream.write_all(b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n").await.expect("answer");
            let answered = Instant::now();
            let mut rest = [0u8; 64];
            // The connection stays open (keep-alive) until the gateway's pool closes it.
            while stream.read(&mut rest).await.is_ok_and(|read| read > 0) {}
            answered.elapsed()
        });
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let request = UpstreamRequest { method: SearchMethod::Get, url, headers: Vec::new(), body: None };
        let response = engine.send(request).await.expect("an answer");
        assert_eq!(response.status().as_u16(), 429);
        drop(response);
        let bound = UPSTREAM_IDLE_TIMEOUT * 2 + Duration::from_secs(10);
        let idle = timeout_at(Instant::now() + bound, server).await.expect("closed within the bound").expect("server");
        assert!(idle >= UPSTREAM_IDLE_TIMEOUT / 2, "closed after {idle:?}: pooled, not closed at once");
    }
}
