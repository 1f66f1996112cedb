//! What `/mcp/{provider}` checks at HTTP level before the MCP transport sees a request: which
//! authority the request names, its `Origin`, and whether its body is JSON-RPC at all.
//!
//! Owns the DNS-rebinding rules and the parse-error answer; pure functions over the request head
//! and body, plus the fixed responses. Never looks at credentials or providers.
//!
//! - **Authority** (RFC 9112 §3.2 and §3.2.2): an absolute-form request target
//!   (`POST http://evil.example/mcp/p`) or an HTTP/2 `:authority` names the authority and the `Host`
//!   header is ignored; otherwise exactly one `Host` header names it. `Host` is `host[:port]` only
//!   (RFC 9110 §7.2): user info (`evil.example@localhost`, which a URI authority parser reads as
//!   host `localhost`) is refused. No `Host`, several, or a malformed one: 400. An authority outside
//!   the allowed hosts: 403.
//! - **Origin** (MCP Streamable HTTP transport, 2025-11-25, "Security Warning": servers MUST
//!   validate `Origin`, and when it is present and invalid MUST answer 403): any request carrying
//!   an `Origin` is refused with 403 unless that origin is configured (`--allowed-origin`, none by
//!   default; agents and Nexent send none). Origins compare as (scheme, host, port) with the
//!   scheme's default port filled in; `null` matches only a configured `null`. rmcp 3.11 skips this
//!   check unless told to (`StreamableHttpServerConfig::allowed_origins` empty and
//!   `enforce_origin_validation` unset: every `Origin` passes), so it is done here, and rmcp is
//!   configured to enforce it as well.
//! - **Body**: a POST with a JSON content type is read (at most [`super::MAX_REQUEST_BODY_BYTES`])
//!   and answered with a JSON-RPC error without id when it is not JSON (`-32700` parse error, HTTP
//!   400) or not a JSON-RPC message (`-32600` invalid request, HTTP 400), where rmcp answers 415
//!   with its deserializer's message.

use axum::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, uri::Authority};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Why a request was refused before the MCP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No usable authority (no `Host`, several, malformed, or with user info): 400.
    BadHost,
    /// The authority is not an allowed host: 403.
    HostNotAllowed,
    /// An `Origin` that is not configured: 403.
    OriginNotAllowed,
    /// The body is not JSON: 400, JSON-RPC `-32700`.
    ParseError,
    /// The body is JSON but not a JSON-RPC message: 400, JSON-RPC `-32600`.
    InvalidRequest,
    /// The body is larger than allowed: 413.
    TooLarge,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Refusal::BadHost => (StatusCode::BAD_REQUEST, -32600, "Bad Request: invalid or missing Host"),
            Refusal::HostNotAllowed => (StatusCode::FORBIDDEN, -32600, "Forbidden: Host is not allowed"),
            Refusal::OriginNotAllowed => (StatusCode::FORBIDDEN, -32600, "Forbidden: Origin is not allowed"),
            Refusal::ParseError => (StatusCode::BAD_REQUEST, -32700, "Parse error"),
            Refusal::InvalidRequest => (StatusCode::BAD_REQUEST, -32600, "Invalid Request"),
            Refusal::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, -32600, "Request body too large"),
        };
        let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
        (status, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], body.to_string()).into_response()
    }
}

/// A host (lower case, IPv6 without brackets) and an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostPort {
    host: String,
    port: Option<u16>,
}

fn host_port(authority: &Authority) -> HostPort {
    HostPort { host: bare_host(authority.host()).to_ascii_lowercase(), port: authority.port_u16() }
}

/// A host without the brackets of an IPv6 literal.
fn bare_host(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// `host[:port]` with nothing else (no user info, no empty host).
fn parse_authority(raw: &str) -> Option<Authority> {
    if raw.is_empty() || raw.contains('@') {
        return None;
    }
    Authority::try_from(raw).ok().filter(|authority| !authority.host().is_empty())
}

/// The authority a request names: the request target's (absolute form, HTTP/2 `:authority`), else
/// its one `Host` header.
fn request_authority(uri: &Uri, headers: &HeaderMap) -> Result<Authority, Refusal> {
    if let Some(authority) = uri.authority() {
        return parse_authority(authority.as_str()).ok_or(Refusal::BadHost);
    }
    let mut hosts = headers.get_all(HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return Err(Refusal::BadHost);
    };
    host.to_str().ok().and_then(parse_authority).ok_or(Refusal::BadHost)
}

/// Whether `authority` matches an allowed entry (`name` matches any port, `name:port` only that
/// port); hosts compare without regard to ASCII case.
fn host_allowed(authority: &Authority, allowed: &[HostPort]) -> bool {
    let host = bare_host(authority.host());
    let port = authority.port_u16();
    allowed.iter().any(|entry| entry.host.eq_ignore_ascii_case(host) && entry.port.is_none_or(|p| port == Some(p)))
}

/// An allowed-host entry: `host[:port]`, or an IPv6 address without brackets (`::1`, one of the
/// loopback defaults), which matches that address on any port as rmcp 3.11 reads such an entry
/// (`parse_allowed_authority` in `transport/streamable_http_server/tower.rs` takes an entry that is
/// no authority as a bare host).
fn allowed_host(entry: &str) -> Option<HostPort> {
    if let Ok(address) = entry.parse::<std::net::Ipv6Addr>() {
        return Some(HostPort { host: address.to_string(), port: None });
    }
    parse_authority(entry).map(|authority| host_port(&authority))
}

/// The allowed hosts and origins, parsed once for every request they judge (an entry that does
/// not parse matches nothing).
#[derive(Debug, Clone, Default)]
pub struct HeadRules {
    hosts: Vec<HostPort>,
    origins: Vec<OriginTuple>,
}

impl HeadRules {
    /// Rules accepting the authorities `allowed_hosts` and the origins `allowed_origins`.
    pub fn new(allowed_hosts: &[String], allowed_origins: &[String]) -> HeadRules {
        HeadRules {
            hosts: allowed_hosts.iter().filter_map(|entry| allowed_host(entry.trim())).collect(),
            origins: allowed_origins.iter().filter_map(|entry| parse_origin(entry)).collect(),
        }
    }
}

/// An origin as (scheme, host, port) with the scheme's default port, or `null`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum OriginTuple {
    Null,
    Tuple(String, String, Option<u16>),
}

fn parse_origin(raw: &str) -> Option<OriginTuple> {
    let raw = raw.trim();
    if raw == "null" {
        return Some(OriginTuple::Null);
    }
    let uri = Uri::try_from(raw).ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    // A serialized origin has no path, query or user info.
    if authority.as_str().contains('@') || !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return None;
    }
    let HostPort { host, port } = host_port(authority);
    let default_port = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Some(OriginTuple::Tuple(scheme, host, port.or(default_port)))
}

/// Check a request's authority and its `Origin` against `rules`.
pub fn check_head(uri: &Uri, headers: &HeaderMap, rules: &HeadRules) -> Result<(), Refusal> {
    let authority = request_authority(uri, headers)?;
    if !host_allowed(&authority, &rules.hosts) {
        return Err(Refusal::HostNotAllowed);
    }
    let mut origins = headers.get_all(ORIGIN).iter();
    if let Some(first) = origins.next() {
        if origins.next().is_some() {
            return Err(Refusal::OriginNotAllowed);
        }
        let origin = first.to_str().ok().and_then(parse_origin).ok_or(Refusal::OriginNotAllowed)?;
        if !rules.origins.contains(&origin) {
            return Err(Refusal::OriginNotAllowed);
        }
    }
    Ok(())
}

/// Whether the request declares a JSON body (`application/json`, any parameters).
pub fn has_json_content_type(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|value| {
        value.split(';').next().is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
    })
}

/// The one JSON-RPC message in `body`, as the MCP transport reads it.
pub fn check_body(body: &[u8]) -> Result<rmcp::model::ClientJsonRpcMessage, Refusal> {
    // The message parse first: a body that is a JSON-RPC message is JSON, so only a refused one is
    // parsed a second time, to tell "not JSON" from "not JSON-RPC" (one parse fewer per call).
    if let Ok(message) = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(body) {
        return Ok(message);
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
        return Err(Refusal::ParseError);
    }
    Err(Refusal::InvalidRequest)
}

/// Whether `origin` is a usable `--allowed-origin` value (`scheme://host[:port]` or `null`).
pub fn valid_origin_entry(origin: &str) -> bool {
    parse_origin(origin).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(target: &str, headers: &[(&str, &str)]) -> (Uri, HeaderMap) {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        (Uri::try_from(target).expect("uri"), map)
    }

    fn check(target: &str, headers: &[(&str, &str)], origins: &[&str]) -> Result<(), Refusal> {
        let (uri, map) = head(target, headers);
        let hosts = ["localhost".to_string(), "gw.agents.svc:8080".to_string()];
        let origins: Vec<String> = origins.iter().map(ToString::to_string).collect();
        check_head(&uri, &map, &HeadRules::new(&hosts, &origins))
    }

    #[test]
    fn host_header_names_the_authority_for_origin_form_targets() {
        assert_eq!(check("/mcp/p", &[("host", "localhost")], &[]), Ok(()));
        assert_eq!(check("/mcp/p", &[("host", "LOCALHOST:9000")], &[]), Ok(()));
        assert_eq!(check("/mcp/p", &[("host", "gw.agents.svc:8080")], &[]), Ok(()));
        assert_eq!(check("/mcp/p", &[("host", "gw.agents.svc:9090")], &[]), Err(Refusal::HostNotAllowed));
        assert_eq!(check("/mcp/p", &[("host", "evil.example")], &[]), Err(Refusal::HostNotAllowed));
    }

    /// The loopback defaults accept every loopback form a local client sends, IPv6 included; an
    /// entry that is no host matches nothing.
    #[test]
    fn the_loopback_defaults_accept_ipv6_loopback_and_a_broken_entry_matches_nothing() {
        let hosts: Vec<String> = crate::mcp::DEFAULT_ALLOWED_HOSTS.iter().map(ToString::to_string).collect();
        let rules = HeadRules::new(&hosts, &[]);
        for host in ["[::1]", "[::1]:8080", "127.0.0.1:9", "LocalHost"] {
            let (uri, map) = head("/mcp/p", &[("host", host)]);
            assert_eq!(check_head(&uri, &map, &rules), Ok(()), "{host}");
        }
        let (uri, map) = head("/mcp/p", &[("host", "[::2]")]);
        assert_eq!(check_head(&uri, &map, &rules), Err(Refusal::HostNotAllowed));
        let broken = HeadRules::new(&["a@b".to_string(), String::new()], &[]);
        for host in ["a", "b", "a@b"] {
            let (uri, map) = head("/mcp/p", &[("host", host)]);
            assert!(check_head(&uri, &map, &broken).is_err(), "{host}");
        }
    }

    #[test]
    fn user_info_missing_or_repeated_hosts_are_bad_requests() {
        assert_eq!(check("/mcp/p", &[("host", "evil.example@localhost")], &[]), Err(Refusal::BadHost));
        assert_eq!(check("/mcp/p", &[], &[]), Err(Refusal::BadHost));
        assert_eq!(check("/mcp/p", &[("host", "localhost"), ("host", "localhost")], &[]), Err(Refusal::BadHost));
        assert_eq!(check("/mcp/p", &[("host", "")], &[]), Err(Refusal::BadHost));
        assert_eq!(check("/mcp/p", &[("host", "local host")], &[]), Err(Refusal::BadHost));
    }

    /// RFC 9112 §3.2.2: with an absolute-form target the target's authority wins over `Host`.
    #[test]
    fn the_absolute_form_targets_authority_wins_over_host() {
        assert_eq!(check("http://evil.example/mcp/p", &[("host", "localhost")], &[]), Err(Refusal::HostNotAllowed));
        assert_eq!(check("http://localhost/mcp/p", &[("host", "evil.example")], &[]), Ok(()));
        assert_eq!(check("http://evil.example@localhost/mcp/p", &[("host", "localhost")], &[]), Err(Refusal::BadHost));
    }

    #[test]
    fn any_origin_is_refused_unless_configured() {
        let local = [("host", "localhost")];
        let with = |origin: &'static str| [("host", "localhost"), ("origin", origin)];
        assert_eq!(check("/mcp/p", &local, &[]), Ok(()), "no Origin: not a browser");
        assert_eq!(check("/mcp/p", &with("http://evil.example"), &[]), Err(Refusal::OriginNotAllowed));
        assert_eq!(check("/mcp/p", &with("http://localhost"), &[]), Err(Refusal::OriginNotAllowed));
        assert_eq!(check("/mcp/p", &with("null"), &[]), Err(Refusal::OriginNotAllowed));
        let allowed = ["https://app.example", "http://localhost:3000"];
        assert_eq!(check("/mcp/p", &with("https://app.example"), &allowed), Ok(()));
        assert_eq!(check("/mcp/p", &with("https://APP.example:443"), &allowed), Ok(()));
        assert_eq!(check("/mcp/p", &with("https://app.example:8443"), &allowed), Err(Refusal::OriginNotAllowed));
        assert_eq!(check("/mcp/p", &with("http://app.example"), &allowed), Err(Refusal::OriginNotAllowed));
        assert_eq!(check("/mcp/p", &with("http://localhost:3000"), &allowed), Ok(()));
        assert_eq!(check("/mcp/p", &with("http://localhost:3001"), &allowed), Err(Refusal::OriginNotAllowed));
        assert_eq!(check("/mcp/p", &with("not an origin"), &allowed), Err(Refusal::OriginNotAllowed));
        assert_eq!(check("/mcp/p", &with("null"), &["null"]), Ok(()));
    }

    #[test]
    fn bodies_must_be_json_rpc() {
        assert!(check_body(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_ok());
        assert_eq!(check_body(b"{not json").err(), Some(Refusal::ParseError));
        assert_eq!(check_body(b"").err(), Some(Refusal::ParseError));
        assert_eq!(check_body(br#"{"hello":"world"}"#).err(), Some(Refusal::InvalidRequest));
        assert!(valid_origin_entry("https://app.example:8443") && valid_origin_entry("null"));
        assert!(!valid_origin_entry("app.example") && !valid_origin_entry("https://app.example/path"));
    }

    #[test]
    fn refusals_are_json_rpc_errors_without_id() {
        let response = Refusal::ParseError.into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()), Some("application/json"));
    }
}
