//! Rules of one `MemoryProvider`, alone and against its dialect (reference §3).

use super::destination::{Placement, provider_destinations};
use super::{
    Violation,
    names::{check_dns_label, check_dns_subdomain, check_secret_key},
    oidc::check_oidc,
    origin::parse_origin,
    path::check_path,
    scope::check_scope_id,
};
use crate::builtin_ids::{BuiltinStatus, SHIPPED, classify};
use crate::dialect_preset::{DialectPresetSpec, IdLocation};
use crate::memory_provider::{MAX_TIMEOUT_MS, MemoryProviderSpec, SecretKeyRef};

/// What provider validation needs to know about the dialect a provider resolved to.
#[derive(Debug, Clone, Copy)]
pub struct DialectView<'a> {
    /// The dialect's search grammar.
    pub spec: &'a DialectPresetSpec,
    /// True when the dialect carries a verified write (ingest) contract: built-ins only.
    pub can_write: bool,
}

/// Check a MemoryProvider's name and namespace: the name is a URL segment and, as
/// `memgate-<name>`, a plugin folder name (at most 255 bytes), so at most 247 characters.
pub fn provider_identity(name: &str, namespace: &str) -> Vec<Violation> {
    let mut found: Vec<Violation> =
        check_dns_subdomain("metadata.name", name, "a MemoryProvider name").into_iter().collect();
    if name.len() > 247 {
        found.push(Violation::new(
            "metadata.name",
            "must be at most 247 characters (memgate-<name> names a plugin folder)",
        ));
    }
    found.extend(check_dns_label("metadata.namespace", namespace, "a namespace name"));
    found
}

/// Check everything a single MemoryProvider can be checked for on its own.
pub fn memory_provider(spec: &MemoryProviderSpec) -> Vec<Violation> {
    let mut found = Vec::new();
    check_dialect_source(spec, &mut found);
    if let Err(v) = parse_origin("spec.endpoint.origin", &spec.endpoint.origin, spec.endpoint.allow_insecure_http) {
        found.push(v);
    }
    found.extend(check_path("spec.endpoint.basePath", &spec.endpoint.base_path, true));
    check_secret_ref("spec.credentials.secretRef", &spec.credentials.secret_ref, &mut found);
    // The built-in dialects all speak to Mem0 servers, which refuse ids with whitespace.
    let builtin = spec.dialect.builtin.is_some();
    for (field, value) in [
        ("spec.scope.userId", &spec.scope.user_id),
        ("spec.scope.agentId", &spec.scope.agent_id),
        ("spec.scope.appId", &spec.scope.app_id),
    ] {
        if let Some(value) = value {
            found.extend(check_scope_id(field, value, builtin));
        }
    }
    if !(1..=MAX_TIMEOUT_MS).contains(&spec.timeout_ms) {
        found.push(Violation::new("spec.timeoutMs", format!("must be between 1 and {MAX_TIMEOUT_MS}")));
    }
    if let Some(claim) = &spec.nexent.plugin_claim {
        found.extend(check_dns_subdomain("spec.nexent.pluginClaim", claim, "a PersistentVolumeClaim name"));
    }
    if spec.nexent.ingest && spec.dialect.preset_ref.is_some() {
        found.push(Violation::new(
            "spec.nexent.ingest",
            "a custom DialectPreset describes search only; ingest needs a built-in dialect with a verified write contract",
        ));
    }
    check_access(spec, &mut found);
    if let Some(limits) = &spec.limits {
        found.extend(super::limits::provider_limits(limits));
    }
    // Link-local and cloud-metadata destinations are refused wherever memgate runs; loopback only
    // in a cluster (`destination::provider_destinations` with `Placement::Cluster`).
    found.extend(provider_destinations(spec, Placement::Standalone));
    found
}

/// Check a provider against the dialect it resolved to: scope ids present exactly where the dialect
/// sends them, caller-bound user ids only where the dialect sends a user id, ingest only with a write
/// contract.
pub fn provider_against_dialect(spec: &MemoryProviderSpec, dialect: DialectView<'_>) -> Vec<Violation> {
    let mut found = Vec::new();
    let search = &dialect.spec.search;
    let bound_user = spec.access.bind_user_id_to_subject;
    for (field, configured, location) in [
        ("spec.scope.userId", spec.scope.user_id.is_some() || bound_user, search.user_id_location),
        ("spec.scope.agentId", spec.scope.agent_id.is_some(), search.agent_id_location),
        ("spec.scope.appId", spec.scope.app_id.is_some(), search.app_id_location),
    ] {
        match (configured, location == IdLocation::Omit) {
            (false, false) => {
                found.push(Violation::new(field, "is required: the dialect sends this id with every search"))
            }
            (true, true) if field == "spec.scope.userId" && bound_user => found.push(Violation::new(
                "spec.access.bindUserIdToSubject",
                "the dialect does not send a user id (userIdLocation is omit), so there is nothing to bind",
            )),
            (true, true) => found
                .push(Violation::new(field, "must be unset: the dialect does not send this id (its location is omit)")),
            _ => {}
        }
    }
    // A presetRef with ingest is already refused by `memory_provider`; do not say it twice.
    if spec.nexent.ingest && !dialect.can_write && spec.dialect.preset_ref.is_none() {
        found.push(Violation::new(
            "spec.nexent.ingest",
            "the dialect has no verified write contract; only built-in dialects can ingest",
        ));
    }
    found
}

fn check_dialect_source(spec: &MemoryProviderSpec, found: &mut Vec<Violation>) {
    match (&spec.dialect.builtin, &spec.dialect.preset_ref) {
        (Some(_), Some(_)) | (None, None) => {
            found.push(Violation::new("spec.dialect", "set exactly one of builtin or presetRef"));
        }
        (Some(id), None) => match classify(id) {
            BuiltinStatus::Shipped => {}
            BuiltinStatus::Reserved => found.push(Violation::new(
                "spec.dialect.builtin",
                format!("\"{id}\" is reserved, not yet verified: no verified contract ships for it yet"),
            )),
            BuiltinStatus::Unknown => found.push(Violation::new(
                "spec.dialect.builtin",
                format!("unknown built-in dialect \"{id}\"; built-ins are {}", SHIPPED.join(", ")),
            )),
        },
        (None, Some(name)) => {
            found.extend(check_dns_subdomain("spec.dialect.presetRef", name, "a DialectPreset name"));
        }
    }
}

fn check_secret_ref(field: &str, secret_ref: &SecretKeyRef, found: &mut Vec<Violation>) {
    found.extend(check_dns_subdomain(&format!("{field}.name"), &secret_ref.name, "a Secret name"));
    found.extend(check_secret_key(&format!("{field}.key"), &secret_ref.key));
}

fn check_access(spec: &MemoryProviderSpec, found: &mut Vec<Violation>) {
    let access = &spec.access;
    if !access.anonymous && access.bearer_token.is_none() && access.service_accounts.is_none() && access.oidc.is_none()
    {
        found.push(Violation::new(
            "spec.access",
            "no caller could reach this provider; set anonymous: true, bearerToken, serviceAccounts or oidc",
        ));
    }
    if let Some(oidc) = &access.oidc {
        check_oidc(oidc, found);
    }
    if access.bind_user_id_to_subject {
        if access.service_accounts.is_none() && access.oidc.is_none() {
            found.push(Violation::new(
                "spec.access.bindUserIdToSubject",
                "needs spec.access.serviceAccounts or spec.access.oidc: only those tokens name the caller (a shared bearer token names no one)",
            ));
        }
        if access.anonymous {
            found.push(Violation::new(
                "spec.access.bindUserIdToSubject",
                "needs an authenticated caller and cannot be combined with anonymous: true",
            ));
        }
        if spec.scope.user_id.is_some() {
            found.push(Violation::new(
                "spec.scope.userId",
                "must be unset when spec.access.bindUserIdToSubject is true: the caller's identity supplies it",
            ));
        }
    }
    if let Some(bearer) = &access.bearer_token {
        check_secret_ref("spec.access.bearerToken.secretRef", &bearer.secret_ref, found);
    }
    if let Some(accounts) = &access.service_accounts {
        if let Some(audience) = &accounts.audience
            && (audience.trim().is_empty() || audience.len() > 253)
        {
            found.push(Violation::new("spec.access.serviceAccounts.audience", "must be 1 to 253 characters"));
        }
        if accounts.allowed.is_empty() || accounts.allowed.len() > 32 {
            found.push(Violation::new("spec.access.serviceAccounts.allowed", "must list 1 to 32 ServiceAccounts"));
        }
        for (i, allowed) in accounts.allowed.iter().enumerate() {
            let base = format!("spec.access.serviceAccounts.allowed[{i}]");
            found.extend(check_dns_label(&format!("{base}.namespace"), &allowed.namespace, "a namespace name"));
            if let Some(name) = &allowed.name {
                found.extend(check_dns_subdomain(&format!("{base}.name"), name, "a ServiceAccount name"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect_preset::*;
    use crate::memory_provider::*;

    fn provider() -> MemoryProviderSpec {
        MemoryProviderSpec {
            enabled: true,
            dialect: DialectSource { builtin: Some("mem0-oss-rest-2026-08".into()), preset_ref: None },
            endpoint: Endpoint {
                origin: "https://mem0.memory.svc".into(),
                base_path: String::new(),
                allow_insecure_http: false,
            },
            credentials: Credentials { secret_ref: SecretKeyRef { name: "mem0-api".into(), key: "api-key".into() } },
            scope: Scope {
                user_id: Some("repository-memory".into()),
                agent_id: Some("qwen-code".into()),
                app_id: None,
            },
            timeout_ms: 5000,
            mcp: McpSpec::default(),
            nexent: NexentSpec::default(),
            access: AccessSpec { anonymous: true, ..AccessSpec::default() },
            limits: None,
        }
    }

    fn dialect(user: IdLocation, agent: IdLocation, app: IdLocation) -> DialectPresetSpec {
        DialectPresetSpec {
            dialect_version: 1,
            auth: AuthScheme::XApiKey,
            search: SearchSpec {
                method: SearchMethod::Post,
                path: "/search".into(),
                query_location: QueryLocation::Json,
                user_id_location: user,
                agent_id_location: agent,
                app_id_location: app,
                limit_field: LimitField::TopK,
                threshold: None,
                rerank: None,
            },
            response: ResponseSpec {
                collection: Collection::Results,
                id_field: IdField::Id,
                content_field: ContentField::Memory,
                title_field: TitleField::Omit,
                uri_field: UriField::Omit,
                score_field: ScoreField::Score,
                updated_at_field: UpdatedAtField::UpdatedAtSnake,
            },
        }
    }

    fn fields(v: &[Violation]) -> Vec<&str> {
        v.iter().map(|v| v.field.as_str()).collect()
    }

    #[test]
    fn provider_names_must_be_kubernetes_names() {
        assert!(provider_identity("repo-memory", "agents").is_empty());
        let fields: Vec<_> = provider_identity("Repo_Memory/..", "Agents").into_iter().map(|v| v.field).collect();
        assert_eq!(fields, ["metadata.name", "metadata.namespace"]);
        assert_eq!(provider_identity(&"a".repeat(248), "agents")[0].field, "metadata.name");
    }

    #[test]
    fn valid_provider_passes() {
        assert!(memory_provider(&provider()).is_empty());
    }

    #[test]
    fn exactly_one_dialect_source() {
        let mut p = provider();
        p.dialect.preset_ref = Some("team".into());
        assert_eq!(fields(&memory_provider(&p)), ["spec.dialect"]);
        p.dialect = DialectSource::default();
        assert_eq!(fields(&memory_provider(&p)), ["spec.dialect"]);
    }

    #[test]
    fn unknown_builtin_is_refused_and_reserved_says_so() {
        let mut p = provider();
        p.dialect.builtin = Some("mem0-next".into());
        let v = memory_provider(&p);
        assert_eq!(fields(&v), ["spec.dialect.builtin"]);
        assert!(v[0].message.contains("unknown built-in"));
        p.dialect.builtin = Some("aliyun-rds-postgresql-memory-2026-08".into());
        assert!(memory_provider(&p)[0].message.contains("reserved, not yet verified"));
    }

    #[test]
    fn preset_ref_must_be_a_name() {
        let mut p = provider();
        p.dialect = DialectSource { builtin: None, preset_ref: Some("Bad/Name".into()) };
        assert_eq!(fields(&memory_provider(&p)), ["spec.dialect.presetRef"]);
    }

    #[test]
    fn http_origin_needs_opt_in() {
        let mut p = provider();
        p.endpoint.origin = "http://mem0.memory.svc:8888".into();
        assert_eq!(fields(&memory_provider(&p)), ["spec.endpoint.origin"]);
        p.endpoint.allow_insecure_http = true;
        assert!(memory_provider(&p).is_empty());
    }

    #[test]
    fn origin_with_path_is_refused() {
        let mut p = provider();
        p.endpoint.origin = "https://mem0.memory.svc/api".into();
        assert_eq!(fields(&memory_provider(&p)), ["spec.endpoint.origin"]);
    }

    #[test]
    fn base_path_traversal_is_refused() {
        let mut p = provider();
        p.endpoint.base_path = "/tenant/%2e%2e/admin".into();
        assert_eq!(fields(&memory_provider(&p)), ["spec.endpoint.basePath"]);
    }

    #[test]
    fn secret_ref_shape_is_checked() {
        let mut p = provider();
        p.credentials.secret_ref = SecretKeyRef { name: "Mem0".into(), key: "a/b".into() };
        assert_eq!(fields(&memory_provider(&p)), ["spec.credentials.secretRef.name", "spec.credentials.secretRef.key"]);
    }

    #[test]
    fn timeout_range_is_enforced() {
        for bad in [0, 30001] {
            let mut p = provider();
            p.timeout_ms = bad;
            assert_eq!(fields(&memory_provider(&p)), ["spec.timeoutMs"]);
        }
    }

    #[test]
    fn blank_or_control_scope_values_are_refused() {
        let mut p = provider();
        p.scope.user_id = Some("  ".into());
        p.scope.agent_id = Some("a\nb".into());
        assert_eq!(fields(&memory_provider(&p)), ["spec.scope.userId", "spec.scope.agentId"]);
    }

    #[test]
    fn whitespace_in_scope_ids_is_refused_for_builtin_dialects_only() {
        let mut p = provider();
        p.scope.user_id = Some("repository memory".into());
        p.scope.agent_id = Some(" qwen-code".into());
        let v = memory_provider(&p);
        assert_eq!(fields(&v), ["spec.scope.userId", "spec.scope.agentId"]);
        assert!(v[0].message.contains("whitespace"), "{}", v[0].message);
        p.scope.app_id = Some("app\u{3000}x".into());
        assert_eq!(fields(&memory_provider(&p)), ["spec.scope.userId", "spec.scope.agentId", "spec.scope.appId"]);
        p.dialect = DialectSource { builtin: None, preset_ref: Some("team".into()) };
        assert!(memory_provider(&p).is_empty(), "a custom dialect's upstream may accept spaces");
    }

    #[test]
    fn plugin_claim_must_be_a_name() {
        let mut p = provider();
        p.nexent.plugin_claim = Some("Plugins!".into());
        assert_eq!(fields(&memory_provider(&p)), ["spec.nexent.pluginClaim"]);
    }

    #[test]
    fn custom_preset_cannot_ingest() {
        let mut p = provider();
        p.dialect = DialectSource { builtin: None, preset_ref: Some("team".into()) };
        p.nexent.ingest = true;
        assert_eq!(fields(&memory_provider(&p)), ["spec.nexent.ingest"]);
    }

    #[test]
    fn nothing_is_open_by_default() {
        let mut p = provider();
        p.access = AccessSpec::default();
        assert_eq!(fields(&memory_provider(&p)), ["spec.access"]);
    }

    #[test]
    fn bind_user_id_conflicts_are_refused() {
        let mut p = provider();
        p.access.bind_user_id_to_subject = true;
        assert_eq!(
            fields(&memory_provider(&p)),
            ["spec.access.bindUserIdToSubject", "spec.access.bindUserIdToSubject", "spec.scope.userId"]
        );
    }

    #[test]
    fn bound_user_id_needs_service_accounts() {
        let mut p = provider();
        p.scope.user_id = None;
        p.access = AccessSpec {
            bearer_token: Some(BearerTokenAccess { secret_ref: SecretKeyRef { name: "tok".into(), key: "k".into() } }),
            bind_user_id_to_subject: true,
            ..AccessSpec::default()
        };
        let v = memory_provider(&p);
        assert_eq!(fields(&v), ["spec.access.bindUserIdToSubject"]);
        assert!(v[0].message.contains("serviceAccounts or spec.access.oidc"));
    }

    #[test]
    fn oidc_alone_opens_a_provider_and_can_bind_the_user_id() {
        let mut p = provider();
        p.scope.user_id = None;
        p.access = AccessSpec {
            oidc: Some(OidcAccess {
                issuer: "https://login.example.com".into(),
                allow_insecure_http: false,
                audiences: vec![],
                required_scopes: vec![],
                subject_claim: None,
                allowed_subjects: vec![],
                allowed_claim_values: None,
            }),
            bind_user_id_to_subject: true,
            ..AccessSpec::default()
        };
        assert!(memory_provider(&p).is_empty());
        if let Some(oidc) = p.access.oidc.as_mut() {
            oidc.issuer = "http://login.example.com".into();
        }
        assert_eq!(fields(&memory_provider(&p)), ["spec.access.oidc.issuer"]);
    }

    #[test]
    fn at_most_32_service_accounts() {
        let mut p = provider();
        let one = ServiceAccountRef { namespace: "agents".into(), name: None };
        p.access.service_accounts = Some(ServiceAccountAccess {
            audience: Some("memgate".into()),
            allowed: vec![one; 33],
            verification: Default::default(),
        });
        assert_eq!(fields(&memory_provider(&p)), ["spec.access.serviceAccounts.allowed"]);
    }

    #[test]
    fn service_account_access_is_checked() {
        let mut p = provider();
        p.access = AccessSpec {
            service_accounts: Some(ServiceAccountAccess {
                audience: Some(" ".into()),
                allowed: vec![],
                verification: Default::default(),
            }),
            ..AccessSpec::default()
        };
        assert_eq!(
            fields(&memory_provider(&p)),
            ["spec.access.serviceAccounts.audience", "spec.access.serviceAccounts.allowed"]
        );
        p.access.service_accounts = Some(ServiceAccountAccess {
            audience: Some("memgate".into()),
            allowed: vec![ServiceAccountRef { namespace: "Team.A".into(), name: None }],
            verification: Default::default(),
        });
        assert_eq!(fields(&memory_provider(&p)), ["spec.access.serviceAccounts.allowed[0].namespace"]);
    }

    #[test]
    fn bearer_token_ref_is_checked() {
        let mut p = provider();
        p.access = AccessSpec {
            bearer_token: Some(BearerTokenAccess { secret_ref: SecretKeyRef { name: "tok".into(), key: "".into() } }),
            ..AccessSpec::default()
        };
        assert_eq!(fields(&memory_provider(&p)), ["spec.access.bearerToken.secretRef.key"]);
    }

    #[test]
    fn scope_must_match_dialect_locations() {
        use IdLocation::*;
        let d = dialect(JsonFilters, JsonFilters, Omit);
        let view = DialectView { spec: &d, can_write: true };
        assert!(provider_against_dialect(&provider(), view).is_empty());

        let mut p = provider();
        p.scope.agent_id = None;
        p.scope.app_id = Some("shared".into());
        assert_eq!(fields(&provider_against_dialect(&p, view)), ["spec.scope.agentId", "spec.scope.appId"]);
    }

    #[test]
    fn bound_user_id_counts_as_configured() {
        use IdLocation::*;
        let d = dialect(JsonFilters, Omit, Omit);
        let mut p = provider();
        p.scope = Scope::default();
        p.access = AccessSpec { bind_user_id_to_subject: true, bearer_token: None, ..AccessSpec::default() };
        p.access.service_accounts = Some(ServiceAccountAccess {
            audience: Some("memgate".into()),
            allowed: vec![ServiceAccountRef { namespace: "agents".into(), name: None }],
            verification: Default::default(),
        });
        assert!(provider_against_dialect(&p, DialectView { spec: &d, can_write: false }).is_empty());
        let d = dialect(Omit, Omit, Json);
        p.scope.app_id = Some("x".into());
        assert_eq!(
            fields(&provider_against_dialect(&p, DialectView { spec: &d, can_write: false })),
            ["spec.access.bindUserIdToSubject"]
        );
    }

    #[test]
    fn ingest_needs_a_write_contract() {
        use IdLocation::*;
        let d = dialect(JsonFilters, JsonFilters, Omit);
        let mut p = provider();
        p.nexent.ingest = true;
        assert_eq!(
            fields(&provider_against_dialect(&p, DialectView { spec: &d, can_write: false })),
            ["spec.nexent.ingest"]
        );
    }
}
