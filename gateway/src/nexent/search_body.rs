//! Reading a Nexent search request body: the `query` and `limit` members of one JSON object,
//! straight from the bytes (the query borrowed from them unless it has escapes), every other member
//! walked and dropped.
//!
//! It accepts and yields exactly what reading the body as a `serde_json::Value` and then the two
//! members from it would (the code before it, kept as the oracle of the unit test below and of the
//! `nexent_requests` fuzz target): the body must be one JSON object, valid throughout (nesting
//! limit, number range and escapes included: every member goes through `deserialize_any`); a
//! member given twice counts by its last occurrence, as a `Value` map keeps it; an object whose
//! first key is serde_json's [`RAW_VALUE_KEY`] stands for the JSON in its string value, as in a
//! `Value`; `query` must be a string; `limit` absent, `null` or an integer that fits `i64`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::engine::normalize::{RAW_VALUE_KEY, RawValueKey, Skip, raw_value};

/// The two members read, as their last occurrence left them.
#[derive(Debug, Default, PartialEq)]
pub(super) struct SearchBody<'de> {
    /// `query`: `None` when absent.
    pub(super) query: Option<Query<'de>>,
    /// `limit`: `None` when absent.
    pub(super) limit: Option<Limit>,
}

/// The value of a `query` member.
#[derive(Debug, PartialEq)]
pub(super) enum Query<'de> {
    /// A string.
    Text(Cow<'de, str>),
    /// Anything else.
    Other,
}

/// The value of a `limit` member.
#[derive(Debug, PartialEq)]
pub(super) enum Limit {
    /// `null`.
    Null,
    /// An integer within `i64`.
    Integer(i64),
    /// Anything else (a fraction, a larger integer, a string, ...).
    Other,
}

impl SearchBody<'_> {
    fn into_owned(self) -> SearchBody<'static> {
        SearchBody { query: self.query.map(Query::into_owned), limit: self.limit }
    }
}

impl Query<'_> {
    fn into_owned(self) -> Query<'static> {
        match self {
            Query::Text(text) => Query::Text(Cow::Owned(text.into_owned())),
            Query::Other => Query::Other,
        }
    }
}

impl Limit {
    fn into_owned(self) -> Limit {
        self
    }
}

/// The members of `bytes`, or `None` when it is not one valid JSON object.
pub(super) fn read(bytes: &[u8]) -> Option<SearchBody<'_>> {
    serde_json::from_slice(bytes).ok()
}

impl<'de> Deserialize<'de> for SearchBody<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(BodyVisitor)
    }
}

struct BodyVisitor;

impl<'de> Visitor<'de> for BodyVisitor {
    type Value = SearchBody<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut body = SearchBody::default();
        let mut first = true;
        while let Some(member) = map.next_key::<Member>()? {
            match member {
                Member::RawValue if first => {
                    return raw_value(&mut map, |text| {
                        serde_json::from_str::<SearchBody>(text).map(SearchBody::into_owned)
                    });
                }
                Member::Query => body.query = Some(map.next_value()?),
                Member::Limit => body.limit = Some(map.next_value()?),
                Member::RawValue | Member::Other => {
                    map.next_value::<Skip>()?;
                }
            }
            first = false;
        }
        Ok(body)
    }
}

/// Which member a key names.
enum Member {
    Query,
    Limit,
    RawValue,
    Other,
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MemberVisitor)
    }
}

struct MemberVisitor;

impl Visitor<'_> for MemberVisitor {
    type Value = Member;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Member, E> {
        Ok(match key {
            "query" => Member::Query,
            "limit" => Member::Limit,
            RAW_VALUE_KEY => Member::RawValue,
            _ => Member::Other,
        })
    }
}

/// A visitor's answer to every kind of value but the ones it reads: `$other`, arrays and objects
/// walked through first (an object standing for raw JSON, see [`RAW_VALUE_KEY`], is read as
/// `$Own` from it).
macro_rules! otherwise {
    ($other:expr, $Own:ty) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<Skip>()?.is_some() {}
            Ok($other)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut first = true;
            while let Some(RawValueKey(raw)) = map.next_key()? {
                if first && raw {
                    return raw_value(&mut map, |text| serde_json::from_str::<$Own>(text).map(<$Own>::into_owned));
                }
                first = false;
                map.next_value::<Skip>()?;
            }
            Ok($other)
        }
    };
}

impl<'de> Deserialize<'de> for Query<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QueryVisitor)
    }
}

struct QueryVisitor;

impl<'de> Visitor<'de> for QueryVisitor {
    type Value = Query<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Query::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Query::Text(Cow::Owned(text.to_owned())))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Query::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Query::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Query::Other)
    }

    otherwise!(Query::Other, Query);
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LimitVisitor)
    }
}

struct LimitVisitor;

impl<'de> Visitor<'de> for LimitVisitor {
    type Value = Limit;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Limit, E> {
        Ok(Limit::Null)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Limit, E> {
        Ok(Limit::Integer(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Limit, E> {
        Ok(i64::try_from(n).map_or(Limit::Other, Limit::Integer))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Limit, E> {
        Ok(Limit::Other)
    }

    otherwise!(Limit::Other, Limit);
}
