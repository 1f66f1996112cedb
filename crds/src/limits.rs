//! `spec.limits` of a `MemoryProvider`: how much one caller, and all callers together, may ask.
//!
//! Every limit is optional; a provider without `limits` is bounded only by the gateway's own caps.
//! The gateway enforces them (`memgate_gateway::limits`): per caller by the verified caller identity,
//! shared by every replica when the gateway has a Redis store. The ranges are checked twice, by the
//! API server (CEL, below) and by [`crate::validation::provider_limits`] for files that never reach one.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Largest `requestsPerMinute` of a per-caller limit.
pub const MAX_REQUESTS_PER_MINUTE: u32 = 1_000_000;
/// Largest `unitsPerHour` of a per-caller ingest limit.
pub const MAX_UNITS_PER_HOUR: u32 = 10_000_000;
/// Largest `burst` of any limit.
pub const MAX_BURST: u32 = 1_000_000;
/// Largest `upstream.requestsPerSecond`.
pub const MAX_REQUESTS_PER_SECOND: u32 = 100_000;
/// Largest `upstream.maxInFlight`.
pub const MAX_IN_FLIGHT: u32 = 4096;

/// Limits of one provider.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderLimits {
    /// Every search and MCP tool call of one caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_caller: Option<CallRate>,
    /// Units one caller may ingest (each unit of a Nexent ingest counts one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_caller_ingest: Option<UnitRate>,
    /// The sum of all callers: protects the upstream memory service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<UpstreamLimits>,
}

/// A call rate: `requestsPerMinute` on average, at most `burst` at once.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallRate {
    /// Calls per minute, on average (1 to 1000000).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 1000000").message("requestsPerMinute must be between 1 and 1000000"))]
    pub requests_per_minute: u32,
    /// Calls allowed at once after a quiet period (default: `requestsPerMinute`, a whole minute's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 1000000").message("burst must be between 1 and 1000000"))]
    pub burst: Option<u32>,
}

/// A unit rate: `unitsPerHour` on average, at most `burst` units at once.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnitRate {
    /// Units per hour, on average (1 to 10000000).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 10000000").message("unitsPerHour must be between 1 and 10000000"))]
    pub units_per_hour: u32,
    /// Units allowed at once after a quiet period (default: `unitsPerHour`, an hour's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 1000000").message("burst must be between 1 and 1000000"))]
    pub burst: Option<u32>,
}

/// Limits on what reaches the upstream service from all callers together.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new("has(self.requestsPerSecond) || has(self.maxInFlight)").message("spec.limits.upstream: set requestsPerSecond, maxInFlight or both"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamLimits {
    /// Upstream requests per second from all replicas together (shared through the gateway's
    /// Redis store; per replica without one), at most one second's worth at once (1 to 100000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 100000").message("spec.limits.upstream.requestsPerSecond must be between 1 and 100000"))]
    pub requests_per_second: Option<u32>,
    /// Upstream requests in flight at once, per gateway replica (1 to 4096). Calls beyond it wait
    /// for a slot within the provider's timeout, then fail `rate_limited`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self >= 1 && self <= 4096").message("spec.limits.upstream.maxInFlight must be between 1 and 4096"))]
    pub max_in_flight: Option<u32>,
}

impl ProviderLimits {
    /// True when a limit is a rate the replicas share through the gateway's Redis store (every
    /// limit but `upstream.maxInFlight`, which is per replica).
    pub fn has_shared_rates(&self) -> bool {
        self.per_caller.is_some()
            || self.per_caller_ingest.is_some()
            || self.upstream.is_some_and(|u| u.requests_per_second.is_some())
    }
}

impl CallRate {
    /// The burst, defaulted to one minute's worth.
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or(self.requests_per_minute)
    }
}

impl UnitRate {
    /// The burst, defaulted to one hour's worth (capped at [`MAX_BURST`]).
    pub fn burst(&self) -> u32 {
        self.burst.unwrap_or(self.units_per_hour.min(MAX_BURST))
    }
}
