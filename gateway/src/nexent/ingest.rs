//! `POST /nexent/v1/{provider}/ingest`: Nexent's `MemoryIngestRequest` in, `MemoryIngestResult` out.
//!
//! A completed call is 200 whatever its `status` (`ok`, `partial`, `error`: the unit results say
//! why). A call-level failure is the error JSON of [`ApiError`], as for search, plus:
//!
//! | case | status | code | severity |
//! |---|---|---|---|
//! | provider without `nexent.ingest` | 404 | `provider_error` | non_retryable |
//! | provider without a verified write contract | 404 | `provider_error` | non_retryable |
//! | ingest kill switch off | 503 | `provider_error` | retryable |
//! | body not a `MemoryIngestRequest`, or over a bound of [`crate::ingest::validate`] | 400 | `invalid_payload` | non_retryable |
//! | the same unit is being written by another call | 409 | `provider_error` | retryable |
//! | idempotency ledger unavailable | 503 | `provider_error` | retryable |
//! | the provider's ledger share is full inside the retry window | 429 + `Retry-After` | `rate_limited` | retryable |
//!
//! Checks run in this order: provider (404), caller (401 / 403 / 503), ingest kill switch (503),
//! body (413 / 400), then the ingest. The ingest runs in its own task, so a caller that goes away
//! does not leave a unit half-done (it would otherwise lapse into degraded); the task is told
//! through a cancellation token, finishes the unit it is writing and starts no other. The call has
//! one deadline (`--ingest-call-timeout-ms`): no unit starts after it, and the call then fails with
//! 504 `timeout` (retryable: the units written are in the ledger, a retry writes the rest).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::admission::{Admitted, admit};
use super::{ApiError, json_response};
use crate::engine::Severity;
use crate::ingest::{CallControl, IngestError, IngestRequest, LedgerError};
use crate::listener::ClientAddr;
use crate::metrics::Operation;
use crate::state::AppState;
use tokio_util::sync::CancellationToken;

impl ApiError {
    /// 404: the provider has no verified write contract.
    pub fn not_writable() -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "provider_error",
            Severity::NonRetryable,
            "This provider cannot ingest: its dialect has no verified write contract.",
        )
    }

    /// 503: the ingest kill switch is off.
    pub fn ingest_switched_off() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "provider_error",
            Severity::Retryable,
            "External memory ingest is disabled.",
        )
    }

    /// 400: the body is not a `MemoryIngestRequest`.
    pub fn bad_ingest_request() -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_payload",
            Severity::NonRetryable,
            "The request must be a JSON MemoryIngestRequest object: `tenant_id`, `user_id`, `idempotency_key` \
             and `units` (each with `event_id`, `event_type`, `unit_type` and `unit_content`).",
        )
    }

    /// 500: the ingest task ended without an answer.
    pub fn internal() -> ApiError {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "provider_error",
            Severity::Retryable,
            "The gateway failed to finish the request.",
        )
    }

    /// The response to an ingest that failed as a whole.
    pub fn from_ingest(err: &IngestError) -> ApiError {
        let retryable = |status, message| ApiError::new(status, "provider_error", Severity::Retryable, message);
        match err {
            IngestError::InvalidPayload(message) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_payload", Severity::NonRetryable, message)
            }
            IngestError::NotWritable => ApiError::not_writable(),
            IngestError::InProgress => retryable(
                StatusCode::CONFLICT,
                "Another request with the same idempotency key is still being written; retry later.",
            ),
            IngestError::Ledger(LedgerError::Full { retry_after_seconds }) => {
                let mut api = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    Severity::Retryable,
                    "The gateway's idempotency ledger is full for this provider; retry later.",
                );
                api.body.retry_after_seconds = Some(*retry_after_seconds);
                api
            }
            IngestError::Ledger(_) => {
                retryable(StatusCode::SERVICE_UNAVAILABLE, "The gateway's idempotency ledger is unavailable.")
            }
            IngestError::DeadlineExceeded { .. } | IngestError::Cancelled { .. } => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "timeout",
                Severity::Retryable,
                "The ingest call reached its deadline; units written so far are recorded and a retry writes the rest.",
            ),
            IngestError::Upstream { error, .. } => ApiError::from_engine(error),
        }
    }
}

pub(super) async fn ingest(
    State(state): State<Arc<AppState>>,
    Path(provider): Path<String>,
    client: Option<Extension<ClientAddr>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let call = admit(&state, &provider, Operation::NexentIngest, &headers, client.map(|c| c.0), body).await?;
    let request = parse_ingest_body(&call.body).ok_or_else(|| call.refuse(&state, ApiError::bad_ingest_request()))?;
    let Admitted { provider, caller, .. } = call;
    let task_state = Arc::clone(&state);
    let cancelled = CancellationToken::new();
    let control = CallControl::new(state.settings().ingest_call_timeout, cancelled.clone());
    // Dropped with this handler when the caller goes away (hyper drops the request future on
    // EOF): the task then stops before its next unit.
    let _caller_gone = cancelled.drop_guard();
    let work = async move { task_state.ingest(&provider, &caller, request, &control).await };
    let task = tokio::spawn(memgate_telemetry::in_current_trace(work));
    match task.await {
        Ok(Ok(result)) => Ok(json_response(StatusCode::OK, &result)),
        Ok(Err(err)) => Err(ApiError::from_ingest(&err)),
        Err(_) => Err(ApiError::internal()),
    }
}

/// An ingest request body as a request, or `None` when it is not a JSON object of the right shape.
/// Pure; public for the fuzz targets.
pub fn parse_ingest_body(bytes: &[u8]) -> Option<IngestRequest> {
    // Through `Value` so that only an object is accepted (serde would also read a struct from an array).
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if !value.is_object() {
        return None;
    }
    serde_json::from_value(value).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::engine::EngineError;

    fn parsed(value: serde_json::Value) -> Option<IngestRequest> {
        parse_ingest_body(&serde_json::to_vec(&value).expect("json"))
    }

    #[test]
    fn requests_parse_with_defaults_and_shapes_are_refused() {
        let ok = json!({"tenant_id": "t", "user_id": "u", "idempotency_key": "k", "units": [], "later": 1});
        assert!(parsed(ok).is_some());
        for bad in [
            json!([]),
            json!({"tenant_id": "t", "user_id": "u", "units": []}),
            json!({"tenant_id": "t", "user_id": "u", "idempotency_key": "k", "units": [{"event_id": "e"}]}),
            json!({"tenant_id": 1, "user_id": "u", "idempotency_key": "k", "units": []}),
        ] {
            assert!(parsed(bad.clone()).is_none(), "{bad}");
        }
        assert!(parse_ingest_body(b"{nope").is_none());
    }

    #[test]
    fn ingest_errors_map_to_statuses() {
        let cases = [
            (
                IngestError::InvalidPayload("`units` may hold at most 100 units per request"),
                400,
                "invalid_payload",
                "non_retryable",
            ),
            (IngestError::NotWritable, 404, "provider_error", "non_retryable"),
            (IngestError::InProgress, 409, "provider_error", "retryable"),
            (IngestError::Ledger(LedgerError::Unavailable), 503, "provider_error", "retryable"),
            (IngestError::Ledger(LedgerError::Full { retry_after_seconds: 9 }), 429, "rate_limited", "retryable"),
            (IngestError::DeadlineExceeded { written: 3 }, 504, "timeout", "retryable"),
            (
                IngestError::Upstream { error: EngineError::Unauthorized, accepted_before: 1 },
                502,
                "unauthorized",
                "non_retryable",
            ),
            (
                IngestError::Upstream { error: EngineError::ServerError(503), accepted_before: 0 },
                502,
                "provider_error",
                "retryable",
            ),
            (
                IngestError::Upstream { error: EngineError::Connect, accepted_before: 0 },
                502,
                "provider_error",
                "retryable",
            ),
            (IngestError::Upstream { error: EngineError::Timeout, accepted_before: 0 }, 504, "timeout", "retryable"),
        ];
        for (err, status, code, severity) in cases {
            let api = ApiError::from_ingest(&err);
            assert_eq!((api.status.as_u16(), api.body.code, api.body.severity), (status, code, severity), "{err:?}");
        }
        let limited = IngestError::Upstream {
            error: EngineError::RateLimited { retry_after_seconds: Some(4) },
            accepted_before: 0,
        };
        let api = ApiError::from_ingest(&limited);
        assert_eq!((api.status.as_u16(), api.body.retry_after_seconds), (429, Some(4)));
    }
}
