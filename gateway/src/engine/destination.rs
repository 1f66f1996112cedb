//! The destination guard of every outgoing connection: names are resolved by the system resolver
//! and each address is judged with `memgate_crds::validation::destination`; a name whose every
//! address is refused fails before any connection is made, and refused addresses are never tried.
//! Addresses written into a URL skip the resolver, so [`refused_url`] judges those (and refused
//! names) before a request is sent.
//!
//! Owns the decision at connect time only; which hosts a config may name is validation's.

use std::net::SocketAddr;
use std::sync::Arc;

use memgate_crds::validation::destination::{Placement, refused_address, refused_host};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A resolver that drops refused addresses.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    placement: Placement,
}

impl GuardedResolver {
    /// A resolver for a process running at `placement`.
    pub fn new(placement: Placement) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver { placement })
    }
}

/// Every address of a name was refused (the message is fixed: no name, no address).
#[derive(Debug, thiserror::Error)]
#[error("every address of the upstream name is a refused destination")]
pub struct RefusedDestination;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let placement = self.placement;
        Box::pin(async move {
            let allowed = allowed_addresses(name.as_str(), 0, placement).await?;
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The addresses of `name` (with `port`) that `placement` allows, in the resolver's order; an
/// error when it does not resolve or every address is refused (each refusal is logged, without
/// the name or the address).
pub async fn allowed_addresses(
    name: &str,
    port: u16,
    placement: Placement,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    let resolved = tokio::net::lookup_host((name, port)).await?;
    let allowed: Vec<SocketAddr> = resolved
        .filter(|address| match refused_address(address.ip(), placement) {
            Some(why) => {
                tracing::warn!(reason = why, "upstream address refused at connect time");
                false
            }
            None => true,
        })
        .collect();
    if allowed.is_empty() {
        return Err(Box::new(RefusedDestination));
    }
    Ok(allowed)
}

/// Why the host written in `url` is refused at `placement`, if it is.
pub fn refused_url(url: &url::Url, placement: Placement) -> Option<&'static str> {
    refused_host(&url.host()?, placement)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_whose_addresses_are_all_refused_fails_to_resolve() {
        // `localhost` resolves to loopback through the system resolver: allowed on a person's
        // machine, refused in a cluster.
        let standalone = GuardedResolver::new(Placement::Standalone);
        let name: Name = "localhost".parse().expect("a name");
        assert!(standalone.resolve(name).await.is_ok_and(|mut addrs| addrs.next().is_some()));
        let cluster = GuardedResolver::new(Placement::Cluster);
        let name: Name = "localhost".parse().expect("a name");
        assert!(cluster.resolve(name).await.is_err());
    }

    #[test]
    fn addresses_written_in_the_url_are_judged_before_sending() {
        let url = url::Url::parse("http://169.254.169.254/latest/meta-data").expect("url");
        assert!(refused_url(&url, Placement::Standalone).is_some());
        let local = url::Url::parse("http://127.0.0.1:18888/search").expect("url");
        assert!(refused_url(&local, Placement::Standalone).is_none());
        assert!(refused_url(&local, Placement::Cluster).is_some());
    }
}
