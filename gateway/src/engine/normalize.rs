//! Reading a search response into items (reference §4), as a pure function.
//!
//! Owns the strictness rules: strict UTF-8, strict JSON, the dialect's collection shape, which
//! items are kept and which optional fields are copied. It never truncates strings: the Profile v1
//! length caps and the 4000-unit budget belong to the MCP surface.

use std::borrow::Cow;
use std::fmt;

use memgate_crds::{Collection, ResponseSpec};
use memgate_presets::ContentEncoding;
use serde::Serialize;
use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::error::EngineError;

/// The scalar `visit_*` methods of a visitor that accepts any scalar as `$value`.
macro_rules! scalars_are {
    ($value:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

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
///
/// The body is read once, straight into the items (no `serde_json::Value` tree): strings without
/// escapes are borrowed from the body until an item is kept, and members the dialect does not read
/// are walked, not stored. Every value is still parsed as `serde_json::from_str::<Value>` would
/// (the same syntax, string escapes, number range and nesting limit), and a repeated member
/// counts by its last occurrence, as in a `Value` map. One difference is kept: an object of the
/// collection's path (the root, the collection, an item or a member an item reads) whose first
/// key is serde_json's raw-value key (`RAW_VALUE_KEY`) is an ordinary object here, where a `Value` would stand
/// for the JSON text in that member (no upstream sends that key; objects walked past do as a
/// `Value` does, see `Skip`).
pub fn normalize(
    body: &[u8],
    response: &ResponseSpec,
    encoding: ContentEncoding,
    limit: usize,
) -> Result<Vec<Item>, EngineError> {
    let text = std::str::from_utf8(body).map_err(|_| EngineError::InvalidUtf8)?;
    let collect = Collect { fields: Fields::of(response), encoding, limit };
    let mut json = serde_json::Deserializer::from_str(text);
    let parsed = match response.collection {
        Collection::RootArray => (&collect).deserialize(&mut json),
        Collection::Results => Root(&collect).deserialize(&mut json),
    };
    match parsed.and_then(|items| json.end().map(|()| items)) {
        Ok(Some(items)) => Ok(items),
        Ok(None) => Err(EngineError::SchemaMismatch),
        // The root was not the collection's container: the rest was not read, so tell a shape
        // error from a syntax error by reading the whole body once more.
        Err(error) if error.is_data() => match serde_json::from_str::<Skip>(text) {
            Ok(Skip) => Err(EngineError::SchemaMismatch),
            Err(_) => Err(EngineError::InvalidJson),
        },
        Err(_) => Err(EngineError::InvalidJson),
    }
}

/// The members of an item object the dialect reads.
struct Fields {
    id: &'static str,
    content: &'static str,
    title: Option<&'static str>,
    uri: Option<&'static str>,
    updated_at: Option<&'static str>,
    score: Option<&'static str>,
}

impl Fields {
    fn of(response: &ResponseSpec) -> Fields {
        Fields {
            id: response.id_field.member(),
            content: response.content_field.member(),
            title: response.title_field.member(),
            uri: response.uri_field.member(),
            updated_at: response.updated_at_field.member(),
            score: response.score_field.member(),
        }
    }
}

/// The collection: `Some(items)` when the value is an array, `None` (consumed) otherwise.
struct Collect {
    fields: Fields,
    encoding: ContentEncoding,
    limit: usize,
}

impl<'de> DeserializeSeed<'de> for &Collect {
    type Value = Option<Vec<Item>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &Collect {
    type Value = Option<Vec<Item>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        loop {
            if items.len() < self.limit {
                match seq.next_element_seed(ItemSeed(self))? {
                    Some(Some(item)) => items.push(item),
                    Some(None) => {}
                    None => break,
                }
            } else if seq.next_element::<Skip>()?.is_none() {
                break;
            }
        }
        Ok(Some(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        skip_map(map).map(|()| None)
    }

    scalars_are!(None);
}

/// The `{"results": [...]}` root: its last `results` member, when that is an array.
struct Root<'c>(&'c Collect);

impl<'de> DeserializeSeed<'de> for Root<'_> {
    type Value = Option<Vec<Item>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        // Anything but an object is a data error, handled by the caller.
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Root<'_> {
    type Value = Option<Vec<Item>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object with a results array")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut results = None;
        while let Some(key) = map.next_key::<Member<'de>>()? {
            if key.is_text("results") {
                results = Some(map.next_value_seed(self.0)?);
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(results.flatten())
    }
}

/// One element of the collection: `Some(item)` when it is an object with what an item needs.
struct ItemSeed<'c>(&'c Collect);

impl<'de> DeserializeSeed<'de> for ItemSeed<'_> {
    type Value = Option<Item>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItemSeed<'_> {
    type Value = Option<Item>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an item object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let fields = &self.0.fields;
        let (mut id, mut content, mut title, mut uri, mut updated_at, mut score) = (None, None, None, None, None, None);
        while let Some(key) = map.next_key::<Member<'de>>()? {
            let Member::Text(key) = key else { continue };
            let slot = match key.as_ref() {
                name if name == fields.id => &mut id,
                name if name == fields.content => &mut content,
                name if Some(name) == fields.title => &mut title,
                name if Some(name) == fields.uri => &mut uri,
                name if Some(name) == fields.updated_at => &mut updated_at,
                name if Some(name) == fields.score => {
                    score = map.next_value::<Member<'de>>()?.number();
                    continue;
                }
                _ => {
                    map.next_value::<Skip>()?;
                    continue;
                }
            };
            *slot = map.next_value::<Member<'de>>()?.non_empty_text();
        }
        let (Some(id), Some(raw_content)) = (id, content) else { return Ok(None) };
        let content = match self.0.encoding {
            ContentEncoding::Plain => raw_content.into_owned(),
            ContentEncoding::MessageJson => unwrap_messages(&raw_content).unwrap_or_else(|| raw_content.into_owned()),
        };
        if content.is_empty() {
            return Ok(None);
        }
        Ok(Some(Item {
            id: id.into_owned(),
            content,
            title: title.map(Cow::into_owned),
            uri: uri.map(Cow::into_owned),
            score: score.filter(|score: &f64| score.is_finite()),
            updated_at: updated_at.map(Cow::into_owned),
        }))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq).map(|()| None)
    }

    scalars_are!(None);
}

/// A member's value (or a key) as far as an item cares: text (borrowed from the body when it has
/// no escapes), a number, or anything else (walked through).
enum Member<'de> {
    Text(Cow<'de, str>),
    Number(f64),
    Other,
}

impl<'de> Member<'de> {
    fn is_text(&self, wanted: &str) -> bool {
        matches!(self, Member::Text(text) if text == wanted)
    }

    fn non_empty_text(self) -> Option<Cow<'de, str>> {
        match self {
            Member::Text(text) if !text.is_empty() => Some(text),
            _ => None,
        }
    }

    fn number(self) -> Option<f64> {
        match self {
            Member::Number(number) => Some(number),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Member<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MemberVisitor)
    }
}

struct MemberVisitor;

impl<'de> Visitor<'de> for MemberVisitor {
    type Value = Member<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Member::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Member::Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
        Ok(Member::Text(Cow::Owned(text)))
    }

    // As `Value::as_f64`: integers convert, floats are as parsed.
    #[allow(clippy::cast_precision_loss)]
    fn visit_i64<E: de::Error>(self, number: i64) -> Result<Self::Value, E> {
        Ok(Member::Number(number as f64))
    }

    #[allow(clippy::cast_precision_loss)]
    fn visit_u64<E: de::Error>(self, number: u64) -> Result<Self::Value, E> {
        Ok(Member::Number(number as f64))
    }

    fn visit_f64<E: de::Error>(self, number: f64) -> Result<Self::Value, E> {
        Ok(Member::Number(number))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Member::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Member::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        skip_seq(seq).map(|()| Member::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        skip_map(map).map(|()| Member::Other)
    }
}

/// Any JSON value, parsed and dropped. Unlike `serde::de::IgnoredAny` (which serde_json skips
/// without its nesting limit or escape checks), it goes through `deserialize_any`, and an object
/// whose first key is [`RAW_VALUE_KEY`] is read as a `Value` reads it, so a value is accepted
/// exactly when it parses as a `Value`.
pub(crate) struct Skip;

/// The key serde_json's `Value` reads specially when it is an object's first: the object then
/// stands for the JSON text in that member's string value, and must end after it (serde_json's
/// `raw_value` feature, on here through axum's `json`; serde_json 1.0.154 `value/de.rs`
/// `visit_map` and `KeyClassifier`). Readers that accept exactly what a `Value` accepts do the same.
pub(crate) const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

/// Whether an object key is [`RAW_VALUE_KEY`].
pub(crate) struct RawValueKey(pub(crate) bool);

impl<'de> Deserialize<'de> for RawValueKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawValueKeyVisitor)
    }
}

struct RawValueKeyVisitor;

impl Visitor<'_> for RawValueKeyVisitor {
    type Value = RawValueKey;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<RawValueKey, E> {
        Ok(RawValueKey(key == RAW_VALUE_KEY))
    }
}

/// Walk the rest of an object whose first key was [`RAW_VALUE_KEY`]: its value is a string holding
/// JSON, read as `T` (what a `Value` would hold in the object's place).
pub(crate) fn raw_value<'de, A: MapAccess<'de>, T>(
    map: &mut A,
    read: impl FnOnce(&str) -> serde_json::Result<T>,
) -> Result<T, A::Error> {
    let text: String = map.next_value()?;
    read(&text).map_err(de::Error::custom)
}

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Skip, A::Error> {
        skip_seq(seq).map(|()| Skip)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Skip, A::Error> {
        skip_map(map).map(|()| Skip)
    }

    scalars_are!(Skip);
}

fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<Skip>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    let mut first = true;
    while let Some(RawValueKey(raw)) = map.next_key()? {
        if first && raw {
            return raw_value(&mut map, |text| serde_json::from_str::<Skip>(text).map(|Skip| ()));
        }
        first = false;
        map.next_value::<Skip>()?;
    }
    Ok(())
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
    use memgate_crds::{ContentField, IdField, ScoreField, TitleField, UpdatedAtField, UriField};
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

    /// Read with `Value` in mind: a repeated member counts by its last occurrence, the whole body
    /// must parse (also past the limit and inside members the dialect does not read), and the
    /// nesting limit and string escapes are checked there too.
    #[test]
    fn the_body_is_read_as_a_value_would_be() {
        let read = |body: &str, collection, limit| {
            normalize(body.as_bytes(), &spec(collection), ContentEncoding::Plain, limit)
        };
        let results = Collection::Results;
        let root = Collection::RootArray;
        assert_eq!(read(r#"[{"id":"a","id":7,"content":"x"}]"#, root, 5), Ok(vec![]));
        assert_eq!(read(r#"[{"id":7,"id":"a","content":"x"}]"#, root, 5), Ok(vec![plain("a", "x")]));
        assert_eq!(
            read(r#"{"results":1,"results":[{"id":"a","content":"x"}]}"#, results, 5),
            Ok(vec![plain("a", "x")])
        );
        assert_eq!(
            read(r#"{"results":[{"id":"a","content":"x"}],"results":{}}"#, results, 5),
            Err(EngineError::SchemaMismatch)
        );
        assert_eq!(
            read(r#"{"res\u0075lts":[{"id":"\u0061","content":"t\tx"}]}"#, results, 5),
            Ok(vec![plain("a", "t\tx")])
        );
        let score = read(r#"[{"id":"a","content":"x","score":18446744073709551616}]"#, root, 5).expect("read");
        assert_eq!(score[0].score, Some(18_446_744_073_709_551_616.0));
        let score = read(r#"[{"id":"a","content":"x","score":-3,"score":"high"}]"#, root, 5).expect("read");
        assert_eq!(score[0].score, None, "the last score is not a number");

        let deep = format!(r#"[{{"id":"a","content":"x","extra":{}1{}}}]"#, "[".repeat(200), "]".repeat(200));
        assert_eq!(read(&deep, root, 5), Err(EngineError::InvalidJson), "nesting beyond serde_json's 128");
        let shallow = format!(r#"[{{"id":"a","content":"x","extra":{}1{}}}]"#, "[".repeat(100), "]".repeat(100));
        assert_eq!(read(&shallow, root, 5), Ok(vec![plain("a", "x")]));
        for bad in [
            r#"[{"id":"a","content":"x","extra":"\ud800"}]"#,
            r#"[{"id":"a","content":"x"},{"id":]"#,
            r#"[{"id":"a","content":"x"},{"id":"b","content":1e400}]"#,
            r#"[{"id":"a","content":"x"}] x"#,
        ] {
            assert_eq!(read(bad, root, 1), Err(EngineError::InvalidJson), "{bad}");
        }
        // Syntax beats shape, as when the whole body was parsed first.
        assert_eq!(read("[1,]", results, 5), Err(EngineError::InvalidJson));
        assert_eq!(read("[1] x", results, 5), Err(EngineError::InvalidJson));
        assert_eq!(read("[1]", results, 5), Err(EngineError::SchemaMismatch));
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
