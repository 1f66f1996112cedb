//! `DialectPreset`: a closed, versioned description of one Mem0-compatible search call.
//!
//! The grammar is deliberately closed (reference §2): every field takes one of a few fixed values,
//! so a preset can describe *where* the query, scope ids and limit go and *which* response fields
//! hold what, but never arbitrary headers, templates, code or writes. The object name is the dialect
//! id; its spec is immutable once created, so an id never changes meaning.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::status::Condition;

/// Spec of a `DialectPreset`: how to issue one search request and read its response.
// kube's printcolumn(...) lists repeat keys by design.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "memgate.io",
    version = "v1alpha1",
    kind = "DialectPreset",
    status = "DialectPresetStatus",
    shortname = "dpreset",
    category = "memgate",
    derive = "PartialEq",
    cel,
    doc = "A closed, versioned description of one Mem0-compatible search call; the name is the dialect id and the spec is immutable.",
    printcolumn(name = "Version", type_ = "integer", json_path = ".spec.dialectVersion"),
    printcolumn(name = "Method", type_ = "string", json_path = ".spec.search.method"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].reason"),
    printcolumn(name = "Providers", type_ = "integer", json_path = ".status.providers"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("!(self.metadata.name in ['mem0-platform-v3', 'mem0-oss-rest-2026-08', 'aliyun-polardb-mysql-2026-08', 'aliyun-hologres-mem0-2.0.6', 'aliyun-rds-postgresql-memory-2026-08'])").message("metadata.name: this id is reserved for a memgate built-in dialect; give the DialectPreset another name"),
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: a changed dialect is a new DialectPreset with a new name"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DialectPresetSpec {
    /// Version of the dialect grammar; only `1` exists.
    #[x_kube(validation = Rule::new("self == 1").message("spec.dialectVersion must be 1"))]
    pub dialect_version: i64,
    /// How the credential is sent upstream.
    pub auth: AuthScheme,
    /// The search request.
    pub search: SearchSpec,
    /// How to read the search response.
    pub response: ResponseSpec,
}

/// How the credential is presented to the upstream service.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthScheme {
    /// `Authorization: Token <credential>`.
    #[serde(rename = "authorization-token")]
    AuthorizationToken,
    /// `Authorization: Bearer <credential>`.
    #[serde(rename = "authorization-bearer")]
    AuthorizationBearer,
    /// `x-api-key: <credential>`.
    #[serde(rename = "x-api-key")]
    XApiKey,
}

/// HTTP method of the search call.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SearchMethod {
    /// Parameters in the query string only.
    #[serde(rename = "GET")]
    Get,
    /// Parameters in a JSON body (and optionally the query string).
    #[serde(rename = "POST")]
    Post,
}

/// Where the search query text goes.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueryLocation {
    /// `query` at the root of the JSON body.
    #[serde(rename = "json")]
    Json,
    /// `query` in the URL query string.
    #[serde(rename = "query")]
    Query,
}

/// Where a scope id (`user_id`, `agent_id`, `app_id`) goes, or `omit`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdLocation {
    /// At the root of the JSON body.
    #[serde(rename = "json")]
    Json,
    /// Inside `filters` of the JSON body.
    #[serde(rename = "json.filters")]
    JsonFilters,
    /// In the URL query string.
    #[serde(rename = "query")]
    Query,
    /// Not sent; the provider must not configure this id.
    #[serde(rename = "omit")]
    Omit,
}

impl IdLocation {
    /// True when the value travels in the JSON body.
    pub fn is_json(self) -> bool {
        matches!(self, IdLocation::Json | IdLocation::JsonFilters)
    }
}

/// Name of the field carrying the result limit, or `omit`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitField {
    /// `top_k`.
    #[serde(rename = "top_k")]
    TopK,
    /// `limit`.
    #[serde(rename = "limit")]
    Limit,
    /// No limit is sent; memgate still keeps at most the limit.
    #[serde(rename = "omit")]
    Omit,
}

/// The search request of a dialect.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new("self.method == 'POST' || (self.queryLocation == 'query' && !self.userIdLocation.startsWith('json') && !self.agentIdLocation.startsWith('json') && !self.appIdLocation.startsWith('json'))").message("spec.search: a GET dialect has no body, so queryLocation and every id location must be 'query' or 'omit'"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchSpec {
    /// `GET` or `POST`.
    pub method: SearchMethod,
    /// Static request path, joined after the provider's `basePath`.
    #[x_kube(validation = Rule::new("self.startsWith('/')").message("spec.search.path must start with '/'"))]
    #[x_kube(validation = Rule::new("self.matches(\"^[A-Za-z0-9/._~!$&'()*+,;=:@-]*$\")").message("spec.search.path may only contain unreserved URL characters: no '?', '#', '%', '\\', spaces or control characters"))]
    #[x_kube(validation = Rule::new("!self.contains('//')").message("spec.search.path must not contain '//'"))]
    #[x_kube(validation = Rule::new("!self.matches('(^|/)[.][.]?(/|$)')").message("spec.search.path must not contain '.' or '..' segments"))]
    #[x_kube(validation = Rule::new("self.size() <= 512").message("spec.search.path must be at most 512 characters"))]
    #[schemars(length(max = 512))]
    pub path: String,
    /// Where the query text goes.
    pub query_location: QueryLocation,
    /// Where `user_id` goes.
    pub user_id_location: IdLocation,
    /// Where `agent_id` goes.
    pub agent_id_location: IdLocation,
    /// Where `app_id` goes.
    pub app_id_location: IdLocation,
    /// Which field carries the limit.
    pub limit_field: LimitField,
    /// Optional similarity threshold sent with every search, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 0.0 && self <= 1.0").message("spec.search.threshold must be between 0 and 1"))]
    pub threshold: Option<f64>,
    /// Optional rerank flag sent with every search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerank: Option<bool>,
}

/// Shape of the search response's item collection.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collection {
    /// An object whose `results` member is the item array.
    #[serde(rename = "results")]
    Results,
    /// The body itself is the item array.
    #[serde(rename = "root-array")]
    RootArray,
}

/// Field holding an item's id.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdField {
    /// `id`.
    #[serde(rename = "id")]
    Id,
    /// `memory_id`.
    #[serde(rename = "memory_id")]
    MemoryId,
}

/// Field holding an item's text.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContentField {
    /// `memory`.
    #[serde(rename = "memory")]
    Memory,
    /// `content`.
    #[serde(rename = "content")]
    Content,
    /// `text`.
    #[serde(rename = "text")]
    Text,
}

/// Field holding an item's title, or `omit`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TitleField {
    /// `title`.
    #[serde(rename = "title")]
    Title,
    /// Not read.
    #[serde(rename = "omit")]
    Omit,
}

/// Field holding an item's URI, or `omit`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UriField {
    /// `uri`.
    #[serde(rename = "uri")]
    Uri,
    /// Not read.
    #[serde(rename = "omit")]
    Omit,
}

/// Field holding an item's score, or `omit`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScoreField {
    /// `score`.
    #[serde(rename = "score")]
    Score,
    /// Not read.
    #[serde(rename = "omit")]
    Omit,
}

/// Field holding an item's last update time, or `omit`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UpdatedAtField {
    /// `updated_at`.
    #[serde(rename = "updated_at")]
    UpdatedAtSnake,
    /// `updatedAt`.
    #[serde(rename = "updatedAt")]
    UpdatedAtCamel,
    /// Not read.
    #[serde(rename = "omit")]
    Omit,
}

/// The JSON members an answer's items hold each field in (the fields' own spelling in a dialect);
/// `None`: the dialect does not read that field.
impl IdField {
    /// The item member holding the id.
    pub fn member(self) -> &'static str {
        match self {
            IdField::Id => "id",
            IdField::MemoryId => "memory_id",
        }
    }
}

impl ContentField {
    /// The item member holding the text.
    pub fn member(self) -> &'static str {
        match self {
            ContentField::Memory => "memory",
            ContentField::Content => "content",
            ContentField::Text => "text",
        }
    }
}

impl TitleField {
    /// The item member holding the title, if read.
    pub fn member(self) -> Option<&'static str> {
        match self {
            TitleField::Title => Some("title"),
            TitleField::Omit => None,
        }
    }
}

impl UriField {
    /// The item member holding the URI, if read.
    pub fn member(self) -> Option<&'static str> {
        match self {
            UriField::Uri => Some("uri"),
            UriField::Omit => None,
        }
    }
}

impl ScoreField {
    /// The item member holding the score, if read.
    pub fn member(self) -> Option<&'static str> {
        match self {
            ScoreField::Score => Some("score"),
            ScoreField::Omit => None,
        }
    }
}

impl UpdatedAtField {
    /// The item member holding the update time, if read.
    pub fn member(self) -> Option<&'static str> {
        match self {
            UpdatedAtField::UpdatedAtSnake => Some("updated_at"),
            UpdatedAtField::UpdatedAtCamel => Some("updatedAt"),
            UpdatedAtField::Omit => None,
        }
    }
}

/// How to read a search response.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResponseSpec {
    /// Where the item array is.
    pub collection: Collection,
    /// Item id field.
    pub id_field: IdField,
    /// Item content field.
    pub content_field: ContentField,
    /// Item title field.
    pub title_field: TitleField,
    /// Item URI field.
    pub uri_field: UriField,
    /// Item score field.
    pub score_field: ScoreField,
    /// Item update-time field.
    pub updated_at_field: UpdatedAtField,
}

/// Observed state of a `DialectPreset`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DialectPresetStatus {
    /// Generation the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Accepted` and `Ready` carry the validation verdict; `Reconciling` and `Stalled` restate it
    /// for kstatus (an invalid preset is `Stalled`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// How many MemoryProviders name this preset in `spec.dialect.presetRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<u32>,
}

#[cfg(test)]
mod member_tests {
    use super::*;

    /// An item member is spelled as the dialect names the field.
    #[test]
    fn each_member_is_the_fields_own_spelling() {
        let spelled = |value: serde_json::Value| value.as_str().map(str::to_owned);
        for field in [IdField::Id, IdField::MemoryId] {
            assert_eq!(spelled(serde_json::json!(field)).as_deref(), Some(field.member()));
        }
        for field in [ContentField::Memory, ContentField::Content, ContentField::Text] {
            assert_eq!(spelled(serde_json::json!(field)).as_deref(), Some(field.member()));
        }
        for (wire, member) in [
            (serde_json::json!(TitleField::Title), TitleField::Title.member()),
            (serde_json::json!(UriField::Uri), UriField::Uri.member()),
            (serde_json::json!(ScoreField::Score), ScoreField::Score.member()),
            (serde_json::json!(UpdatedAtField::UpdatedAtSnake), UpdatedAtField::UpdatedAtSnake.member()),
            (serde_json::json!(UpdatedAtField::UpdatedAtCamel), UpdatedAtField::UpdatedAtCamel.member()),
        ] {
            assert_eq!(spelled(wire), member.map(str::to_owned));
        }
        assert_eq!(TitleField::Omit.member(), None);
        assert_eq!(UriField::Omit.member(), None);
        assert_eq!(ScoreField::Omit.member(), None);
        assert_eq!(UpdatedAtField::Omit.member(), None);
    }
}
