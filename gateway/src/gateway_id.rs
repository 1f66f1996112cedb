//! Which gateway this process is: `<namespace>/<name>` of the gateway the operator runs
//! (`--gateway-id`). Shared state is keyed by it (the Redis ledger's key prefix, so that a Redis
//! ACL user per gateway confines it to its own records) and audit events name it.

use std::fmt;

use memgate_crds::validation::names::{is_dns_label, is_dns_subdomain};

/// `<namespace>/<name>` of a gateway.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GatewayId {
    /// The gateway's namespace.
    pub namespace: String,
    /// The gateway's name.
    pub name: String,
}

impl GatewayId {
    /// Parse `<namespace>/<name>` (a namespace name and an object name).
    pub fn parse(raw: &str) -> Result<GatewayId, String> {
        let (namespace, name) = raw.split_once('/').ok_or_else(|| "must be <namespace>/<name>".to_string())?;
        if !is_dns_label(namespace) || !is_dns_subdomain(name) {
            return Err("must be <namespace>/<name>, a namespace name and an object name".into());
        }
        Ok(GatewayId { namespace: namespace.into(), name: name.into() })
    }

    /// The prefix of this gateway's keys in shared Redis state: `memgate:<namespace>/<name>:`.
    pub fn redis_prefix(&self) -> String {
        format!("memgate:{self}:")
    }
}

impl fmt::Display for GatewayId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_id_is_a_namespace_and_a_name() {
        let id = GatewayId::parse("agents/memgate-gateway").expect("valid");
        assert_eq!(id.redis_prefix(), "memgate:agents/memgate-gateway:");
        for bad in ["agents", "Agents/x", "a/b/c", "/x", "a/", "a*/x", "a/x*"] {
            assert!(GatewayId::parse(bad).is_err(), "{bad}");
        }
    }
}
