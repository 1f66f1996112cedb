//! Leader election settings: which Lease, who holds it, how long it stays valid.

use std::time::Duration;

use clap::Args;
use memgate_crds::validation::names::{is_dns_label, is_dns_subdomain};

use super::{SettingsError, bad};

/// Flags of leader election.
#[derive(Args, Debug, Clone)]
pub struct LeaderArgs {
    /// Elect a leader on a Lease so that several operator replicas never reconcile at once.
    #[arg(long, env = "MEMGATE_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the Lease (normally the operator's own, from the downward API).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// Name of the Lease.
    #[arg(long, env = "MEMGATE_LEADER_ELECTION_LEASE", default_value = "memgate-operator")]
    pub leader_election_lease: String,
    /// Seconds a leader's Lease stays valid without renewal: the longest a takeover waits.
    #[arg(long, env = "MEMGATE_LEASE_DURATION_SECONDS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=300))]
    pub lease_duration_seconds: u64,
    /// Seconds before expiry at which the leader renews its Lease.
    #[arg(long, env = "MEMGATE_LEASE_GRACE_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=299))]
    pub lease_grace_seconds: u64,
    /// This process's identity in the Lease (default: `$POD_NAME`, else host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
}

/// Lease settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub lease: String,
    /// Holder identity.
    pub identity: String,
    /// Lease validity without renewal.
    pub duration: Duration,
    /// Renew this long before expiry.
    pub grace: Duration,
}

impl LeaderArgs {
    /// `None` without leader election (one replica only).
    pub fn settings(self) -> Result<Option<LeaderSettings>, SettingsError> {
        if !self.leader_election {
            return Ok(None);
        }
        if !is_dns_label(&self.leader_election_namespace) {
            return Err(bad("leader-election-namespace", "must be a namespace name"));
        }
        if !is_dns_subdomain(&self.leader_election_lease) {
            return Err(bad("leader-election-lease", "must be a Lease name (lower-case DNS subdomain)"));
        }
        if self.lease_grace_seconds >= self.lease_duration_seconds {
            return Err(bad("lease-grace-seconds", "must be shorter than --lease-duration-seconds"));
        }
        let identity = self.identity.unwrap_or_else(default_identity);
        if identity.is_empty() || identity.len() > 128 || identity.chars().any(char::is_control) {
            return Err(bad("identity", "must be 1 to 128 characters without control characters"));
        }
        Ok(Some(LeaderSettings {
            namespace: self.leader_election_namespace,
            lease: self.leader_election_lease,
            identity,
            duration: Duration::from_secs(self.lease_duration_seconds),
            grace: Duration::from_secs(self.lease_grace_seconds),
        }))
    }
}

fn default_identity() -> String {
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "memgate-operator".into());
    format!("{host}-{}", std::process::id())
}
