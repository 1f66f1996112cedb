//! Ranges of `spec.limits` (the same as its CEL rules), for files checked without an API server.

use super::Violation;
use crate::limits::{
    MAX_BURST, MAX_IN_FLIGHT, MAX_REQUESTS_PER_MINUTE, MAX_REQUESTS_PER_SECOND, MAX_UNITS_PER_HOUR, ProviderLimits,
};

/// Every out-of-range value of `limits`, each naming its field.
pub fn provider_limits(limits: &ProviderLimits) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut range = |field: &str, value: Option<u32>, max: u32| {
        if let Some(value) = value
            && !(1..=max).contains(&value)
        {
            found.push(Violation::new(field, format!("must be between 1 and {max}")));
        }
    };
    if let Some(rate) = &limits.per_caller {
        range("spec.limits.perCaller.requestsPerMinute", Some(rate.requests_per_minute), MAX_REQUESTS_PER_MINUTE);
        range("spec.limits.perCaller.burst", rate.burst, MAX_BURST);
    }
    if let Some(rate) = &limits.per_caller_ingest {
        range("spec.limits.perCallerIngest.unitsPerHour", Some(rate.units_per_hour), MAX_UNITS_PER_HOUR);
        range("spec.limits.perCallerIngest.burst", rate.burst, MAX_BURST);
    }
    if let Some(upstream) = &limits.upstream {
        range("spec.limits.upstream.requestsPerSecond", upstream.requests_per_second, MAX_REQUESTS_PER_SECOND);
        range("spec.limits.upstream.maxInFlight", upstream.max_in_flight, MAX_IN_FLIGHT);
        if upstream.requests_per_second.is_none() && upstream.max_in_flight.is_none() {
            found.push(Violation::new("spec.limits.upstream", "set requestsPerSecond, maxInFlight or both"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{CallRate, UnitRate, UpstreamLimits};

    fn fields(limits: &ProviderLimits) -> Vec<String> {
        provider_limits(limits).into_iter().map(|v| v.field).collect()
    }

    #[test]
    fn in_range_limits_pass() {
        let limits = ProviderLimits {
            per_caller: Some(CallRate { requests_per_minute: 60, burst: Some(10) }),
            per_caller_ingest: Some(UnitRate { units_per_hour: 500, burst: None }),
            upstream: Some(UpstreamLimits { requests_per_second: Some(50), max_in_flight: Some(16) }),
        };
        assert!(fields(&limits).is_empty());
        assert!(fields(&ProviderLimits::default()).is_empty());
    }

    #[test]
    fn each_out_of_range_value_names_its_field() {
        let limits = ProviderLimits {
            per_caller: Some(CallRate { requests_per_minute: 0, burst: Some(MAX_BURST + 1) }),
            per_caller_ingest: Some(UnitRate { units_per_hour: MAX_UNITS_PER_HOUR + 1, burst: Some(0) }),
            upstream: Some(UpstreamLimits { requests_per_second: Some(0), max_in_flight: Some(MAX_IN_FLIGHT + 1) }),
        };
        assert_eq!(
            fields(&limits),
            [
                "spec.limits.perCaller.requestsPerMinute",
                "spec.limits.perCaller.burst",
                "spec.limits.perCallerIngest.unitsPerHour",
                "spec.limits.perCallerIngest.burst",
                "spec.limits.upstream.requestsPerSecond",
                "spec.limits.upstream.maxInFlight",
            ]
        );
        let empty = ProviderLimits { upstream: Some(UpstreamLimits::default()), ..ProviderLimits::default() };
        assert_eq!(fields(&empty), ["spec.limits.upstream"]);
    }

    #[test]
    fn bursts_default_to_one_period() {
        assert_eq!(CallRate { requests_per_minute: 5, burst: None }.burst(), 5);
        assert_eq!(UnitRate { units_per_hour: 500, burst: Some(20) }.burst(), 20);
        assert_eq!(UnitRate { units_per_hour: MAX_UNITS_PER_HOUR, burst: None }.burst(), MAX_BURST);
    }
}
