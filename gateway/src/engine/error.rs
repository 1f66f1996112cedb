//! Engine failures and their Nexent classification.
//!
//! Owns [`EngineError`] and its mapping to Nexent's `ProviderError` `code` / `severity` (Nexent
//! reference §3). Every message is fixed text: it never contains the query, the endpoint, the
//! credential, an upstream body or a transport library's error text (a `reqwest::Error` prints its
//! URL, so it is never formatted or stored). Only an HTTP status number may appear.

use serde::Serialize;

/// Why one upstream search failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The provider's timeout (which bounds the whole call) passed while the upstream request was
    /// in flight.
    #[error("the upstream request timed out")]
    Timeout,
    /// All of the provider's concurrent-request permits stayed taken until the deadline; the
    /// upstream service was not called.
    #[error("too many concurrent requests to this provider")]
    Saturated,
    /// The upstream answer is over 64 KiB and the gateway's budget of large answer bytes
    /// (`--max-held-response-bytes`) is spent, mostly by answers waiting for clients that do not
    /// read: the body was not read. Answered like the listener's own refusal for that budget (503,
    /// `provider_error`, retryable after a second).
    #[error("the gateway holds as many large answer bytes as it allows")]
    HeldFull,
    /// The upstream answered a 3xx; redirects are never followed.
    #[error("the upstream answered with a redirect (HTTP {0}), which is never followed")]
    Redirect(u16),
    /// A limit of the provider (`spec.limits`) refused the call; the upstream was not called.
    ///
    /// Nexent sees it as an upstream 429 (`rate_limited`, retryable, `retry_after_seconds` set).
    /// Its `execute_with_retry` (ModelEngine-Group/nexent `sdk/nexent/memory/providers/retry.py`
    /// at 531d670) retries a `rate_limited` error up to 3 attempts with its own backoff (1 s x 2^n,
    /// jittered x0.5-1.5, capped at 30 s) and ignores `retry_after_seconds`: a limited Nexent caller
    /// makes up to 3 refused calls per request, each answered here without an upstream request.
    #[error("a limit of this provider refused the call")]
    Limited {
        /// Which limit.
        limit: crate::limits::Limit,
        /// Whole seconds until the call could pass.
        retry_after_seconds: u64,
    },
    /// The upstream answered 429.
    #[error("the upstream rate-limited the request (HTTP 429)")]
    RateLimited {
        /// Whole seconds from a numeric `Retry-After` header.
        retry_after_seconds: Option<u64>,
    },
    /// The upstream answered 401.
    #[error("the upstream refused the credential (HTTP 401)")]
    Unauthorized,
    /// The upstream answered 403.
    #[error("the upstream denied access (HTTP 403)")]
    Forbidden,
    /// The upstream refused the request as invalid (400, 409, 422).
    #[error("the upstream rejected the request (HTTP {0})")]
    Rejected(u16),
    /// Any other 4xx (404 among them), or a status outside 200..=599.
    #[error("the upstream answered with an unexpected status (HTTP {0})")]
    UpstreamStatus(u16),
    /// The upstream answered 5xx.
    #[error("the upstream failed (HTTP {0})")]
    ServerError(u16),
    /// No connection could be made (refused, unreachable, DNS, TLS handshake): nothing was sent.
    #[error("could not connect to the upstream")]
    Connect,
    /// The connection failed after the request was sent (reset, truncated body, protocol error).
    #[error("the upstream connection failed")]
    Transport,
    /// The response body is larger than [`crate::engine::MAX_RESPONSE_BYTES`].
    #[error("the upstream response is too large")]
    TooLarge,
    /// The response body is not valid UTF-8.
    #[error("the upstream response is not valid UTF-8")]
    InvalidUtf8,
    /// The response body is not valid JSON.
    #[error("the upstream response is not valid JSON")]
    InvalidJson,
    /// The response JSON does not have the dialect's collection shape.
    #[error("the upstream response does not match the dialect's collection")]
    SchemaMismatch,
    /// The request could not be built from the provider configuration (missing scope value,
    /// unusable URL or credential). Validation should make this unreachable.
    #[error("the upstream request could not be built from the provider configuration")]
    InvalidRequest,
}

/// Nexent `ProviderErrorCode` values the engine produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// `timeout`.
    Timeout,
    /// `rate_limited`.
    RateLimited,
    /// `provider_error`.
    ProviderError,
    /// `unauthorized`.
    Unauthorized,
    /// `forbidden`.
    Forbidden,
    /// `invalid_payload`.
    InvalidPayload,
    /// `schema_mismatch`.
    SchemaMismatch,
}

impl ErrorCode {
    /// The wire value, also the `error_code` metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Timeout => "timeout",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::ProviderError => "provider_error",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::InvalidPayload => "invalid_payload",
            ErrorCode::SchemaMismatch => "schema_mismatch",
        }
    }
}

/// Nexent `severity` values the engine produces (it never produces `degradable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Trying again later may succeed.
    Retryable,
    /// Trying again will fail the same way until configuration or data changes.
    NonRetryable,
}

impl Severity {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Retryable => "retryable",
            Severity::NonRetryable => "non_retryable",
        }
    }
}

impl EngineError {
    /// Nexent `code`.
    pub fn code(&self) -> ErrorCode {
        match self {
            EngineError::Timeout => ErrorCode::Timeout,
            EngineError::Saturated | EngineError::Limited { .. } | EngineError::RateLimited { .. } => {
                ErrorCode::RateLimited
            }
            EngineError::Unauthorized => ErrorCode::Unauthorized,
            EngineError::Forbidden => ErrorCode::Forbidden,
            EngineError::Redirect(_)
            | EngineError::UpstreamStatus(_)
            | EngineError::ServerError(_)
            | EngineError::Connect
            | EngineError::Transport
            | EngineError::HeldFull
            | EngineError::InvalidRequest => ErrorCode::ProviderError,
            EngineError::Rejected(_) | EngineError::TooLarge | EngineError::InvalidUtf8 | EngineError::InvalidJson => {
                ErrorCode::InvalidPayload
            }
            EngineError::SchemaMismatch => ErrorCode::SchemaMismatch,
        }
    }

    /// Nexent `severity`.
    pub fn severity(&self) -> Severity {
        match self {
            EngineError::Timeout
            | EngineError::Saturated
            | EngineError::Limited { .. }
            | EngineError::RateLimited { .. }
            | EngineError::ServerError(_)
            | EngineError::Connect
            | EngineError::HeldFull
            | EngineError::Transport => Severity::Retryable,
            EngineError::Redirect(_)
            | EngineError::Unauthorized
            | EngineError::Forbidden
            | EngineError::Rejected(_)
            | EngineError::UpstreamStatus(_)
            | EngineError::TooLarge
            | EngineError::InvalidUtf8
            | EngineError::InvalidJson
            | EngineError::SchemaMismatch
            | EngineError::InvalidRequest => Severity::NonRetryable,
        }
    }

    /// The upstream's HTTP status, when the error is its answer.
    pub fn upstream_status(&self) -> Option<u16> {
        match self {
            EngineError::Redirect(status)
            | EngineError::Rejected(status)
            | EngineError::UpstreamStatus(status)
            | EngineError::ServerError(status) => Some(*status),
            EngineError::RateLimited { .. } => Some(429),
            EngineError::Unauthorized => Some(401),
            EngineError::Forbidden => Some(403),
            _ => None,
        }
    }

    /// Nexent `retry_after_seconds`: set for a limit's refusal, a spent held-bytes budget (1 s), and
    /// for a 429 with a numeric `Retry-After`.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            EngineError::Limited { retry_after_seconds, .. } => Some(*retry_after_seconds),
            EngineError::RateLimited { retry_after_seconds } => *retry_after_seconds,
            EngineError::HeldFull => Some(1),
            _ => None,
        }
    }

    /// The error for a non-2xx status; `retry_after` is the raw `Retry-After` header, if any.
    pub fn from_status(status: u16, retry_after: Option<&[u8]>) -> EngineError {
        match status {
            300..=399 => EngineError::Redirect(status),
            401 => EngineError::Unauthorized,
            403 => EngineError::Forbidden,
            429 => EngineError::RateLimited { retry_after_seconds: retry_after.and_then(parse_retry_after) },
            400 | 409 | 422 => EngineError::Rejected(status),
            500..=599 => EngineError::ServerError(status),
            _ => EngineError::UpstreamStatus(status),
        }
    }
}

/// Whole seconds of a delta-seconds `Retry-After`; an HTTP date or anything else gives `None`.
fn parse_retry_after(raw: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(raw).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_nexent_codes() {
        let cases = [
            (302, ErrorCode::ProviderError, Severity::NonRetryable),
            (400, ErrorCode::InvalidPayload, Severity::NonRetryable),
            (401, ErrorCode::Unauthorized, Severity::NonRetryable),
            (403, ErrorCode::Forbidden, Severity::NonRetryable),
            (404, ErrorCode::ProviderError, Severity::NonRetryable),
            (413, ErrorCode::ProviderError, Severity::NonRetryable),
            (422, ErrorCode::InvalidPayload, Severity::NonRetryable),
            (429, ErrorCode::RateLimited, Severity::Retryable),
            (500, ErrorCode::ProviderError, Severity::Retryable),
            (503, ErrorCode::ProviderError, Severity::Retryable),
        ];
        for (status, code, severity) in cases {
            let err = EngineError::from_status(status, None);
            assert_eq!((err.code(), err.severity()), (code, severity), "{status}");
        }
    }

    #[test]
    fn retry_after_is_kept_only_when_numeric() {
        let numeric = EngineError::from_status(429, Some(b" 7 "));
        assert_eq!(numeric.retry_after_seconds(), Some(7));
        for raw in [&b"Wed, 21 Oct 2026 07:28:00 GMT"[..], b"-1", b"1.5", b"", b"\xff"] {
            assert_eq!(EngineError::from_status(429, Some(raw)).retry_after_seconds(), None);
        }
        assert_eq!(EngineError::from_status(503, Some(b"7")).retry_after_seconds(), None);
    }

    #[test]
    fn codes_serialize_as_nexent_wire_values() {
        assert_eq!(serde_json::to_value(ErrorCode::RateLimited).ok(), Some(serde_json::json!("rate_limited")));
        assert_eq!(serde_json::to_value(Severity::NonRetryable).ok(), Some(serde_json::json!("non_retryable")));
        assert_eq!(ErrorCode::InvalidPayload.as_str(), "invalid_payload");
    }
}
