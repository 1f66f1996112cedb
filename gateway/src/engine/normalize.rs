//! Reading a search response into items (reference §4), as a pure function.
//!
//! Owns the strictness rules: strict UTF-8, strict JSON, the dialect's collection shape, which
//! items are kept and which optional fields are copied. It never truncates strings: the Profile v1
//! length caps and the 4000-unit budget belong to the MCP surface.

use memgate_crds::{Collection, ContentField, IdField, ResponseSpec, ScoreField, TitleField, UpdatedAtField, UriField};
use memgate_presets::ContentEncoding;
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::EngineError;

/// One normalised search result, in provider order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Item {
    /// Non-empty provider id.
    pub id: String,
    /// Non-empty text.
    pub content: String,
    /// Title, when the dialect reads one and it is a non-empty string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// URI, when the dialect reads one and it is a non-empty string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Score, when the dialect reads one and it is a finite number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Update time, when the dialect reads one and it is a non-empty string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// Parse a complete response body into at most `limit` items.
///
/// Fails on invalid UTF-8, invalid JSON, or a top-level shape other than the dialect's collection;
/// individual items that are not objects or lack a non-empty string id or content are skipped.
pub fn normalize(
    body: &[u8],
    response: &ResponseSpec,
    encoding: ContentEncoding,
    limit: usize,
) -> Result<Vec<Item>, EngineError> {
    let text = std::str::from_utf8(body).map_err(|_| EngineError::InvalidUtf8)?;
    let document: Value = serde_json::from_str(text).map_err(|_| EngineError::InvalidJson)?;
    let collection = match (response.collection, &document) {
        (Collection::RootArray, Value::Array(items)) => items,
        (Collection::Results, Value::Object(root)) => match root.get("results") {
            Some(Value::Array(items)) => items,
            _ => return Err(EngineError::SchemaMismatch),
        },
        _ => return Err(EngineError::SchemaMismatch),
    };
    Ok(collection
        .iter()
        .filter_map(|value| value.as_object().and_then(|object| item(object, response, encoding)))
        .take(limit)
        .collect())
}

fn item(object: &Map<String, Value>, response: &ResponseSpec, encoding: ContentEncoding) -> Option<Item> {
    let id_name = match response.id_field {
        IdField::Id => "id",
        IdField::MemoryId => "memory_id",
    };
    let content_name = match response.content_field {
        ContentField::Memory => "memory",
        ContentField::Content => "content",
        ContentField::Text => "text",
    };
    let title_name = match response.title_field {
        TitleField::Title => Some("title"),
        TitleField::Omit => None,
    };
    let uri_name = match response.uri_field {
        UriField::Uri => Some("uri"),
        UriField::Omit => None,
    };
    let updated_at_name = match response.updated_at_field {
        UpdatedAtField::UpdatedAtSnake => Some("updated_at"),
        UpdatedAtField::UpdatedAtCamel => Some("updatedAt"),
        UpdatedAtField::Omit => None,
    };

    let id = non_empty(object, id_name)?;
    let raw_content = non_empty(object, content_name)?;
    let content = match encoding {
        ContentEncoding::Plain => raw_content,
        ContentEncoding::MessageJson => unwrap_messages(&raw_content).unwrap_or(raw_content),
    };
    if content.is_empty() {
        return None;
    }
    let score = match response.score_field {
        ScoreField::Score => object.get("score").and_then(Value::as_f64).filter(|score| score.is_finite()),
        ScoreField::Omit => None,
    };
    Some(Item {
        id,
        content,
        title: title_name.and_then(|name| non_empty(object, name)),
        uri: uri_name.and_then(|name| non_empty(object, name)),
        score,
        updated_at: updated_at_name.and_then(|name| non_empty(object, name)),
    })
}

/// The member `name` when it is a non-empty string.
fn non_empty(object: &Map<String, Value>, name: &str) -> Option<String> {
    match object.get(name) {
        Some(Value::String(text)) if !text.is_empty() => Some(text.clone()),
        _ => None,
    }
}

/// `[{"role": ..., "content": "..."}, ...]` (non-empty, every element an object with a string
/// `content`) gives the contents joined with `\n`; anything else gives `None`.
fn unwrap_messages(raw: &str) -> Option<String> {
    let Ok(Value::Array(messages)) = serde_json::from_str::<Value>(raw) else {
        return None;
    };
    if messages.is_empty() {
        return None;
    }
    let parts =
        messages.iter().map(|message| message.as_object()?.get("content")?.as_str()).collect::<Option<Vec<&str>>>()?;
    Some(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(collection: Collection) -> ResponseSpec {
        ResponseSpec {
            collection,
            id_field: IdField::Id,
            content_field: ContentField::Content,
            title_field: TitleField::Title,
            uri_field: UriField::Uri,
            score_field: ScoreField::Score,
            updated_at_field: UpdatedAtField::UpdatedAtCamel,
        }
    }

    fn run(body: &Value, collection: Collection, encoding: ContentEncoding, limit: usize) -> Vec<Item> {
        let bytes = serde_json::to_vec(body).expect("serializes");
        normalize(&bytes, &spec(collection), encoding, limit).expect("normalizes")
    }

    fn plain(id: &str, content: &str) -> Item {
        Item { id: id.into(), content: content.into(), title: None, uri: None, score: None, updated_at: None }
    }

    #[test]
    fn root_array_items_copy_only_valid_optional_fields() {
        let body = json!([
            {"id": "a", "content": "A", "title": "T", "uri": "https://x", "score": 1, "updatedAt": "2026"},
            {"id": "b", "content": "B", "title": "", "uri": 3, "score": "0.5", "updatedAt": null},
            {"id": 7, "content": "numeric id"},
            {"id": "", "content": "empty id"},
            {"id": "c", "content": ""},
            {"id": "d"},
            "not an object",
            {"id": "e", "content": "E"}
        ]);
        let items = run(&body, Collection::RootArray, ContentEncoding::Plain, 10);
        let first = Item {
            id: "a".into(),
            content: "A".into(),
            title: Some("T".into()),
            uri: Some("https://x".into()),
            score: Some(1.0),
            updated_at: Some("2026".into()),
        };
        assert_eq!(items, vec![first, plain("b", "B"), plain("e", "E")]);
    }

    #[test]
    fn limit_applies_after_skipping() {
        let body = json!({"results": [{"content": "no id"}, {"id": "1", "content": "x"}, {"id": "2", "content": "y"}]});
        assert_eq!(run(&body, Collection::Results, ContentEncoding::Plain, 1), vec![plain("1", "x")]);
        assert_eq!(run(&body, Collection::Results, ContentEncoding::Plain, 0), vec![]);
    }

    #[test]
    fn wrong_collection_is_a_schema_mismatch() {
        for (body, collection) in [
            (json!({"items": []}), Collection::Results),
            (json!({"results": {}}), Collection::Results),
            (json!([]), Collection::Results),
            (json!({"results": []}), Collection::RootArray),
            (json!("text"), Collection::RootArray),
        ] {
            let bytes = serde_json::to_vec(&body).expect("serializes");
            assert_eq!(
                normalize(&bytes, &spec(collection), ContentEncoding::Plain, 5),
                Err(EngineError::SchemaMismatch),
                "{body}"
            );
        }
    }

    #[test]
    fn bytes_must_be_strict_utf8_and_strict_json() {
        let response = spec(Collection::RootArray);
        assert_eq!(normalize(b"[\xff]", &response, ContentEncoding::Plain, 5), Err(EngineError::InvalidUtf8));
        for bad in [&b"[1,]"[..], b"", b"[] []", b"{'a': 1}", b"\xef\xbb\xbf[]", b"[NaN]"] {
            assert_eq!(normalize(bad, &response, ContentEncoding::Plain, 5), Err(EngineError::InvalidJson));
        }
    }

    #[test]
    fn message_json_content_is_unwrapped_only_when_it_is_a_message_list() {
        let body = json!([
            {"id": "1", "content": "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]"},
            {"id": "2", "content": "[{\"role\":\"user\"}]"},
            {"id": "3", "content": "[]"},
            {"id": "4", "content": "{\"content\":\"x\"}"},
            {"id": "5", "content": "[{\"role\":\"user\",\"content\":\"\"}]"},
            {"id": "6", "content": "plain"}
        ]);
        let items = run(&body, Collection::RootArray, ContentEncoding::MessageJson, 10);
        assert_eq!(
            items,
            vec![
                plain("1", "a\nb"),
                plain("2", "[{\"role\":\"user\"}]"),
                plain("3", "[]"),
                plain("4", "{\"content\":\"x\"}"),
                plain("6", "plain"),
            ]
        );
        let plain_items = run(&body, Collection::RootArray, ContentEncoding::Plain, 1);
        assert_eq!(
            plain_items[0].content,
            "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":\"b\"}]"
        );
    }
}
