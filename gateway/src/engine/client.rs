//! The HTTP side of the engine: the shared upstream transports (pooled HTTP/1.1 connections the
//! calling task reads and writes for `http://` origins, `http1` with `answer` and `wire`; reqwest
//! for `https://`), per-provider permits, the deadline and the response-size cap.
//!
//! This and `http1` are the only code in memgate that performs upstream HTTP. It never follows
//! redirects, never retries, never caches, never uses an environment proxy, and never logs or
//! formats the query, the URL, the credential, a body or a transport error (whose text contains
//! the URL).
//!
//! Concurrency policy: each provider key has its own semaphore of permits (the provider's
//! `spec.limits.upstream.maxInFlight` when it sets one, else `permits_per_provider`), so a slow
//! provider can only exhaust its own permits. A call waits for a permit until its
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

use super::answer::{BodySink, spare_within};
use super::destination::{GuardedResolver, refused_url};
use super::error::EngineError;
use super::http1::Http1Pool;
use super::normalize::{Item, normalize};
use super::request::{HeaderText, Target, UpstreamRequest, build_search_request};
use super::wire::{self, Framing};
use crate::held_bytes::{HeldBytes, UNCOUNTED_RESPONSE_BYTES};

/// Largest accepted response body: 1 MiB.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Default number of concurrent upstream requests per provider.
pub const DEFAULT_PERMITS_PER_PROVIDER: usize = 16;

/// How long an idle upstream connection stays pooled for reuse (reqwest's default is 90 s).
///
/// Shorter than the keep-alive of the Mem0 server: mem0ai/mem0 `server/Dockerfile` runs `uvicorn
/// main:app` with uvicorn's default `timeout_keep_alive = 5` (encode/uvicorn `uvicorn/config.py`),
/// so uvicorn closes a connection idle for 5 s. A connection pooled longer could be taken for a call
/// at the moment uvicorn closes it, and that call would fail (nothing is retried). The pools check
/// once per this interval, so an idle connection is closed within twice it: after a burst (an
/// upstream answering 429 with keep-alive, say) the gateway's sockets are back to normal within 8 s.
pub const UPSTREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// How long the body of an upstream refusal may take, after the refusal has been returned, before
/// its connection is closed instead of pooled again.
const REFUSAL_BODY_WAIT: Duration = Duration::from_secs(2);

/// A provider's semaphore and the number of permits it was created with.
type SizedSemaphore = (usize, Arc<Semaphore>);

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
    /// `http://` origins, searches and writes: connections driven by the calling task (`http1`).
    http1: Http1Pool,
    placement: Placement,
    permits_per_provider: usize,
    /// Each provider key's semaphores (more than one only while calls of an older config run).
    permits: Mutex<HashMap<String, Vec<SizedSemaphore>>>,
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
            http1: Http1Pool::new(config.placement, UPSTREAM_IDLE_TIMEOUT),
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
        let _permit = self.permit(provider, target.max_in_flight, deadline, target.timeout).await?;
        let (body, _held) = timeout_at(deadline, self.fetch(request)).await.map_err(|_| EngineError::Timeout)??;
        normalize(&body, &dialect.response, encoding, usize::try_from(limit).unwrap_or(usize::MAX))
    }

    /// Wait for one of `provider`'s permits (`max_in_flight` of them, or the engine's default)
    /// until `deadline` (the end of a call of `timeout`); [`EngineError::Saturated`] when the
    /// deadline passes first, or when less than [`min_time_left`] of `timeout` is left once the
    /// permit is granted (nothing was sent upstream).
    pub(super) async fn permit(
        &self,
        provider: &str,
        max_in_flight: Option<usize>,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<OwnedSemaphorePermit, EngineError> {
        let semaphore = self.semaphore(provider, max_in_flight.unwrap_or(self.permits_per_provider).max(1));
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

    /// The semaphore of `provider` with `size` permits, created on first use. A reload that
    /// changes the size gives calls of the new config a new semaphore while calls of the old one
    /// (an ingest still sending its units, say) keep theirs, so until those end both sizes can be
    /// in flight; a semaphore no call holds any more is dropped when the next one is created.
    fn semaphore(&self, provider: &str, size: usize) -> Arc<Semaphore> {
        let mut permits = self.permits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sizes) = permits.get_mut(provider) {
            if let Some((_, existing)) = sizes.iter().find(|(created_with, _)| *created_with == size) {
                return Arc::clone(existing);
            }
            sizes.retain(|(_, semaphore)| Arc::strong_count(semaphore) > 1);
        }
        let created = Arc::new(Semaphore::new(size));
        permits.entry(provider.to_string()).or_default().push((size, Arc::clone(&created)));
        created
    }

    /// Send `request` and read its 2xx body, at most [`MAX_RESPONSE_BYTES`], with its share of the
    /// held-bytes budget (keep it until the body is turned into items).
    async fn fetch(&self, request: UpstreamRequest) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError> {
        self.exchange(request, self.held.as_ref()).await?.into_search_body()
    }

    /// Send `request` and read its answer: a 2xx body through [`CappedBody`] (held bytes counted
    /// against `held`), any other status with its `Retry-After`. Redirects are not followed.
    /// Fails with [`EngineError::Connect`] or [`EngineError::InvalidRequest`] when nothing was
    /// sent, with another error when the exchange was lost after sending began.
    ///
    /// `http://` origins go over [`Http1Pool`] (a connection this task drives), `https://` ones
    /// over reqwest.
    pub(super) async fn exchange(
        &self,
        request: UpstreamRequest,
        held: Option<&HeldBytes>,
    ) -> Result<Answer, EngineError> {
        if let Some(why) = refused_url(&request.url, self.placement) {
            tracing::warn!(reason = why, "upstream destination refused; nothing sent");
            return Err(EngineError::Connect);
        }
        if request.url.scheme() == "http" {
            return self.exchange_http1(&request, held).await;
        }
        let response = self.send_reqwest(request).await?;
        let status = response.status();
        if !status.is_success() {
            return Ok(Answer::Refused {
                status: status.as_u16(),
                retry_after: response.headers().get(RETRY_AFTER).cloned(),
            });
        }
        Ok(Answer::Body(read_capped(response, held).await))
    }

    /// [`Engine::exchange`] over a pooled HTTP/1.1 connection this task reads and writes.
    async fn exchange_http1(&self, request: &UpstreamRequest, held: Option<&HeldBytes>) -> Result<Answer, EngineError> {
        let sent = wire::encode_request(request)?;
        let mut lease = self.http1.lease(&request.url).await?;
        let head = lease.send(&sent).await?;
        if !(200..300).contains(&head.status) {
            // A short refusal (a 429 under load, say) keeps its connection, as reqwest's pool did.
            // The head is the answer; the body only decides whether the connection can be kept.
            // Read here when it has arrived with the head, else in the background for at most
            // `REFUSAL_BODY_WAIT`: a body that never comes must not turn the refusal into a
            // timeout, nor hold the call.
            let refused = Answer::Refused { status: head.status, retry_after: head.retry_after.clone() };
            let mut rest = Box::pin(lease.finish_short(head));
            if futures::poll!(rest.as_mut()).is_pending() {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(REFUSAL_BODY_WAIT, rest).await;
                });
            }
            return Ok(refused);
        }
        let declared = match head.framing {
            Framing::Length(length) => Some(length),
            Framing::Chunked | Framing::UntilClose => None,
        };
        let read = async {
            let mut capped = CappedBody::new(declared, held)?;
            lease.read_body(&head, &mut capped).await?;
            Ok(capped.finish())
        };
        let body = read.await;
        if body.is_ok() {
            lease.release();
        }
        Ok(Answer::Body(body))
    }

    /// Send `request` with reqwest and return the response head, whatever its status. Fails with
    /// [`EngineError::Connect`] when nothing could be sent.
    async fn send_reqwest(&self, request: UpstreamRequest) -> Result<reqwest::Response, EngineError> {
        let method = match request.method {
            SearchMethod::Get => reqwest::Method::GET,
            SearchMethod::Post => reqwest::Method::POST,
        };
        let mut builder = self.client.request(method, request.url);
        for (name, value) in &request.headers {
            builder = builder.header(*name, header_value(name, value)?);
        }
        if let Some(body) = &request.body {
            builder = builder.body(body.to_bytes());
        }
        builder.send().await.map_err(transport_error)
    }
}

/// What the upstream answered.
pub(super) enum Answer {
    /// A status other than 2xx (its body is not read).
    Refused {
        /// The status code.
        status: u16,
        /// Its `Retry-After` header, if any.
        retry_after: Option<HeaderValue>,
    },
    /// A 2xx status: the body (within the cap) and its share of the held bytes, or why it could
    /// not be read.
    Body(Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError>),
}

impl Answer {
    /// What a search makes of the answer: the 2xx body, or the status's error.
    fn into_search_body(self) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError> {
        match self {
            Answer::Refused { status, retry_after } => {
                Err(EngineError::from_status(status, retry_after.as_ref().map(HeaderValue::as_bytes)))
            }
            Answer::Body(body) => body,
        }
    }
}

/// A header value as sent; credential headers are marked sensitive (never printed by hyper).
fn header_value(name: &str, value: &HeaderText) -> Result<HeaderValue, EngineError> {
    let mut value = match value {
        // One of `request`'s fixed texts: valid, and shared instead of copied.
        HeaderText::Borrowed(text) => HeaderValue::from_static(text),
        HeaderText::Owned(text) => HeaderValue::from_str(text).map_err(|_| EngineError::InvalidRequest)?,
    };
    value.set_sensitive(name == "authorization" || name == "x-api-key");
    Ok(value)
}

/// The least time a call of `timeout` must have left when it gets its permit to be sent upstream:
/// a tenth of the timeout, at least 100 ms, at most half the timeout. A call that waited longer in
/// the queue is refused as saturated (retryable) instead of sending a request that could only
/// time out.
pub fn min_time_left(timeout: Duration) -> Duration {
    (timeout / 10).max(Duration::from_millis(100)).min(timeout / 2)
}

/// Read `response`'s body with [`CappedBody`].
pub(super) async fn read_capped(
    mut response: reqwest::Response,
    held: Option<&HeldBytes>,
) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError> {
    let mut capped = CappedBody::new(response.content_length(), held)?;
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        capped.push(&chunk)?;
    }
    Ok(capped.finish())
}

/// An answer body being read: at most [`MAX_RESPONSE_BYTES`] (checked against the declared length
/// and while reading). A body over 64 KiB takes its share of `held` (its declared length, or the
/// cap once an undeclared one passes 64 KiB); when that does not fit, the call fails with
/// [`EngineError::HeldFull`] without reading (further).
struct CappedBody<'a> {
    body: Vec<u8>,
    declared: bool,
    share: Option<OwnedSemaphorePermit>,
    held: Option<&'a HeldBytes>,
}

impl<'a> CappedBody<'a> {
    fn new(content_length: Option<u64>, held: Option<&'a HeldBytes>) -> Result<CappedBody<'a>, EngineError> {
        let mut capped = CappedBody { body: Vec::new(), declared: content_length.is_some(), share: None, held };
        if let Some(declared) = content_length {
            if declared > MAX_RESPONSE_BYTES as u64 {
                return Err(EngineError::TooLarge);
            }
            capped.share = capped.take(declared)?;
            // Sized once from the declared length (within the cap), so a large answer is not
            // copied while its buffer doubles, nor left holding up to twice its size.
            capped.body.reserve_exact(usize::try_from(declared).unwrap_or(0));
        }
        Ok(capped)
    }

    fn take(&self, length: u64) -> Result<Option<OwnedSemaphorePermit>, EngineError> {
        self.held.map_or(Ok(None), |held| held.take(Some(length)).map_err(|_| EngineError::HeldFull))
    }

    fn finish(self) -> (Vec<u8>, Option<OwnedSemaphorePermit>) {
        (self.body, self.share)
    }
}

impl BodySink for CappedBody<'_> {
    fn push(&mut self, chunk: &[u8]) -> Result<(), EngineError> {
        if self.body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(EngineError::TooLarge);
        }
        self.body.extend_from_slice(chunk);
        if self.share.is_none() && !self.declared && self.body.len() > UNCOUNTED_RESPONSE_BYTES {
            self.share = self.take(MAX_RESPONSE_BYTES as u64)?;
        }
        Ok(())
    }

    /// A declared body's buffer was reserved for all of it (within the cap, its held bytes
    /// counted): the rest of it is read straight in.
    fn direct(&mut self, left: u64) -> Option<&mut Vec<u8>> {
        if self.declared { spare_within(&mut self.body, left) } else { None }
    }
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
    use crate::engine::request::JsonBody;

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
        let held = engine.permit("p", None, Instant::now() + timeout, timeout).await.expect("free permit");
        let waiter = engine.permit("p", None, Instant::now() + timeout, timeout);
        let release = async {
            tokio::time::sleep(Duration::from_millis(1900)).await;
            drop(held);
        };
        let (granted, ()) = tokio::join!(waiter, release);
        assert_eq!(granted.err(), Some(EngineError::Saturated));
        assert!(engine.permit("p", None, Instant::now() + timeout, timeout).await.is_ok());
    }

    /// A provider's `maxInFlight` is its number of permits, above the engine's default as well as
    /// below it; a reload that changes it takes effect for the next call.
    #[tokio::test]
    async fn a_providers_max_in_flight_is_its_number_of_permits() {
        let engine = Engine::new(EngineConfig { permits_per_provider: 2, ..EngineConfig::default() }).expect("engine");
        // Every permit there is: the first call that has to wait fails after 100 ms, half its
        // timeout (`min_time_left`).
        let timeout = Duration::from_millis(200);
        let take_all = |max_in_flight: Option<usize>| {
            let engine = &engine;
            async move {
                let mut held = Vec::new();
                while let Ok(permit) = engine.permit("p", max_in_flight, Instant::now() + timeout, timeout).await {
                    held.push(permit);
                }
                held
            }
        };
        assert_eq!(take_all(None).await.len(), 2, "the engine's default");
        let five = take_all(Some(5)).await;
        assert_eq!(five.len(), 5, "above the default");
        let one = take_all(Some(1)).await;
        assert_eq!(one.len(), 1, "changed: a new set, whatever the old one still holds");
        assert!(take_all(Some(5)).await.is_empty(), "calls of the old config still share the old set");
        drop(five);
        assert_eq!(take_all(Some(5)).await.len(), 5, "the permits of calls are returned when they end");
        assert!(take_all(Some(1)).await.is_empty(), "the new set is still held");
        drop(one);
        assert_eq!(take_all(Some(1)).await.len(), 1);
    }

    impl Engine {
        /// [`Engine::fetch`] on the driven path whatever the scheme.
        async fn fetch_driven(
            &self,
            request: UpstreamRequest,
        ) -> Result<(Vec<u8>, Option<OwnedSemaphorePermit>), EngineError> {
            self.exchange_http1(&request, None).await?.into_search_body()
        }
    }

    /// A raw HTTP/1.1 server: every request's bytes (head and body) with the number of the
    /// connection it came on; each is answered with `answer`, and a connection is closed after
    /// `per_connection` answers.
    async fn recording_server(
        answer: &'static str,
        per_connection: usize,
    ) -> (url::Url, Arc<Mutex<Vec<(usize, String)>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = url::Url::parse(&format!("http://{}/", listener.local_addr().expect("address"))).expect("url");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            for connection in 0.. {
                let (mut stream, _) = listener.accept().await.expect("accept");
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    for _ in 0..per_connection {
                        let head_end = loop {
                            if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                                break end + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match stream.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length: "))
                            .map_or(0, |n| n.trim().parse::<usize>().expect("length"));
                        while buffer.len() < head_end + length {
                            let mut chunk = [0u8; 4096];
                            let n = stream.read(&mut chunk).await.expect("body");
                            buffer.extend_from_slice(&chunk[..n]);
                        }
                        let request: Vec<u8> = buffer.drain(..head_end + length).collect();
                        record
                            .lock()
                            .expect("record")
                            .push((connection, String::from_utf8_lossy(&request).into_owned()));
                        stream.write_all(answer.as_bytes()).await.expect("answer");
                    }
                });
            }
        });
        (url, seen)
    }

    const ANSWER: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 14\r\n\r\n{\"results\":[]}";

    fn upstream_request(method: SearchMethod, url: &url::Url, path: &str) -> UpstreamRequest {
        let body =
            (method == SearchMethod::Post).then(|| serde_json::json!({"query": "q ü", "user_id": "u", "limit": 5}));
        let mut headers =
            vec![("accept", HeaderText::from("application/json")), ("authorization", "Token s3cret".into())];
        if body.is_some() {
            headers.push(("content-type", "application/json".into()));
        }
        UpstreamRequest {
            method,
            url: url.join(path).expect("url"),
            headers,
            body: body.as_ref().map(JsonBody::from_value),
        }
    }

    /// What reaches the upstream is byte for byte what reqwest sent before: method, target,
    /// every header in its order (`host` last), the body (a GET has none and no length).
    #[tokio::test]
    async fn the_driven_http1_path_sends_the_bytes_reqwest_sends() {
        let (url, seen) = recording_server(ANSWER, 1).await;
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        for (method, path) in
            [(SearchMethod::Post, "v2/memories/search/"), (SearchMethod::Get, "search?query=a+b&user_id=%C3%BC")]
        {
            let request = upstream_request(method, &url, path);
            let response = engine.send_reqwest(request.clone()).await.expect("reqwest");
            assert_eq!(response.status().as_u16(), 200);
            assert_eq!(response.bytes().await.expect("body").as_ref(), b"{\"results\":[]}");
            let (body, _) = engine.fetch_driven(request).await.expect("driven");
            assert_eq!(body, b"{\"results\":[]}");
        }
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.len(), 4);
        for pair in seen.chunks(2) {
            assert_eq!(pair[0].1, pair[1].1, "reqwest, then the driven path");
        }
        assert!(seen[0].1.starts_with("POST /v2/memories/search/ HTTP/1.1\r\n"), "{}", seen[0].1);
        assert!(seen[2].1.starts_with("GET /search?query=a+b&user_id=%C3%BC HTTP/1.1\r\n"), "{}", seen[2].1);
        assert!(!seen[2].1.contains("content-length"), "{}", seen[2].1);
    }

    /// Every call's future holds (and moves, as it is wrapped and awaited) the state of the
    /// upstream exchange: the connect path and the pooled connection are boxed, so that state
    /// stays small. Unboxed, the exchange alone was 3.3 KiB.
    #[tokio::test]
    async fn an_exchange_future_stays_small() {
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let url = url::Url::parse("http://127.0.0.1:1/").expect("url");
        let lease = engine.http1.lease(&url);
        assert!(std::mem::size_of_val(&lease) <= 256, "lease: {} bytes", std::mem::size_of_val(&lease));
        drop(lease);
        let exchange = engine.exchange(upstream_request(SearchMethod::Post, &url, "search"), None);
        assert!(std::mem::size_of_val(&exchange) <= 2048, "exchange: {} bytes", std::mem::size_of_val(&exchange));
    }

    /// Calls after the first reuse its connection; one the upstream closed meanwhile is noticed
    /// before sending and replaced, without failing the call.
    #[tokio::test]
    async fn driven_connections_are_reused_and_a_closed_one_is_replaced() {
        let (url, seen) = recording_server(ANSWER, 2).await;
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        for _ in 0..5 {
            let (body, _) =
                engine.fetch_driven(upstream_request(SearchMethod::Post, &url, "search")).await.expect("answer");
            assert_eq!(body, b"{\"results\":[]}");
            // Time for the upstream's close to arrive before the next call.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let connections: Vec<usize> = seen.lock().expect("seen").iter().map(|(connection, _)| *connection).collect();
        assert_eq!(connections, [0, 0, 1, 1, 2]);
    }

    /// Over real sockets, a connection is reused only after an answer that allows it: a chunked
    /// answer (read to its last chunk and trailers) keeps it; `connection: close`, an answer with
    /// unasked bytes after its body, and one that ends with the connection do not, though the
    /// upstream keeps the first two open. Each answer's body is read whole either way.
    #[tokio::test]
    async fn a_connection_is_reused_only_after_an_answer_that_allows_it() {
        const CHUNKED: &str = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                               6\r\n{\"resu\r\n8;x=y\r\nlts\":[]}\r\n0\r\nx-sum: 1\r\n\r\n";
        const CLOSE: &str = "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 14\r\n\r\n{\"results\":[]}";
        const TRAILING: &str = "HTTP/1.1 200 OK\r\ncontent-length: 14\r\n\r\n{\"results\":[]}HTTP/1.1 200 OK\r\n\r\n";
        const TO_THE_END: &str = "HTTP/1.0 200 OK\r\n\r\n{\"results\":[]}";
        for (answer, per_connection, expected) in
            [(CHUNKED, 3, [0, 0, 0]), (CLOSE, 3, [0, 1, 2]), (TRAILING, 3, [0, 1, 2]), (TO_THE_END, 1, [0, 1, 2])]
        {
            let (url, seen) = recording_server(answer, per_connection).await;
            let engine = Engine::new(EngineConfig::default()).expect("engine");
            for _ in 0..3 {
                let (body, _) =
                    engine.fetch_driven(upstream_request(SearchMethod::Post, &url, "search")).await.expect("answer");
                assert_eq!(body, b"{\"results\":[]}", "{answer:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let connections: Vec<usize> =
                seen.lock().expect("seen").iter().map(|(connection, _)| *connection).collect();
            assert_eq!(connections, expected, "{answer:?}");
        }
    }

    /// A body longer than the read buffer has its end read straight into its own buffer
    /// (`answer::BodySink::direct`): its connection is pooled and reused, unless the upstream
    /// sent unasked bytes behind the body, which stay in the socket; the lease's idle check finds
    /// them (tokio 1.54.1 `io/poll_evented.rs` clears readiness only after a short read or
    /// `WouldBlock`, so the socket stays readable after a read that filled its buffer) and the next
    /// call opens a new connection.
    #[tokio::test]
    async fn bytes_behind_a_body_read_straight_keep_its_connection_out_of_the_pool() {
        let body = format!("{{\"results\":[]}}{}", " ".repeat(20 * 1024));
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
        for (behind, expected) in [("", [0, 0, 0]), ("HTTP/1.1 200 OK\r\n\r\n", [0, 1, 2])] {
            let answer: &'static str = Box::leak(format!("{head}{body}{behind}").into_boxed_str());
            let (url, seen) = recording_server(answer, 3).await;
            let engine = Engine::new(EngineConfig::default()).expect("engine");
            for _ in 0..3 {
                let (read, _) =
                    engine.fetch_driven(upstream_request(SearchMethod::Post, &url, "search")).await.expect("answer");
                assert_eq!(read, body.as_bytes(), "{behind:?}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let connections: Vec<usize> =
                seen.lock().expect("seen").iter().map(|(connection, _)| *connection).collect();
            assert_eq!(connections, expected, "{behind:?}");
        }
    }

    /// On connection threads a pooled connection is leased only by calls on the thread whose
    /// reactor it belongs to: calls alternating between two threads keep one connection each
    /// (one shared connection would have its thread wake the other for every answer).
    #[tokio::test]
    async fn on_connection_threads_each_thread_reuses_only_its_own_connections() {
        let (url, seen) = recording_server(ANSWER, 10).await;
        let engine = Arc::new(Engine::new(EngineConfig::default()).expect("engine"));
        let threads = crate::listener::ConnectionThreads::start("pool", 2).expect("threads");
        for _ in 0..4 {
            let (done, answered) = tokio::sync::oneshot::channel();
            let (engine, request) = (Arc::clone(&engine), upstream_request(SearchMethod::Post, &url, "search"));
            threads.spawn(async move {
                let answer = engine.fetch_driven(request).await.map(|(body, _)| body);
                let _ = done.send(answer);
            });
            assert_eq!(answered.await.expect("the call ran").expect("answer"), b"{\"results\":[]}");
        }
        let connections: Vec<usize> = seen.lock().expect("seen").iter().map(|(connection, _)| *connection).collect();
        assert_eq!(connections, [0, 1, 0, 1]);
        // The shared runtime's calls use connections of their own too.
        engine.fetch_driven(upstream_request(SearchMethod::Post, &url, "search")).await.expect("answer");
        assert_eq!(seen.lock().expect("seen").last().map(|(connection, _)| *connection), Some(2));
    }

    /// A connection idle for the idle timeout is not taken for a call: a Mem0 server (uvicorn,
    /// keep-alive 5 s; see [`UPSTREAM_IDLE_TIMEOUT`]) may be closing it at that very moment. The
    /// upstream here keeps it open, so only the pool's own rule can make the second call connect anew.
    #[tokio::test]
    async fn a_connection_idle_for_the_idle_timeout_is_not_reused() {
        const UVICORN_KEEP_ALIVE: Duration = Duration::from_secs(5);
        assert!(UPSTREAM_IDLE_TIMEOUT < UVICORN_KEEP_ALIVE);
        let (url, seen) = recording_server(ANSWER, 2).await;
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let request = || upstream_request(SearchMethod::Post, &url, "search");
        engine.fetch_driven(request()).await.expect("first answer");
        tokio::time::sleep(UPSTREAM_IDLE_TIMEOUT + Duration::from_millis(200)).await;
        engine.fetch_driven(request()).await.expect("second answer");
        let connections: Vec<usize> = seen.lock().expect("seen").iter().map(|(connection, _)| *connection).collect();
        assert_eq!(connections, [0, 1], "the idle connection was not reused");
    }

    /// A call dropped while waiting for its answer (its deadline passed) closes its connection
    /// instead of pooling it with an answer still to come.
    #[tokio::test]
    async fn a_dropped_driven_call_closes_its_connection() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = url::Url::parse(&format!("http://{}/", listener.local_addr().expect("address"))).expect("url");
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let call = engine.fetch_driven(upstream_request(SearchMethod::Post, &url, "search"));
        let (mut stream, _) = tokio::select! {
            accepted = listener.accept() => accepted.expect("accept"),
            _ = call => panic!("answered without an answer"),
        };
        // The call future was dropped by select; the upstream sees the connection end.
        let mut rest = Vec::new();
        let read = timeout_at(Instant::now() + Duration::from_secs(10), stream.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the connection was closed");
        assert!(engine.http1.is_empty(), "nothing pooled");
    }

    /// A keep-alive connection left idle after an answer is closed by the gateway within twice
    /// [`UPSTREAM_IDLE_TIMEOUT`] (before: kept for reqwest's 90 s default), on reqwest's path and on
    /// the driven one (a short refusal keeps its connection on both). The bound below adds 10 s
    /// for a loaded machine and is still far from 90 s.
    #[tokio::test]
    async fn an_idle_upstream_connection_is_closed_within_twice_the_idle_timeout() {
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let reqwest_path = async {
            let (url, server) = idle_watching_server().await;
            let request = UpstreamRequest { method: SearchMethod::Get, url, headers: Vec::new(), body: None };
            let response = engine.send_reqwest(request).await.expect("an answer");
            assert_eq!(response.status().as_u16(), 429);
            drop(response);
            server.await
        };
        let driven_path = async {
            let (url, server) = idle_watching_server().await;
            let request = UpstreamRequest { method: SearchMethod::Get, url, headers: Vec::new(), body: None };
            assert!(matches!(engine.fetch_driven(request).await, Err(EngineError::RateLimited { .. })));
            server.await
        };
        let bound = UPSTREAM_IDLE_TIMEOUT * 2 + Duration::from_secs(10);
        let (reqwest_idle, driven_idle) =
            timeout_at(Instant::now() + bound, async { tokio::join!(reqwest_path, driven_path) })
                .await
                .expect("closed within the bound");
        for idle in [reqwest_idle.expect("server"), driven_idle.expect("server")] {
            assert!(idle >= UPSTREAM_IDLE_TIMEOUT / 2, "closed after {idle:?}: pooled, not closed at once");
        }
    }

    /// A refusal is returned as soon as its head is read: a body that never comes costs the call
    /// nothing (before, the call waited for it until its deadline and failed as a timeout), and
    /// the connection is closed after [`REFUSAL_BODY_WAIT`] instead of pooled.
    #[tokio::test]
    async fn a_refusal_is_returned_without_waiting_for_its_body() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (listener, url) = search_listener().await;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = [0u8; 4096];
            assert!(stream.read(&mut request).await.expect("request") > 0);
            let head = b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\ncontent-length: 10\r\n\r\n";
            stream.write_all(head).await.expect("head");
            let answered = Instant::now();
            // The body's 10 bytes never come; the gateway ends the connection.
            while stream.read(&mut request).await.is_ok_and(|read| read > 0) {}
            answered.elapsed()
        });
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let request = UpstreamRequest { method: SearchMethod::Get, url, headers: Vec::new(), body: None };
        let refused = timeout_at(Instant::now() + REFUSAL_BODY_WAIT, engine.fetch_driven(request))
            .await
            .expect("returned before the body could have been waited for");
        assert!(matches!(refused, Err(EngineError::RateLimited { retry_after_seconds: Some(3) })), "{refused:?}");
        let open_for = timeout_at(Instant::now() + REFUSAL_BODY_WAIT + Duration::from_secs(10), server)
            .await
            .expect("the connection was closed")
            .expect("server");
        assert!(open_for >= REFUSAL_BODY_WAIT / 2, "closed after {open_for:?}: its body had its time");
        assert!(engine.http1.is_empty(), "not pooled");
    }

    /// A refusal whose body follows its head a moment later is returned at once, and its
    /// connection, read to the end in the background, carries the next call.
    #[tokio::test]
    async fn a_refusals_connection_is_kept_when_its_body_comes_later() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (listener, url) = search_listener().await;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = [0u8; 4096];
            assert!(stream.read(&mut request).await.expect("first request") > 0);
            stream.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 7\r\n\r\n").await.expect("head");
            tokio::time::sleep(Duration::from_millis(100)).await;
            stream.write_all(b"{\"x\":1}").await.expect("body");
            assert!(stream.read(&mut request).await.expect("second request") > 0, "the connection was reused");
            stream.write_all(ANSWER.as_bytes()).await.expect("answer");
        });
        let engine = Engine::new(EngineConfig::default()).expect("engine");
        let request =
            || UpstreamRequest { method: SearchMethod::Get, url: url.clone(), headers: Vec::new(), body: None };
        let refused = engine.fetch_driven(request()).await;
        assert!(matches!(refused, Err(EngineError::ServerError(503))), "{refused:?}");
        assert!(engine.http1.is_empty(), "returned before its body was read");
        let pooled_by = Instant::now() + Duration::from_secs(10);
        while engine.http1.is_empty() && Instant::now() < pooled_by {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!engine.http1.is_empty(), "pooled once its body was read");
        let (body, _) = engine.fetch_driven(request()).await.expect("answer on the same connection");
        assert_eq!(body, b"{\"results\":[]}");
        timeout_at(Instant::now() + Duration::from_secs(10), server).await.expect("server done").expect("server");
    }

    /// A loopback listener for a raw upstream, and the `/search` URL that reaches it.
    async fn search_listener() -> (tokio::net::TcpListener, url::Url) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = url::Url::parse(&format!("http://{}/search", listener.local_addr().expect("address"))).expect("url");
        (listener, url)
    }

    /// A server answering one request with 429 and keep-alive; the task ends with how long the
    /// connection then stayed open.
    async fn idle_watching_server() -> (url::Url, tokio::task::JoinHandle<Duration>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (listener, url) = search_listener().await;
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
        (url, server)
    }
}
