//! Contract fixtures of the built-in dialects: exact upstream requests and answers.
//!
//! The gateway's contract tests replay every fixture against a real local HTTP server: the request
//! memgate sends must match `request` exactly (method, path, query, headers, body as JSON), and
//! what memgate makes of `response` must equal `expect`.

use std::collections::BTreeMap;

use memgate_crds::Scope;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::SOURCES;

/// All fixtures of one built-in dialect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixtures {
    /// Provider settings the fixtures assume (the origin is the test server's).
    pub provider: FixtureProvider,
    /// Search cases.
    pub search: Vec<SearchFixture>,
    /// Ingest (write) cases; empty when the dialect has no write contract.
    #[serde(default)]
    pub ingest: Vec<IngestFixture>,
}

/// Provider settings of a fixture set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FixtureProvider {
    /// `spec.endpoint.basePath`.
    pub base_path: String,
    /// `spec.scope`.
    pub scope: Scope,
    /// Placeholder credential value.
    pub credential: String,
}

/// The exact request memgate must send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedRequest {
    /// HTTP method.
    pub method: String,
    /// URL path (after the origin).
    pub path: String,
    /// Query string parameters, in order; empty means no query string.
    #[serde(default)]
    pub query: Vec<(String, String)>,
    /// Exactly the headers memgate sets (lower-case names).
    pub headers: BTreeMap<String, String>,
    /// JSON body, or none.
    #[serde(default)]
    pub body: Option<Value>,
}

/// An upstream answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamAnswer {
    /// HTTP status.
    pub status: u16,
    /// Extra response headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// JSON body.
    pub body: Value,
}

/// One search case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchFixture {
    /// What the case shows.
    pub name: String,
    /// Normalised query text.
    pub query: String,
    /// Result limit asked for.
    pub limit: u32,
    /// The request memgate must send.
    pub request: ExpectedRequest,
    /// The upstream answer.
    pub response: UpstreamAnswer,
    /// What memgate must make of it.
    pub expect: SearchExpectation,
}

/// Expected normalised search outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchExpectation {
    /// Items in order.
    pub items: Vec<ExpectedItem>,
}

/// One expected normalised item (Profile v1 field names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedItem {
    /// Item id.
    pub id: String,
    /// Item text.
    pub content: String,
    /// Title, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// URI, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Score, when present and finite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Update time, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// One ingest case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestFixture {
    /// What the case shows.
    pub name: String,
    /// The Nexent unit being written.
    pub unit: IngestUnit,
    /// The request memgate must send.
    pub request: ExpectedRequest,
    /// The upstream answer.
    pub response: UpstreamAnswer,
    /// The unit outcome memgate must report.
    pub expect: UnitExpectation,
}

/// The parts of a Nexent `MemoryIngestUnit` a write uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestUnit {
    /// `event_id`.
    pub event_id: String,
    /// `unit_type`.
    pub unit_type: String,
    /// `unit_content`.
    pub content: String,
}

/// Expected unit outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnitExpectation {
    /// `accepted`, `rejected` or `degraded`.
    pub status: String,
}

/// The fixtures of built-in `id`.
pub fn fixtures(id: &str) -> Option<Fixtures> {
    let (_, _, text) = SOURCES.iter().find(|(sid, _, _)| *sid == id)?;
    Some(
        serde_saphyr::from_str(text)
            .unwrap_or_else(|e| panic!("embedded fixtures of {id} are invalid (a build defect, caught by tests): {e}")),
    )
}
