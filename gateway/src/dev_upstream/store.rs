//! The bounded in-memory store behind the development upstream: session-id scoping, lexical
//! scoring and the mem0 JSON shape of a memory. Pure: no HTTP, no locking, no clock reads.

use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// The session ids a memory carries, or that a search or listing is limited to.
///
/// Empty strings count as absent (mem0 tests the ids for truthiness).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ids {
    pub(crate) user_id: Option<String>,
    pub(crate) agent_id: Option<String>,
    pub(crate) run_id: Option<String>,
}

impl Ids {
    /// Ids from optional values, dropping empty ones.
    pub(crate) fn new(user_id: Option<String>, agent_id: Option<String>, run_id: Option<String>) -> Self {
        let present = |id: Option<String>| id.filter(|id| !id.is_empty());
        Self { user_id: present(user_id), agent_id: present(agent_id), run_id: present(run_id) }
    }

    /// Whether no id is given.
    pub(crate) fn is_empty(&self) -> bool {
        self.user_id.is_none() && self.agent_id.is_none() && self.run_id.is_none()
    }

    /// Whether every id given here equals the corresponding id of `memory`.
    fn admit(&self, memory: &Ids) -> bool {
        [(&self.user_id, &memory.user_id), (&self.agent_id, &memory.agent_id), (&self.run_id, &memory.run_id)]
            .into_iter()
            .all(|(want, have)| want.is_none() || want == have)
    }
}

/// What a search or listing is limited to: session ids and exact metadata values.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Filter {
    /// Every given id must equal the memory's.
    pub(crate) ids: Ids,
    /// Every entry must equal the memory's metadata value under the same key.
    pub(crate) metadata: Map<String, Value>,
}

impl Filter {
    fn admit(&self, memory: &Memory) -> bool {
        self.ids.admit(&memory.ids)
            && self.metadata.iter().all(|(key, want)| memory.metadata.as_ref().and_then(|m| m.get(key)) == Some(want))
    }
}

/// One stored memory.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Memory {
    pub(crate) id: String,
    pub(crate) text: String,
    hash: String,
    metadata: Option<Map<String, Value>>,
    ids: Ids,
    created_at: String,
    tokens: HashSet<String>,
}

impl Memory {
    /// The mem0 JSON shape of this memory; `score` is present for search results.
    ///
    /// Memories are never updated here, so `updated_at` equals `created_at`. Session ids appear
    /// only when set, as in mem0.
    pub(crate) fn to_json(&self, score: Option<f64>) -> Value {
        let mut item = json!({
            "id": self.id,
            "memory": self.text,
            "hash": self.hash,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "updated_at": self.created_at,
        });
        if let Value::Object(fields) = &mut item {
            if let Some(score) = score {
                fields.insert("score".into(), json!(score));
            }
            for (name, id) in
                [("user_id", &self.ids.user_id), ("agent_id", &self.ids.agent_id), ("run_id", &self.ids.run_id)]
            {
                if let Some(id) = id {
                    fields.insert(name.into(), json!(id));
                }
            }
        }
        item
    }
}

/// An add was refused because the store would hold more than `capacity` memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full {
    pub(crate) capacity: usize,
}

/// Memories in insertion order, at most `capacity` of them.
#[derive(Debug)]
pub(crate) struct Store {
    memories: Vec<Memory>,
    capacity: usize,
    /// Random per store, so that ids of different stores differ.
    id_seed: u64,
    /// Memories ever added (the low part of each id).
    added: u64,
}

impl Store {
    /// An empty store holding at most `capacity` memories.
    pub(crate) fn new(capacity: usize) -> Self {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default());
        Self { memories: Vec::new(), capacity, id_seed: hasher.finish(), added: 0 }
    }

    /// Stores each of `texts` as one memory (no de-duplication), all of them or, when that would
    /// exceed the capacity, none. Returns the new memories in order.
    pub(crate) fn add(
        &mut self,
        texts: Vec<String>,
        ids: &Ids,
        metadata: Option<&Map<String, Value>>,
        now: SystemTime,
    ) -> Result<&[Memory], Full> {
        if texts.len() > self.capacity.saturating_sub(self.memories.len()) {
            return Err(Full { capacity: self.capacity });
        }
        let start = self.memories.len();
        let created_at = rfc3339(now);
        for text in texts {
            self.added += 1;
            self.memories.push(Memory {
                id: uuid_shaped(self.id_seed, self.added),
                hash: fnv1a_hex(&text),
                tokens: tokens(&text),
                text,
                metadata: metadata.cloned(),
                ids: ids.clone(),
                created_at: created_at.clone(),
            });
        }
        Ok(&self.memories[start..])
    }

    /// Memories admitted by `filter` with a positive lexical score for `query` (at least
    /// `threshold` when given), best first, ties in insertion order, at most `top_k`.
    pub(crate) fn search(
        &self,
        query: &str,
        filter: &Filter,
        top_k: usize,
        threshold: Option<f64>,
    ) -> Vec<(&Memory, f64)> {
        let wanted = tokens(query);
        let mut hits: Vec<(&Memory, f64)> = self
            .memories
            .iter()
            .filter(|memory| filter.admit(memory))
            .map(|memory| (memory, score(&wanted, &memory.tokens)))
            .filter(|(_, score)| *score > 0.0 && threshold.is_none_or(|threshold| *score >= threshold))
            .collect();
        // Stable: equal scores keep insertion order.
        hits.sort_by(|a, b| b.1.total_cmp(&a.1));
        hits.truncate(top_k);
        hits
    }

    /// Memories admitted by `filter`, in insertion order.
    pub(crate) fn list<'a>(&'a self, filter: &'a Filter) -> impl Iterator<Item = &'a Memory> {
        self.memories.iter().filter(|memory| filter.admit(memory))
    }
}

/// Lower-cased alphanumeric tokens of `text`.
fn tokens(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase).collect()
}

/// The fraction of `query` tokens present in `memory` (0 when the query has no tokens).
fn score(query: &HashSet<String>, memory: &HashSet<String>) -> f64 {
    if query.is_empty() {
        return 0.0;
    }
    let present = query.iter().filter(|token| memory.contains(*token)).count();
    present as f64 / query.len() as f64
}

/// A UUID-v4-shaped id: 60 bits of `seed`, then the 48-bit `counter`.
fn uuid_shaped(seed: u64, counter: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        seed >> 32,
        (seed >> 16) & 0xffff,
        (seed >> 4) & 0xfff,
        (seed & 0xf) << 8,
        counter & 0xffff_ffff_ffff
    )
}

/// A content hash (64-bit FNV-1a, hex). mem0 uses MD5; clients treat it as opaque.
fn fnv1a_hex(text: &str) -> String {
    let hash = text
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3));
    format!("{hash:016x}")
}

/// `time` as RFC 3339 UTC with whole seconds (`2026-08-01T00:00:00Z`); times before 1970 read as 1970.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let (days, of_day) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm, unsigned form).
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", of_day / 3_600, of_day % 3_600 / 60, of_day % 60)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn user(id: &str) -> Ids {
        Ids::new(Some(id.into()), None, None)
    }

    fn only(ids: Ids) -> Filter {
        Filter { ids, metadata: Map::new() }
    }

    fn texts(all: &[&str]) -> Vec<String> {
        all.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(1_785_542_400)), "2026-08-01T00:00:00Z");
        assert_eq!(rfc3339(at(951_868_799)), "2000-02-29T23:59:59Z");
        assert_eq!(rfc3339(at(951_868_800)), "2000-03-01T00:00:00Z");
        assert_eq!(rfc3339(UNIX_EPOCH - Duration::from_secs(5)), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn ids_are_uuid_shaped_and_distinct() {
        let mut store = Store::new(10);
        let added = store.add(texts(&["a", "a"]), &user("u"), None, UNIX_EPOCH).unwrap();
        let (first, second) = (&added[0].id, &added[1].id);
        assert_ne!(first, second);
        for id in [first, second] {
            let groups: Vec<usize> = id.split('-').map(str::len).collect();
            assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
            assert_eq!(&id[14..15], "4", "{id}");
            assert_eq!(&id[19..20], "8", "{id}");
            assert!(id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{id}");
        }
    }

    #[test]
    fn empty_ids_count_as_absent() {
        assert!(Ids::new(Some(String::new()), None, Some(String::new())).is_empty());
        assert!(!Ids::new(None, Some("a".into()), None).is_empty());
    }

    #[test]
    fn score_is_the_fraction_of_query_tokens_present() {
        let memory = tokens("Tag the release, then run the smoke-suite.");
        assert_eq!(score(&tokens("RELEASE checklist"), &memory), 0.5);
        assert_eq!(score(&tokens("smoke suite"), &memory), 1.0);
        assert_eq!(score(&tokens("?!"), &memory), 0.0);
    }

    #[test]
    fn search_drops_zero_scores_and_orders_by_score_then_insertion() {
        let mut store = Store::new(10);
        store.add(texts(&["alpha beta", "gamma", "alpha", "beta alpha"]), &user("u"), None, UNIX_EPOCH).unwrap();
        let hits: Vec<(&str, f64)> =
            store.search("alpha beta", &only(user("u")), 10, None).iter().map(|(m, s)| (m.text.as_str(), *s)).collect();
        assert_eq!(hits, [("alpha beta", 1.0), ("beta alpha", 1.0), ("alpha", 0.5)]);
        assert_eq!(store.search("alpha beta", &only(user("u")), 2, None).len(), 2);
        assert_eq!(store.search("alpha beta", &only(user("u")), 10, Some(0.6)).len(), 2);
    }

    #[test]
    fn every_given_filter_id_must_match() {
        let mut store = Store::new(10);
        store
            .add(texts(&["shared note"]), &Ids::new(Some("u".into()), Some("a".into()), None), None, UNIX_EPOCH)
            .unwrap();
        store
            .add(texts(&["shared note"]), &Ids::new(Some("u".into()), Some("b".into()), None), None, UNIX_EPOCH)
            .unwrap();
        assert_eq!(store.search("note", &only(user("u")), 10, None).len(), 2);
        assert_eq!(store.search("note", &only(Ids::new(Some("u".into()), Some("b".into()), None)), 10, None).len(), 1);
        assert_eq!(store.search("note", &only(Ids::new(None, None, Some("r".into()))), 10, None).len(), 0);
        assert_eq!(store.search("note", &only(user("v")), 10, None).len(), 0);
    }

    #[test]
    fn metadata_filters_compare_exact_values() {
        let mut store = Store::new(10);
        let metadata: Map<String, Value> = serde_json::from_str(r#"{"kind": "fact"}"#).unwrap();
        store.add(texts(&["note one"]), &user("u"), Some(&metadata), UNIX_EPOCH).unwrap();
        store.add(texts(&["note two"]), &user("u"), None, UNIX_EPOCH).unwrap();
        let filter = Filter { ids: user("u"), metadata };
        let hits: Vec<&str> = store.search("note", &filter, 10, None).iter().map(|(m, _)| m.text.as_str()).collect();
        assert_eq!(hits, ["note one"]);
    }

    #[test]
    fn adds_beyond_capacity_are_refused_whole() {
        let mut store = Store::new(3);
        store.add(texts(&["a", "b"]), &user("u"), None, UNIX_EPOCH).unwrap();
        assert_eq!(store.add(texts(&["c", "d"]), &user("u"), None, UNIX_EPOCH).unwrap_err(), Full { capacity: 3 });
        assert_eq!(store.list(&only(user("u"))).count(), 2);
        store.add(texts(&["c"]), &user("u"), None, UNIX_EPOCH).unwrap();
        assert!(store.add(texts(&["d"]), &user("u"), None, UNIX_EPOCH).is_err());
        assert_eq!(store.list(&only(user("u"))).count(), 3);
    }

    #[test]
    fn json_shape_matches_mem0() {
        let mut store = Store::new(1);
        let added = store.add(texts(&["Tag before release."]), &user("u"), None, at(1_785_542_400)).unwrap();
        let item = added[0].to_json(Some(0.5));
        let id = added[0].id.clone();
        assert_eq!(
            item,
            json!({
                "id": id, "memory": "Tag before release.", "hash": fnv1a_hex("Tag before release."),
                "metadata": null, "score": 0.5, "created_at": "2026-08-01T00:00:00Z",
                "updated_at": "2026-08-01T00:00:00Z", "user_id": "u",
            })
        );
    }
}
