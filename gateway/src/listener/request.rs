//! The per-request side of a listener: the in-flight cap, reading the body whole within its time and
//! size limits, and tracking the request until its response has been handed to the connection.
//!
//! It owns the answers given before routing (503 at the in-flight cap, 408 for a body that does
//! not arrive in time, 413 for one that is too large, 400 for a broken one) and the one given after
//! it (503 when a large answer would exceed the bytes held for slow readers, [`HeldBytes`], a
//! budget the engine shares for the upstream answers it is reading);
//! everything else is the router's. Bodies are read here, whole, so no handler ever waits on a
//! trickling client.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderValue, Request, Response, StatusCode};
use futures::future::BoxFuture;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

use super::activity::{Activity, InFlight};
use super::limits::{ListenerLimits, MAX_BODY_BYTES};
use crate::held_bytes::HeldBytes;

/// A route answered without the router: the answer to a request it takes, or the request back.
pub type Direct = Arc<dyn Fn(Request<Body>) -> DirectAnswer + Send + Sync>;

/// What a [`Direct`] route does with a request.
#[expect(clippy::large_enum_variant, reason = "moved once, never stored: boxing would allocate per request")]
pub enum DirectAnswer {
    /// Taken: its answer.
    Taken(BoxFuture<'static, Response<Body>>),
    /// Not one of the route's: back for the router.
    Declined(Request<Body>),
}

/// What every request of one listener shares.
pub struct Shared {
    /// The routes.
    pub router: Router,
    /// Routes taken before the router, when the listener has them.
    pub direct: Option<Direct>,
    /// Permits for requests in flight (the listener's `max_in_flight`).
    pub in_flight: Arc<Semaphore>,
    /// The budget of large response bytes held for readers.
    pub held: HeldBytes,
    /// The limits.
    pub limits: ListenerLimits,
}

/// Serve one request of a connection whose activity is `activity`.
pub async fn serve(
    shared: Arc<Shared>,
    activity: Arc<Activity>,
    client: super::ClientAddr,
    request: Request<Incoming>,
) -> Result<Response<TrackedBody>, Infallible> {
    let guard = activity.start(request.version());
    let Ok(permit) = Arc::clone(&shared.in_flight).try_acquire_owned() else {
        return Ok(finish(refusal(StatusCode::SERVICE_UNAVAILABLE, BUSY), guard, None));
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(client);
    let declared = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Ok(finish(refusal(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE), guard, Some(permit)));
    }
    let read = tokio::time::timeout(shared.limits.body_read_timeout, Limited::new(body, MAX_BODY_BYTES).collect());
    let bytes = match read.await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(err)) if err.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return Ok(finish(refusal(StatusCode::PAYLOAD_TOO_LARGE, TOO_LARGE), guard, Some(permit)));
        }
        Ok(Err(_)) => return Ok(finish(refusal(StatusCode::BAD_REQUEST, BROKEN), guard, Some(permit))),
        Err(_) => return Ok(finish(refusal(StatusCode::REQUEST_TIMEOUT, SLOW_BODY), guard, Some(permit))),
    };
    let request = Request::from_parts(parts, Body::from(bytes));
    let routed = match &shared.direct {
        Some(direct) => direct(request),
        None => DirectAnswer::Declined(request),
    };
    let response = match routed {
        DirectAnswer::Taken(answer) => answer.await,
        DirectAnswer::Declined(request) => match shared.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
    };
    let Ok(held) = shared.held.take(response.body().size_hint().exact()) else {
        // Dropping the response frees its body now rather than when a stalled reader times out.
        return Ok(finish(refusal(StatusCode::SERVICE_UNAVAILABLE, HELD_FULL), guard, Some(permit)));
    };
    Ok(finish_held(response, guard, Some(permit), held))
}

const BUSY: &str = "The gateway is serving as many requests as it allows; retry later.";
const TOO_LARGE: &str = "The request body is too large.";
const BROKEN: &str = "The request body could not be read.";
const SLOW_BODY: &str = "The request body did not arrive in time.";
const HELD_FULL: &str = "The gateway holds as many answer bytes for slow readers as it allows; retry later.";

/// A refusal in the gateway's error JSON (`{code, severity, message, retry_after_seconds}`); the
/// connection is closed after it (the rest of the body is not read). 503 asks to retry after a
/// second, 408 is a retryable `timeout`, the others are non-retryable `invalid_payload`.
fn refusal(status: StatusCode, message: &'static str) -> Response<Body> {
    let (code, severity, retry_after) = match status {
        StatusCode::SERVICE_UNAVAILABLE => ("provider_error", "retryable", Some(1)),
        StatusCode::REQUEST_TIMEOUT => ("timeout", "retryable", None),
        _ => ("invalid_payload", "non_retryable", None),
    };
    let retry = retry_after.is_some();
    let body = serde_json::json!({
        "code": code, "severity": severity, "message": message, "retry_after_seconds": retry_after,
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    if retry {
        headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// Mark the response ready and track its body until it is sent.
fn finish(response: Response<Body>, guard: InFlight, permit: Option<OwnedSemaphorePermit>) -> Response<TrackedBody> {
    finish_held(response, guard, permit, None)
}

/// [`finish`], also holding `bytes` of the held-bytes budget until the body is sent.
fn finish_held(
    response: Response<Body>,
    guard: InFlight,
    permit: Option<OwnedSemaphorePermit>,
    bytes: Option<OwnedSemaphorePermit>,
) -> Response<TrackedBody> {
    guard.responding();
    response.map(|inner| TrackedBody { inner, held: Some(Held { _request: guard, _permit: permit, _bytes: bytes }) })
}

/// What a response keeps until it is sent: its request in flight, its in-flight permit and its
/// share of the held-bytes budget.
struct Held {
    _request: InFlight,
    _permit: Option<OwnedSemaphorePermit>,
    _bytes: Option<OwnedSemaphorePermit>,
}

/// A response body that keeps its request in flight (and its in-flight permit, and its held bytes)
/// until the connection has written all but its buffer's worth of it, or the body is dropped.
pub struct TrackedBody {
    inner: Body,
    held: Option<Held>,
}

impl HttpBody for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if frame.is_none() {
            self.held = None;
        }
        Poll::Ready(frame)
    }

    /// Never "ended" before the final `None` has been polled: hyper drops a body it knows to be at
    /// its end right after queueing the last frame, which would end the tracking before the
    /// response was written. This way hyper polls once more, and only when it can buffer again
    /// (HTTP/1: less than the buffer size left unwritten), so the write timeout covers the write.
    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_the_error_json_and_close_the_connection() {
        for (status, code, severity, retry_after) in [
            (StatusCode::SERVICE_UNAVAILABLE, "provider_error", "retryable", Some("1")),
            (StatusCode::REQUEST_TIMEOUT, "timeout", "retryable", None),
            (StatusCode::PAYLOAD_TOO_LARGE, "invalid_payload", "non_retryable", None),
        ] {
            let response = refusal(status, "m");
            assert_eq!(response.headers().get(CONNECTION).and_then(|v| v.to_str().ok()), Some("close"));
            assert_eq!(response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()), retry_after);
            let body = futures::executor::block_on(response.into_body().collect()).expect("body").to_bytes();
            let json: serde_json::Value = serde_json::from_slice(&body).expect("json");
            assert_eq!((json["code"].as_str(), json["severity"].as_str()), (Some(code), Some(severity)), "{status}");
        }
    }
}
