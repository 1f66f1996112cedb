//! Nexent's ingest data model (`reference/nexent.md` §2) as serde types.
//!
//! Requests accept and ignore unknown fields (Nexent may add some); results serialize exactly
//! Nexent's field names, `message` as `null` when absent.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Nexent `MemoryIngestRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestRequest {
    /// Tenant id (not used upstream: the scope comes from the provider's config).
    pub tenant_id: String,
    /// User id (not used upstream).
    pub user_id: String,
    /// Agent id (not used upstream).
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Conversation id (not used upstream).
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// Units to write, in order.
    pub units: Vec<IngestUnit>,
    /// Same value on every retry of the same request.
    pub idempotency_key: String,
    /// Request metadata (not used upstream).
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

/// Nexent `MemoryIngestUnit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IngestUnit {
    /// Event id; also the `unit_id` of its result.
    pub event_id: String,
    /// Event type (not used upstream).
    pub event_type: String,
    /// Unit type, sent as `metadata.nexent_unit_type` when the contract allows metadata.
    pub unit_type: String,
    /// The memory text.
    pub unit_content: String,
    /// Position of the unit within its event, when the event has several.
    #[serde(default)]
    pub unit_index: Option<i64>,
    /// Unit metadata (not sent upstream).
    #[serde(default)]
    pub metadata: Map<String, Value>,
}

/// Nexent `UnitIngestResult.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitStatus {
    /// Stored or queued upstream.
    Accepted,
    /// Refused upstream (or by memgate's checks); sending it again fails the same way.
    Rejected,
    /// Stored or not is unknown; never counted as accepted.
    Degraded,
}

/// Nexent `UnitIngestResult`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitIngestResult {
    /// The unit's `event_id`.
    pub unit_id: String,
    /// Outcome.
    pub status: UnitStatus,
    /// Fixed text explaining a rejected or degraded unit.
    #[serde(default)]
    pub message: Option<String>,
}

/// Nexent `MemoryIngestResult.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IngestStatus {
    /// Every unit accepted (also for an empty request).
    Ok,
    /// Some but not all units accepted.
    Partial,
    /// No unit accepted.
    Error,
}

/// Nexent `MemoryIngestResult`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestResult {
    /// Provider name.
    pub provider: String,
    /// Overall outcome.
    pub status: IngestStatus,
    /// Units with status accepted.
    pub accepted_count: usize,
    /// Units with status rejected.
    pub rejected_count: usize,
    /// One result per request unit, in request order.
    pub unit_results: Vec<UnitIngestResult>,
    /// Counts in words when not every unit was accepted.
    #[serde(default)]
    pub message: Option<String>,
}

impl IngestResult {
    /// The result of `unit_results` (in request order) at `provider`: counts and status are
    /// derived here and nowhere else, so they always agree with the unit results.
    ///
    /// Status: every unit accepted (or no unit) -> `ok`; no unit accepted -> `error`; otherwise
    /// `partial`. A degraded unit is counted in neither count and makes the status `partial` or
    /// `error` like a rejected one.
    pub fn summarize(provider: &str, unit_results: Vec<UnitIngestResult>) -> IngestResult {
        let count = |wanted: UnitStatus| unit_results.iter().filter(|unit| unit.status == wanted).count();
        let (accepted, rejected, degraded) =
            (count(UnitStatus::Accepted), count(UnitStatus::Rejected), count(UnitStatus::Degraded));
        let status = if accepted == unit_results.len() {
            IngestStatus::Ok
        } else if accepted == 0 {
            IngestStatus::Error
        } else {
            IngestStatus::Partial
        };
        let message = (status != IngestStatus::Ok)
            .then(|| format!("{accepted} accepted, {rejected} rejected, {degraded} degraded (outcome unknown)"));
        IngestResult {
            provider: provider.to_string(),
            status,
            accepted_count: accepted,
            rejected_count: rejected,
            unit_results,
            message,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// xorshift64*: a deterministic generator, enough for property loops.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    #[test]
    fn counts_always_agree_with_unit_results() {
        const STATUSES: [UnitStatus; 3] = [UnitStatus::Accepted, UnitStatus::Rejected, UnitStatus::Degraded];
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for case in 0..20_000 {
            let len = match case % 4 {
                0 => rng.below(4),   // many tiny vectors, edge cases
                _ => rng.below(101), // up to the 100-unit bound
            } as usize;
            // Bias some vectors towards one status so all-accepted / none-accepted occur often.
            let bias = rng.below(4);
            let units: Vec<UnitIngestResult> = (0..len)
                .map(|i| {
                    let status = match bias {
                        0 => UnitStatus::Accepted,
                        _ => STATUSES[rng.below(3) as usize],
                    };
                    UnitIngestResult { unit_id: format!("e{i}"), status, message: None }
                })
                .collect();
            let result = IngestResult::summarize("p", units.clone());

            let accepted = units.iter().filter(|u| u.status == UnitStatus::Accepted).count();
            let rejected = units.iter().filter(|u| u.status == UnitStatus::Rejected).count();
            let degraded = units.iter().filter(|u| u.status == UnitStatus::Degraded).count();
            assert_eq!(result.unit_results, units, "case {case}: unit results kept in order");
            assert_eq!(result.accepted_count, accepted, "case {case}");
            assert_eq!(result.rejected_count, rejected, "case {case}");
            assert_eq!(result.accepted_count + result.rejected_count + degraded, result.unit_results.len());
            let want = if accepted == len {
                IngestStatus::Ok
            } else if accepted == 0 {
                IngestStatus::Error
            } else {
                IngestStatus::Partial
            };
            assert_eq!(result.status, want, "case {case}: {accepted}/{rejected}/{degraded}");
            assert_eq!(result.message.is_none(), want == IngestStatus::Ok);
        }
    }

    #[test]
    fn wire_shapes_match_nexent() {
        let request: IngestRequest = serde_json::from_value(json!({
            "tenant_id": "t", "user_id": "u", "idempotency_key": "k",
            "units": [{"event_id": "e", "event_type": "message", "unit_type": "fact", "unit_content": "c",
                       "metadata": {"x": 1}, "added_later": true}],
            "future_field": {}
        }))
        .expect("parses with defaults and unknown fields");
        assert_eq!(request.agent_id, None);
        assert_eq!(request.units[0].unit_index, None);
        assert!(request.metadata.is_empty());

        let result = IngestResult::summarize(
            "repo-memory",
            vec![UnitIngestResult { unit_id: "e".into(), status: UnitStatus::Degraded, message: Some("m".into()) }],
        );
        assert_eq!(
            serde_json::to_value(&result).expect("serializes"),
            json!({
                "provider": "repo-memory", "status": "error", "accepted_count": 0, "rejected_count": 0,
                "unit_results": [{"unit_id": "e", "status": "degraded", "message": "m"}],
                "message": "0 accepted, 0 rejected, 1 degraded (outcome unknown)"
            })
        );
        let ok = IngestResult::summarize("p", Vec::new());
        assert_eq!((ok.status, ok.message), (IngestStatus::Ok, None));
    }
}
