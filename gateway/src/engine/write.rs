//! The upstream add call of the ingest (write) path: one request per memory unit.
//!
//! Owned by the ingest work (`crate::ingest` is its only caller). Like search, this is engine code:
//! the only place a write reaches the upstream. [`build_add_request`] is pure; [`Engine::add`]
//! sends under the provider's permits and one deadline (the provider timeout), never follows a
//! redirect, never retries and reads at most 1 MiB.
//!
//! The request is `POST <origin><basePath><contract.path>` with
//! `{messages: [{role: "user", content}], user_id?, agent_id?, app_id?, infer: false, metadata?}`:
//! the scope ids the target configures go at the body root; `metadata` is
//! `{source: "memgate", nexent_event_id, nexent_unit_type}` when the contract allows it. Headers are
//! those of a POST search: `accept`, the auth header, `content-type`.
//!
//! Outcome policy (a unit outcome, or a call-level [`EngineError`]):
//!
//! | upstream | result |
//! |---|---|
//! | 2xx, answer recognised as stored or queued | [`WriteOutcome::Accepted`] |
//! | 2xx, answer says the add failed (`FAILED`) | [`WriteOutcome::Rejected`] |
//! | 2xx, answer not recognised / unreadable / over 1 MiB / cut off | [`WriteOutcome::Degraded`] |
//! | 400, 409, 413, 422 | [`WriteOutcome::Rejected`] with a fixed reason |
//! | deadline passed or connection lost after sending | [`WriteOutcome::Degraded`] (never accepted) |
//! | 401 / 403 | `Err(Unauthorized)` / `Err(Forbidden)`, non-retryable |
//! | 500, 502, 504 | [`WriteOutcome::Degraded`] with a fixed reason (never accepted) |
//! | 429 | `Err(RateLimited)` with `Retry-After`, retryable |
//! | 503, any other 5xx | `Err(ServerError)`, retryable |
//! | connection refused (nothing sent) | `Err(Connect)`, retryable |
//! | all permits taken until the deadline (nothing sent) | `Err(Saturated)`, retryable |
//! | 3xx, 404, any other status | `Err(Redirect)` / `Err(UpstreamStatus)`, non-retryable |
//!
//! 500, 502 and 504 mean "request sent, outcome unknown": the service may have stored the unit
//! and failed afterwards, or an ingress/proxy in front of it may have lost (502) or given up
//! waiting for (504) the answer of a service that did store it. Treating them as "not stored"
//! would let Nexent's retry (same idempotency key) write the unit a second time on an upstream
//! that does not drop repeats, so they are a degraded unit, like a timeout after sending. 503 stays
//! a retryable call-level error: it is the service (or its ingress) saying it did not take the
//! request, e.g. overloaded or no ready backend, so a retry is what it asks for. Other 5xx keep
//! the engine's call-level classification.
//!
//! A reason is fixed text: it never contains the upstream body, the content, the URL or the
//! credential.

use memgate_crds::{AuthScheme, SearchMethod};
use memgate_presets::{WriteAnswer, WriteContract};
use reqwest::header::HeaderValue;
use serde_json::{Map, Value, json};
use tokio::time::{Instant, timeout_at};

use super::client::{Answer, Engine};
use super::error::EngineError;
use super::request::{JsonBody, Target, UpstreamRequest, upstream_headers};

/// Reason of a unit the upstream refused as invalid (400, 422).
pub const REASON_INVALID: &str = "the upstream refused the unit as invalid";
/// Reason of a unit the upstream refused as conflicting (409).
pub const REASON_CONFLICT: &str = "the upstream refused the unit as conflicting";
/// Reason of a unit the upstream refused as too large or over quota (413).
pub const REASON_TOO_LARGE: &str = "the upstream refused the unit as too large or over quota";
/// Reason of a unit whose add the upstream reported as failed.
pub const REASON_FAILED: &str = "the upstream reported the add as failed";
/// Reason of a 2xx answer that does not say whether the unit was stored.
pub const REASON_UNRECOGNISED: &str = "the upstream answer does not say whether the unit was stored";
/// Reason of a request sent but not answered in time.
pub const REASON_TIMEOUT: &str = "the upstream did not answer in time; the unit may or may not be stored";
/// Reason of a 500, 502 or 504: the request was sent, whether the unit was stored is unknown.
pub const REASON_SERVER_ERROR: &str = "the upstream failed after receiving the unit; the unit may or may not be stored";
/// Reason of a connection lost after the request was sent.
pub const REASON_CONNECTION_LOST: &str =
    "the upstream connection failed after sending; the unit may or may not be stored";

/// The parts of a Nexent unit one add call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddUnit<'a> {
    /// Nexent `event_id`.
    pub event_id: &'a str,
    /// Nexent `unit_type`.
    pub unit_type: &'a str,
    /// Nexent `unit_content`: the memory text.
    pub content: &'a str,
}

/// What became of one unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Stored, or queued for storing, by the upstream.
    Accepted,
    /// Refused by the upstream; sending it again would fail the same way.
    Rejected {
        /// Fixed text.
        reason: &'static str,
    },
    /// The request may have reached the upstream but whether it was stored is unknown.
    Degraded {
        /// Fixed text.
        reason: &'static str,
    },
}

/// Build the add request for `unit` (pure).
///
/// Fails with [`EngineError::InvalidRequest`] when the joined URL does not parse or carries a query
/// or fragment (ruled out by validation).
pub fn build_add_request(
    target: &Target,
    auth: AuthScheme,
    contract: &WriteContract,
    unit: &AddUnit<'_>,
) -> Result<UpstreamRequest, EngineError> {
    let url = target.url(&contract.path)?;

    let mut body = Map::new();
    body.insert("messages".into(), json!([{"role": "user", "content": unit.content}]));
    let ids =
        [("user_id", &target.scope.user_id), ("agent_id", &target.scope.agent_id), ("app_id", &target.scope.app_id)];
    for (name, value) in ids {
        if let Some(value) = value {
            body.insert(name.into(), Value::String(value.clone()));
        }
    }
    body.insert("infer".into(), Value::Bool(false));
    if contract.metadata {
        body.insert(
            "metadata".into(),
            json!({"source": "memgate", "nexent_event_id": unit.event_id, "nexent_unit_type": unit.unit_type}),
        );
    }

    let headers = upstream_headers(&target.credential, auth, true);
    Ok(UpstreamRequest {
        method: SearchMethod::Post,
        url,
        headers,
        body: Some(JsonBody::from_value(&Value::Object(body))),
    })
}

/// The unit outcome of a 2xx answer `body` read per `answer` (pure).
pub fn classify_answer(answer: WriteAnswer, body: &[u8]) -> WriteOutcome {
    let unknown = WriteOutcome::Degraded { reason: REASON_UNRECOGNISED };
    let Ok(document) = serde_json::from_slice::<Value>(body) else {
        return unknown;
    };
    match answer {
        WriteAnswer::Mem0PlatformV3 => match document.get("status").and_then(Value::as_str) {
            Some("SUCCEEDED" | "PENDING") => WriteOutcome::Accepted,
            Some("FAILED") => WriteOutcome::Rejected { reason: REASON_FAILED },
            _ => unknown,
        },
        WriteAnswer::ResultsEvents => {
            let added = document
                .get("results")
                .and_then(Value::as_array)
                .is_some_and(|results| results.iter().any(|r| r.get("event").and_then(Value::as_str) == Some("ADD")));
            if added { WriteOutcome::Accepted } else { unknown }
        }
    }
}

/// The unit outcome or call-level error of a non-2xx `status` (pure).
pub fn classify_status(status: u16, retry_after: Option<&[u8]>) -> Result<WriteOutcome, EngineError> {
    match status {
        400 | 422 => Ok(WriteOutcome::Rejected { reason: REASON_INVALID }),
        409 => Ok(WriteOutcome::Rejected { reason: REASON_CONFLICT }),
        413 => Ok(WriteOutcome::Rejected { reason: REASON_TOO_LARGE }),
        // Sent, then failed or lost downstream of the gateway: stored or not is unknown (see the
        // module docs). 503 is not here: the service declined the request, so it stays retryable.
        500 | 502 | 504 => Ok(WriteOutcome::Degraded { reason: REASON_SERVER_ERROR }),
        _ => Err(EngineError::from_status(status, retry_after)),
    }
}

impl Engine {
    /// Write one unit upstream under `contract` and classify the outcome (see the module table).
    ///
    /// `provider` keys the concurrency bound, shared with search. The target's timeout bounds the
    /// permit wait plus the request. Never retried. Dropping the future aborts the request; its
    /// outcome is then unknown to the caller.
    pub async fn add(
        &self,
        provider: &str,
        target: &Target,
        auth: AuthScheme,
        contract: &WriteContract,
        unit: &AddUnit<'_>,
    ) -> Result<WriteOutcome, EngineError> {
        let result = self.add_inner(provider, target, auth, contract, unit).await;
        match &result {
            Ok(outcome) => tracing::debug!(provider, outcome = outcome_label(outcome), "upstream add"),
            Err(err) => tracing::debug!(provider, outcome = "error", error_code = err.code().as_str(), "upstream add"),
        }
        result
    }

    async fn add_inner(
        &self,
        provider: &str,
        target: &Target,
        auth: AuthScheme,
        contract: &WriteContract,
        unit: &AddUnit<'_>,
    ) -> Result<WriteOutcome, EngineError> {
        let deadline = Instant::now() + target.timeout;
        let request = build_add_request(target, auth, contract, unit)?;
        let _permit = self.permit(provider, target.max_in_flight, deadline, target.timeout).await?;
        let exchange = async {
            // Not counted against the held-bytes budget: the write is done, and a refusal there
            // would turn a stored unit into an unknown one.
            let answer = match self.exchange(request, None).await {
                Ok(answer) => answer,
                // Nothing was sent: the caller may safely send again.
                Err(EngineError::Connect) => return Err(EngineError::Connect),
                Err(EngineError::InvalidRequest) => return Err(EngineError::InvalidRequest),
                // Sent, then lost: stored or not is unknown.
                Err(_) => return Ok(WriteOutcome::Degraded { reason: REASON_CONNECTION_LOST }),
            };
            match answer {
                Answer::Refused { status, retry_after } => {
                    classify_status(status, retry_after.as_ref().map(HeaderValue::as_bytes))
                }
                Answer::Body(Ok((body, _))) => Ok(classify_answer(contract.answer, &body)),
                Answer::Body(Err(_)) => Ok(WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            }
        };
        timeout_at(deadline, exchange).await.unwrap_or(Ok(WriteOutcome::Degraded { reason: REASON_TIMEOUT }))
    }
}

/// Low-cardinality label of an outcome (logs, metrics).
pub fn outcome_label(outcome: &WriteOutcome) -> &'static str {
    match outcome {
        WriteOutcome::Accepted => "accepted",
        WriteOutcome::Rejected { .. } => "rejected",
        WriteOutcome::Degraded { .. } => "degraded",
    }
}

#[cfg(test)]
mod tests {
    use memgate_crds::Scope;
    use memgate_crds::validation::credential_value;

    use super::*;
    use crate::engine::request::{HeaderText, UrlCache};

    fn target(scope: Scope) -> Target {
        Target {
            origin: "https://memory.example.com".to_string(),
            base_path: "/tenant-a/".to_string(),
            scope,
            credential: credential_value("test", b"s3cret").expect("valid credential"),
            timeout: std::time::Duration::from_secs(5),
            max_in_flight: None,
            urls: UrlCache::default(),
        }
    }

    fn contract(metadata: bool) -> WriteContract {
        WriteContract {
            path: "/memories".into(),
            answer: WriteAnswer::ResultsEvents,
            metadata,
            dedupes_exact_repeats: false,
        }
    }

    const UNIT: AddUnit<'static> = AddUnit { event_id: "evt-1", unit_type: "fact", content: "Café ☕ <b>" };

    #[test]
    fn add_request_puts_configured_ids_at_the_root_and_metadata_when_allowed() {
        let scope = Scope { user_id: Some("u".into()), agent_id: None, app_id: Some("a".into()) };
        let request = build_add_request(&target(scope), AuthScheme::XApiKey, &contract(true), &UNIT).expect("builds");
        assert_eq!(request.method, SearchMethod::Post);
        assert_eq!(request.url.as_str(), "https://memory.example.com/tenant-a/memories");
        assert_eq!(
            request.body.as_ref().map(JsonBody::value),
            Some(json!({
                "messages": [{"role": "user", "content": "Café ☕ <b>"}],
                "user_id": "u", "app_id": "a", "infer": false,
                "metadata": {"source": "memgate", "nexent_event_id": "evt-1", "nexent_unit_type": "fact"}
            }))
        );
        assert_eq!(
            request.headers,
            vec![
                ("accept", HeaderText::from("application/json")),
                ("x-api-key", HeaderText::from("s3cret")),
                ("content-type", HeaderText::from("application/json"))
            ]
        );
    }

    #[test]
    fn add_request_without_metadata_or_ids() {
        let request =
            build_add_request(&target(Scope::default()), AuthScheme::AuthorizationToken, &contract(false), &UNIT)
                .expect("builds");
        assert_eq!(
            request.body.as_ref().map(JsonBody::value),
            Some(json!({"messages": [{"role": "user", "content": "Café ☕ <b>"}], "infer": false}))
        );
        assert_eq!(request.headers[1], ("authorization", HeaderText::from("Token s3cret")));
        assert!(!format!("{request:?}").contains("s3cret"));
    }

    #[test]
    fn platform_answers_map_by_status_field() {
        let cases: [(&[u8], WriteOutcome); 7] = [
            (br#"{"status":"SUCCEEDED","results":[{"id":"m","event":"ADD"}]}"#, WriteOutcome::Accepted),
            (br#"{"status":"PENDING","event_id":"e"}"#, WriteOutcome::Accepted),
            (br#"{"status":"FAILED"}"#, WriteOutcome::Rejected { reason: REASON_FAILED }),
            (br#"{"status":"succeeded"}"#, WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            (br#"{"results":[{"event":"ADD"}]}"#, WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            (b"[]", WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            (b"\xff", WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
        ];
        for (body, want) in cases {
            assert_eq!(classify_answer(WriteAnswer::Mem0PlatformV3, body), want, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn results_event_answers_need_an_add_event() {
        let cases: [(&[u8], WriteOutcome); 6] = [
            (br#"{"results":[{"id":"p","event":"ADD"}]}"#, WriteOutcome::Accepted),
            (br#"{"results":[{"event":"NONE"},{"event":"ADD"}]}"#, WriteOutcome::Accepted),
            (br#"{"event_id":"ev-77"}"#, WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            (br#"{"results":[]}"#, WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            (br#"{"results":[{"event":"add"}]}"#, WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
            (b"not json", WriteOutcome::Degraded { reason: REASON_UNRECOGNISED }),
        ];
        for (body, want) in cases {
            assert_eq!(classify_answer(WriteAnswer::ResultsEvents, body), want, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn refusals_are_unit_rejections_unknown_server_outcomes_degraded_and_the_rest_call_errors() {
        assert_eq!(classify_status(400, None), Ok(WriteOutcome::Rejected { reason: REASON_INVALID }));
        assert_eq!(classify_status(422, None), Ok(WriteOutcome::Rejected { reason: REASON_INVALID }));
        assert_eq!(classify_status(409, None), Ok(WriteOutcome::Rejected { reason: REASON_CONFLICT }));
        assert_eq!(classify_status(413, None), Ok(WriteOutcome::Rejected { reason: REASON_TOO_LARGE }));
        assert_eq!(classify_status(401, None), Err(EngineError::Unauthorized));
        assert_eq!(classify_status(403, None), Err(EngineError::Forbidden));
        assert_eq!(classify_status(429, Some(b"3")), Err(EngineError::RateLimited { retry_after_seconds: Some(3) }));
        for status in [500, 502, 504] {
            assert_eq!(classify_status(status, None), Ok(WriteOutcome::Degraded { reason: REASON_SERVER_ERROR }));
        }
        assert_eq!(classify_status(503, None), Err(EngineError::ServerError(503)));
        assert_eq!(classify_status(503, Some(b"5")), Err(EngineError::ServerError(503)));
        assert_eq!(classify_status(501, None), Err(EngineError::ServerError(501)));
        assert_eq!(classify_status(302, None), Err(EngineError::Redirect(302)));
        assert_eq!(classify_status(404, None), Err(EngineError::UpstreamStatus(404)));
    }
}
