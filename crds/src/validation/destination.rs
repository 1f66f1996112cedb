//! Where memgate may send a request: the hosts an upstream origin or an OIDC issuer may name, and
//! the addresses a connection may reach.
//!
//! Never a link-local address (`169.254.0.0/16`, `fe80::/10`: cloud metadata services answer
//! there) or another known cloud-metadata name or address, wherever memgate runs. In a cluster
//! ([`Placement::Cluster`]) never loopback either (that is the gateway pod itself) nor the
//! cluster's own API server by its Service names. An administrator narrows further with
//! [`AllowedDestinations`] (host patterns and CIDRs). Pure: the gateway's connector applies
//! [`refused_address`] to every address a name resolves to, so a name pointing at a refused
//! address is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::Host;

use super::Violation;
use crate::MemoryProviderSpec;

/// Where the process that sends requests runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A person's machine (the quickstart): loopback is where the dev upstream runs.
    Standalone,
    /// A Kubernetes pod: loopback and the API server are refused too.
    Cluster,
}

/// Host names of cloud metadata services (GCP, AWS, Azure, Tencent, generic short names).
const METADATA_NAMES: [&str; 7] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.internal",
    "metadata.tencentyun.com",
];

/// Names of the cluster's own API server.
const API_SERVER_NAMES: [&str; 4] =
    ["kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"];

/// Why an address is refused, or `None` when it may be reached.
pub fn refused_address(ip: IpAddr, placement: Placement) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4, placement),
        IpAddr::V6(v6) => {
            // An IPv4 address written as IPv6 (mapped, or through NAT64) is judged as IPv4.
            if let Some(v4) = v6.to_ipv4_mapped().or_else(|| nat64(v6)) {
                return refused_v4(v4, placement);
            }
            if v6 == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
                return Some("a cloud metadata address");
            }
            if v6.segments()[0] & 0xffc0 == 0xfe80 {
                return Some("a link-local address (cloud metadata services answer there)");
            }
            if v6.is_unspecified() {
                return Some("the unspecified address (it reaches the local host)");
            }
            if v6.is_loopback() && placement == Placement::Cluster {
                return Some("loopback (in a cluster, that is the gateway pod itself)");
            }
            None
        }
    }
}

fn refused_v4(v4: Ipv4Addr, placement: Placement) -> Option<&'static str> {
    if v4.is_link_local() {
        return Some("a link-local address (cloud metadata services answer there)");
    }
    // Alibaba Cloud's metadata service; Azure's WireServer.
    if v4 == Ipv4Addr::new(100, 100, 100, 200) || v4 == Ipv4Addr::new(168, 63, 129, 16) {
        return Some("a cloud metadata address");
    }
    if v4.octets()[0] == 0 {
        return Some("the unspecified address (it reaches the local host)");
    }
    if v4.is_loopback() && placement == Placement::Cluster {
        return Some("loopback (in a cluster, that is the gateway pod itself)");
    }
    None
}

/// The IPv4 address inside a NAT64 address (`64:ff9b::/96`).
fn nat64(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0])
        .then(|| Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8))
}

/// Why a host (a name or an address, as in a URL) is refused, or `None`.
pub fn refused_host(host: &Host<&str>, placement: Placement) -> Option<&'static str> {
    match host {
        Host::Ipv4(v4) => refused_address(IpAddr::V4(*v4), placement),
        Host::Ipv6(v6) => refused_address(IpAddr::V6(*v6), placement),
        Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if METADATA_NAMES.contains(&name.as_str()) {
                return Some("a cloud metadata service name");
            }
            if placement == Placement::Cluster {
                if name == "localhost" || name.ends_with(".localhost") {
                    return Some("loopback (in a cluster, that is the gateway pod itself)");
                }
                if API_SERVER_NAMES.contains(&name.as_str()) {
                    return Some("the cluster's own API server");
                }
            }
            None
        }
    }
}

/// The host of an http(s) URL, when it parses.
fn url_host(url: &str) -> Option<Host<String>> {
    url::Url::parse(url).ok()?.host().map(|h| h.to_owned())
}

fn borrowed(host: &Host<String>) -> Host<&str> {
    match host {
        Host::Domain(d) => Host::Domain(d.as_str()),
        Host::Ipv4(v4) => Host::Ipv4(*v4),
        Host::Ipv6(v6) => Host::Ipv6(*v6),
    }
}

/// The destinations a provider names, with the field naming each: its origin and, with OIDC
/// access, its issuer.
fn destinations(spec: &MemoryProviderSpec) -> Vec<(&'static str, &str)> {
    let mut found = vec![("spec.endpoint.origin", spec.endpoint.origin.as_str())];
    if let Some(oidc) = &spec.access.oidc {
        found.push(("spec.access.oidc.issuer", oidc.issuer.as_str()));
    }
    found
}

/// Every destination of `spec` that `placement` refuses, naming the field.
pub fn provider_destinations(spec: &MemoryProviderSpec, placement: Placement) -> Vec<Violation> {
    destinations(spec)
        .into_iter()
        .filter_map(|(field, url)| {
            let host = url_host(url)?;
            let why = refused_host(&borrowed(&host), placement)?;
            Some(Violation::new(field, format!("must not name {why}: memgate never sends requests there")))
        })
        .collect()
}

/// An administrator's allow-list of destinations: host names (`mem0.example.com`), name suffixes
/// (`*.example.com`: any name below it) and networks (`10.0.0.0/8`, `fd00::/8`) for hosts written as
/// addresses. A name matches only name entries, an address only networks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedDestinations {
    names: Vec<String>,
    suffixes: Vec<String>,
    networks: Vec<(IpAddr, u8)>,
}

impl AllowedDestinations {
    /// Parse entries; the error is the first entry that is none of the three shapes.
    pub fn parse<'a>(entries: impl IntoIterator<Item = &'a str>) -> Result<AllowedDestinations, String> {
        let mut allowed = AllowedDestinations::default();
        for raw in entries {
            let entry = raw.trim().trim_end_matches('.').to_ascii_lowercase();
            if let Some((address, bits)) = entry.split_once('/') {
                let address: IpAddr = address.parse().map_err(|_| raw.to_string())?;
                let max = if address.is_ipv4() { 32 } else { 128 };
                let bits: u8 = bits.parse().ok().filter(|b| *b <= max).ok_or_else(|| raw.to_string())?;
                allowed.networks.push((address, bits));
            } else if let Some(suffix) = entry.strip_prefix("*.") {
                if !super::names::is_dns_subdomain(suffix) {
                    return Err(raw.to_string());
                }
                allowed.suffixes.push(format!(".{suffix}"));
            } else if let Ok(address) = entry.parse::<IpAddr>() {
                allowed.networks.push((address, if address.is_ipv4() { 32 } else { 128 }));
            } else if super::names::is_dns_subdomain(&entry) {
                allowed.names.push(entry);
            } else {
                return Err(raw.to_string());
            }
        }
        Ok(allowed)
    }

    /// True when nothing is listed (no restriction).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.suffixes.is_empty() && self.networks.is_empty()
    }

    /// True when `host` is on the list.
    pub fn allows(&self, host: &Host<&str>) -> bool {
        match host {
            Host::Domain(name) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                self.names.contains(&name) || self.suffixes.iter().any(|s| name.ends_with(s.as_str()))
            }
            Host::Ipv4(v4) => self.networks.iter().any(|n| in_network(IpAddr::V4(*v4), *n)),
            Host::Ipv6(v6) => self.networks.iter().any(|n| in_network(IpAddr::V6(*v6), *n)),
        }
    }

    /// Every destination of `spec` outside a non-empty list, naming the field.
    pub fn outside(&self, spec: &MemoryProviderSpec) -> Vec<Violation> {
        if self.is_empty() {
            return Vec::new();
        }
        destinations(spec)
            .into_iter()
            .filter(|(_, url)| url_host(url).is_none_or(|host| !self.allows(&borrowed(&host))))
            .map(|(field, _)| {
                Violation::new(
                    field,
                    "is outside the destinations the platform team allows (the operator's allowedOrigins, --allowed-upstream-origin)",
                )
            })
            .collect()
    }
}

fn in_network(ip: IpAddr, (network, bits): (IpAddr, u8)) -> bool {
    match (ip, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(text: &str) -> Host<String> {
        url_host(&format!("https://{text}")).expect("a host")
    }

    fn refused(text: &str, placement: Placement) -> Option<&'static str> {
        refused_host(&borrowed(&host(text)), placement)
    }

    #[test]
    fn metadata_services_are_refused_everywhere_by_name_and_address() {
        for bad in [
            "169.254.169.254",
            "169.254.0.23",
            "[fd00:ec2::254]",
            "[fe80::1]",
            "[::ffff:169.254.169.254]",
            "[64:ff9b::a9fe:a9fe]",
            "100.100.100.200",
            "168.63.129.16",
            "metadata.google.internal",
            "Metadata.Google.Internal.",
            "metadata.goog",
            "metadata",
            "0.0.0.0",
            "[::]",
        ] {
            assert!(refused(bad, Placement::Standalone).is_some(), "{bad}");
            assert!(refused(bad, Placement::Cluster).is_some(), "{bad}");
        }
    }

    #[test]
    fn loopback_and_the_api_server_are_refused_only_in_a_cluster() {
        for local in ["127.0.0.1", "127.1.2.3", "[::1]", "localhost", "api.localhost", "kubernetes.default.svc"] {
            assert!(refused(local, Placement::Standalone).is_none(), "{local}");
            assert!(refused(local, Placement::Cluster).is_some(), "{local}");
        }
        for fine in ["mem0.memory.svc", "10.0.0.5", "[fd12::5]", "memory.example.com", "metadata.example.com"] {
            assert!(refused(fine, Placement::Cluster).is_none(), "{fine}");
        }
    }

    fn spec(origin: &str, issuer: Option<&str>) -> MemoryProviderSpec {
        let mut access = serde_json::json!({"anonymous": true});
        if let Some(issuer) = issuer {
            access = serde_json::json!({"oidc": {"issuer": issuer}});
        }
        serde_json::from_value(serde_json::json!({
            "dialect": {"builtin": "mem0-oss-rest-2026-08"},
            "endpoint": {"origin": origin, "allowInsecureHttp": true},
            "credentials": {"secretRef": {"name": "s", "key": "k"}},
            "access": access,
        }))
        .expect("spec")
    }

    #[test]
    fn a_provider_names_the_field_of_each_refused_destination() {
        let found = provider_destinations(
            &spec("http://169.254.169.254", Some("https://metadata.google.internal")),
            Placement::Standalone,
        );
        let fields: Vec<&str> = found.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(fields, ["spec.endpoint.origin", "spec.access.oidc.issuer"]);
        assert!(found[0].message.contains("link-local"), "{}", found[0]);
        assert!(provider_destinations(&spec("http://127.0.0.1:18888", None), Placement::Standalone).is_empty());
        assert_eq!(provider_destinations(&spec("http://127.0.0.1:18888", None), Placement::Cluster).len(), 1);
    }

    #[test]
    fn the_allow_list_admits_names_suffixes_and_networks() {
        let allowed =
            AllowedDestinations::parse(["mem0.example.com", "*.memory.svc", "10.0.0.0/8", "fd00::/8"]).expect("valid");
        for ok in
            ["mem0.example.com", "MEM0.example.com.", "mem0.memory.svc", "a.b.memory.svc", "10.1.2.3", "[fd00::1]"]
        {
            assert!(allowed.allows(&borrowed(&host(ok))), "{ok}");
        }
        for no in ["example.com", "memory.svc", "evil-memory.svc", "11.0.0.1", "[fe00::1]", "x.mem0.example.com"] {
            assert!(!allowed.allows(&borrowed(&host(no))), "{no}");
        }
        let outside = allowed.outside(&spec("https://mem0.example.com", Some("https://login.example.org")));
        assert_eq!(outside.len(), 1);
        assert_eq!(outside[0].field, "spec.access.oidc.issuer");
        assert!(AllowedDestinations::default().outside(&spec("https://anything.example", None)).is_empty());
        for bad in ["10.0.0.0/33", "not a host", "*.", "a/b", "http://x"] {
            assert_eq!(AllowedDestinations::parse([bad]), Err(bad.to_string()), "{bad}");
        }
    }
}
