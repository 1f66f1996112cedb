//! The built-in dialect data model and registry.

use std::sync::OnceLock;

use memgate_crds::DialectPresetSpec;
use memgate_crds::validation::DialectView;
use serde::{Deserialize, Serialize};

use crate::SOURCES;

/// A built-in dialect: a DialectPreset spec plus what only built-ins may have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuiltinDialect {
    /// The dialect id (also the directory name).
    pub id: String,
    /// One line for people.
    pub description: String,
    /// The search grammar, the same type a DialectPreset has.
    pub spec: DialectPresetSpec,
    /// How the content field is encoded.
    pub content_encoding: ContentEncoding,
    /// The verified write contract used by Nexent ingest, if the service has one.
    #[serde(default)]
    pub write: Option<WriteContract>,
}

/// How the dialect's content field is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContentEncoding {
    /// The field is the text.
    Plain,
    /// The field is the text, or a JSON string `[{"role": ..., "content": ...}]` whose contents
    /// are joined (records imported directly into the service look like this).
    MessageJson,
}

/// How one memory is written upstream: `POST <basePath><path>` with
/// `{messages: [{role: user, content}], <scope ids at the body root>, infer: false, metadata?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteContract {
    /// Static path of the add call.
    pub path: String,
    /// How to read the add call's answer.
    pub answer: WriteAnswer,
    /// Whether the service accepts a `metadata` object.
    pub metadata: bool,
    /// Whether the service itself drops exact repeats of the same text in the same scope.
    pub dedupes_exact_repeats: bool,
}

/// How an add call's 2xx answer maps to a unit outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteAnswer {
    /// Mem0 Platform v3: `status` `SUCCEEDED` (stored) or `PENDING` (queued) is accepted,
    /// `FAILED` is rejected; anything else is unknown.
    Mem0PlatformV3,
    /// `results[]` with `event: ADD` is accepted; a lone `event_id` (or no result) is unknown.
    ResultsEvents,
}

impl BuiltinDialect {
    /// The view provider validation needs.
    pub fn view(&self) -> DialectView<'_> {
        DialectView { spec: &self.spec, can_write: self.write.is_some() }
    }
}

fn registry() -> &'static [BuiltinDialect] {
    static REGISTRY: OnceLock<Vec<BuiltinDialect>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        SOURCES
            .iter()
            .map(|(id, preset, _)| {
                serde_saphyr::from_str(preset).unwrap_or_else(|e| {
                    panic!("embedded preset {id} is invalid (a build defect, caught by tests): {e}")
                })
            })
            .collect()
    })
}

/// Every built-in dialect.
pub fn all() -> &'static [BuiltinDialect] {
    registry()
}

/// The built-in dialect `id`, if shipped.
pub fn get(id: &str) -> Option<&'static BuiltinDialect> {
    registry().iter().find(|b| b.id == id)
}

/// The validation view of built-in `id`, if shipped.
pub fn view(id: &str) -> Option<DialectView<'static>> {
    get(id).map(BuiltinDialect::view)
}
