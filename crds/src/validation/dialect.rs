//! Rules of one `DialectPreset` (reference §2).

use super::{Violation, names::check_dns_subdomain, path::check_path};
use crate::builtin_ids::{BuiltinStatus, classify};
use crate::dialect_preset::{DialectPresetSpec, QueryLocation, SearchMethod};

/// Check a DialectPreset named `name`. The closed value sets are enforced by the types themselves
/// (parsing refuses any other value); this checks everything else.
pub fn dialect_preset(name: &str, spec: &DialectPresetSpec) -> Vec<Violation> {
    let mut found = Vec::new();
    match classify(name) {
        BuiltinStatus::Shipped => found.push(Violation::new(
            "metadata.name",
            format!("\"{name}\" is the id of a built-in dialect; use spec.dialect.builtin in the MemoryProvider, or give this DialectPreset another name"),
        )),
        BuiltinStatus::Reserved => found.push(Violation::new(
            "metadata.name",
            format!("\"{name}\" is reserved for a future built-in dialect (reserved, not yet verified); give this DialectPreset another name"),
        )),
        BuiltinStatus::Unknown => found.extend(check_dns_subdomain("metadata.name", name, "a DialectPreset name")),
    }
    found.extend(dialect_spec(spec));
    found
}

/// Check a dialect spec alone (the built-in presets are checked with this too).
pub fn dialect_spec(spec: &DialectPresetSpec) -> Vec<Violation> {
    let mut found = Vec::new();
    if spec.dialect_version != 1 {
        found.push(Violation::new("spec.dialectVersion", "must be 1"));
    }
    found.extend(check_path("spec.search.path", &spec.search.path, false));
    let search = &spec.search;
    if search.method == SearchMethod::Get {
        if search.query_location == QueryLocation::Json {
            found.push(Violation::new("spec.search.queryLocation", "a GET dialect has no body: use 'query'"));
        }
        for (field, location) in [
            ("spec.search.userIdLocation", search.user_id_location),
            ("spec.search.agentIdLocation", search.agent_id_location),
            ("spec.search.appIdLocation", search.app_id_location),
        ] {
            if location.is_json() {
                found.push(Violation::new(field, "a GET dialect has no body: use 'query' or 'omit'"));
            }
        }
    }
    if let Some(threshold) = search.threshold
        && !(threshold.is_finite() && (0.0..=1.0).contains(&threshold))
    {
        found.push(Violation::new("spec.search.threshold", "must be between 0 and 1"));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect_preset::*;

    pub(crate) fn valid_post() -> DialectPresetSpec {
        DialectPresetSpec {
            dialect_version: 1,
            auth: AuthScheme::AuthorizationBearer,
            search: SearchSpec {
                method: SearchMethod::Post,
                path: "/v1/search".into(),
                query_location: QueryLocation::Json,
                user_id_location: IdLocation::JsonFilters,
                agent_id_location: IdLocation::Omit,
                app_id_location: IdLocation::Omit,
                limit_field: LimitField::Limit,
                threshold: Some(0.2),
                rerank: None,
            },
            response: ResponseSpec {
                collection: Collection::Results,
                id_field: IdField::Id,
                content_field: ContentField::Content,
                title_field: TitleField::Omit,
                uri_field: UriField::Omit,
                score_field: ScoreField::Score,
                updated_at_field: UpdatedAtField::Omit,
            },
        }
    }

    fn fields(v: &[Violation]) -> Vec<&str> {
        v.iter().map(|v| v.field.as_str()).collect()
    }

    #[test]
    fn valid_dialect_passes() {
        assert!(dialect_preset("team-dialect", &valid_post()).is_empty());
    }

    #[test]
    fn builtin_and_reserved_names_are_refused() {
        let v = dialect_preset("mem0-platform-v3", &valid_post());
        assert_eq!(fields(&v), ["metadata.name"]);
        let v = dialect_preset("aliyun-hologres-mem0-2.0.6", &valid_post());
        assert!(v[0].message.contains("reserved, not yet verified"));
    }

    #[test]
    fn name_must_be_a_dns_subdomain() {
        assert_eq!(fields(&dialect_preset("Team_Dialect", &valid_post())), ["metadata.name"]);
    }

    #[test]
    fn dialect_version_must_be_one() {
        let mut spec = valid_post();
        spec.dialect_version = 2;
        assert_eq!(fields(&dialect_preset("d", &spec)), ["spec.dialectVersion"]);
    }

    #[test]
    fn get_dialect_refuses_every_json_location() {
        let mut spec = valid_post();
        spec.search.method = SearchMethod::Get;
        spec.search.agent_id_location = IdLocation::Json;
        let v = dialect_preset("d", &spec);
        assert_eq!(
            fields(&v),
            ["spec.search.queryLocation", "spec.search.userIdLocation", "spec.search.agentIdLocation"]
        );
        spec.search.query_location = QueryLocation::Query;
        spec.search.user_id_location = IdLocation::Query;
        spec.search.agent_id_location = IdLocation::Omit;
        assert!(dialect_preset("d", &spec).is_empty());
    }

    #[test]
    fn search_path_rules_apply() {
        let mut spec = valid_post();
        spec.search.path = "/a/../admin".into();
        assert_eq!(fields(&dialect_preset("d", &spec)), ["spec.search.path"]);
    }

    #[test]
    fn threshold_range_is_enforced() {
        for bad in [-0.1, 1.5, f64::NAN] {
            let mut spec = valid_post();
            spec.search.threshold = Some(bad);
            assert_eq!(fields(&dialect_preset("d", &spec)), ["spec.search.threshold"]);
        }
    }
}
