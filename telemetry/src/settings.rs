//! Whether and where to export traces, decided from the standard `OTEL_*` environment variables.
//!
//! Pure: reads variables through a lookup function and returns a decision; performs no I/O and
//! builds nothing. Error messages name the variable and the rule, never its value (an endpoint
//! may carry user info, and headers carry tokens).
//!
//! | variable | effect |
//! |---|---|
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | full URL spans are posted to (used as is) |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | base URL; `/v1/traces` is appended (when the above is unset) |
//! | `OTEL_SDK_DISABLED=true` | no export, whatever else is set |
//! | `OTEL_TRACES_EXPORTER` | unset or `otlp`: export; `none`: no export; anything else is refused |
//! | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, `OTEL_EXPORTER_OTLP_PROTOCOL` | unset or `http/protobuf`; anything else is refused |
//!
//! With neither endpoint variable set (or both empty) nothing is exported: the default.

/// The signal-specific endpoint variable.
pub const TRACES_ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The generic endpoint variable.
pub const ENDPOINT_VAR: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The only protocol memgate exports with.
pub const HTTP_PROTOBUF: &str = "http/protobuf";

/// Where spans go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSettings {
    /// The URL spans are posted to (`…/v1/traces` for the generic variable).
    pub traces_endpoint: String,
}

/// Why the variables ask for an export memgate cannot do; the process runs without export.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// An endpoint variable that is not an absolute `http`/`https` URL without user info.
    #[error("{0} must be an absolute http:// or https:// URL without user info; traces are not exported")]
    Endpoint(&'static str),
    /// A protocol other than `http/protobuf`.
    #[error("{0}: only http/protobuf is supported (use the OTLP/HTTP port, usually 4318); traces are not exported")]
    Protocol(&'static str),
    /// An exporter other than `otlp` or `none`.
    #[error("OTEL_TRACES_EXPORTER: only otlp and none are supported; traces are not exported")]
    Exporter,
}

/// Decide from the variables `lookup` returns. `Ok(None)`: export is off (not asked for, or
/// disabled); `Ok(Some(_))`: export there; `Err(_)`: asked for but unusable.
pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<ExportSettings>, SettingsError> {
    let value = |name: &str| lookup(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if value("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    match value("OTEL_TRACES_EXPORTER").map(|v| v.to_ascii_lowercase()).as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(None),
        Some(_) => return Err(SettingsError::Exporter),
    }
    let endpoint = match (value(TRACES_ENDPOINT_VAR), value(ENDPOINT_VAR)) {
        (Some(full), _) => checked(TRACES_ENDPOINT_VAR, full)?,
        (None, Some(base)) => {
            let base = checked(ENDPOINT_VAR, base)?;
            format!("{}/v1/traces", base.trim_end_matches('/'))
        }
        (None, None) => return Ok(None),
    };
    for name in ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"] {
        match value(name) {
            None => continue,
            Some(protocol) if protocol == HTTP_PROTOBUF => break,
            Some(_) => return Err(SettingsError::Protocol(protocol_var(name))),
        }
    }
    Ok(Some(ExportSettings { traces_endpoint: endpoint }))
}

fn protocol_var(name: &str) -> &'static str {
    if name == "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    } else {
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    }
}

/// `value` when it is an absolute `http`/`https` URL with a host and no user info.
fn checked(variable: &'static str, value: String) -> Result<String, SettingsError> {
    let uri: http::Uri = value.parse().map_err(|_| SettingsError::Endpoint(variable))?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let authority_ok = uri.authority().is_some_and(|a| !a.host().is_empty() && !a.as_str().contains('@'));
    if scheme_ok && authority_ok { Ok(value) } else { Err(SettingsError::Endpoint(variable)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(vars: &[(&str, &str)]) -> Result<Option<ExportSettings>, SettingsError> {
        from_lookup(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_string()))
    }

    fn exported_to(endpoint: &str) -> Result<Option<ExportSettings>, SettingsError> {
        Ok(Some(ExportSettings { traces_endpoint: endpoint.to_string() }))
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(decide(&[]), Ok(None));
        assert_eq!(decide(&[(ENDPOINT_VAR, "  ")]), Ok(None));
        assert_eq!(decide(&[("OTEL_SERVICE_NAME", "x")]), Ok(None));
    }

    #[test]
    fn the_generic_endpoint_gets_the_traces_path() {
        assert_eq!(decide(&[(ENDPOINT_VAR, "http://collector:4318")]), exported_to("http://collector:4318/v1/traces"));
        assert_eq!(decide(&[(ENDPOINT_VAR, "http://collector:4318/")]), exported_to("http://collector:4318/v1/traces"));
        assert_eq!(
            decide(&[(ENDPOINT_VAR, "https://c.example/otlp")]),
            exported_to("https://c.example/otlp/v1/traces")
        );
    }

    #[test]
    fn the_traces_endpoint_is_used_as_is_and_wins() {
        let vars = [(TRACES_ENDPOINT_VAR, "http://a:4318/custom"), (ENDPOINT_VAR, "http://b:4318")];
        assert_eq!(decide(&vars), exported_to("http://a:4318/custom"));
    }

    #[test]
    fn disabling_variables_switch_export_off() {
        assert_eq!(decide(&[(ENDPOINT_VAR, "http://c:4318"), ("OTEL_SDK_DISABLED", "TRUE")]), Ok(None));
        assert_eq!(decide(&[(ENDPOINT_VAR, "http://c:4318"), ("OTEL_TRACES_EXPORTER", "none")]), Ok(None));
        assert_eq!(
            decide(&[(ENDPOINT_VAR, "http://c:4318"), ("OTEL_SDK_DISABLED", "false")]),
            exported_to("http://c:4318/v1/traces")
        );
    }

    #[test]
    fn unsupported_protocols_and_exporters_are_refused() {
        let grpc = [(ENDPOINT_VAR, "http://c:4317"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")];
        assert_eq!(decide(&grpc), Err(SettingsError::Protocol("OTEL_EXPORTER_OTLP_PROTOCOL")));
        let json = [(ENDPOINT_VAR, "http://c:4318"), ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")];
        assert_eq!(decide(&json), Err(SettingsError::Protocol("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")));
        // The signal-specific protocol wins over the generic one.
        let both = [
            (ENDPOINT_VAR, "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert_eq!(decide(&both), exported_to("http://c:4318/v1/traces"));
        assert_eq!(
            decide(&[(ENDPOINT_VAR, "http://c:4318"), ("OTEL_TRACES_EXPORTER", "zipkin")]),
            Err(SettingsError::Exporter)
        );
    }

    #[test]
    fn malformed_endpoints_are_refused_without_echoing_them() {
        for bad in ["collector:4318", "ftp://c:21", "http://user:SECRET-PW@c:4318", "/v1/traces", "http://"] {
            let err = decide(&[(ENDPOINT_VAR, bad)]).expect_err(bad);
            assert_eq!(err, SettingsError::Endpoint(ENDPOINT_VAR), "{bad}");
            assert!(!err.to_string().contains("SECRET-PW"), "{err}");
        }
    }
}
