//! A namespace's `MemoryGateway` over the operator's gateway settings: each field it sets replaces
//! the setting of the same name for that namespace's gateway; what it leaves out stays the
//! operator's. Pure; the spec was validated before (`memgate_crds::validation::gateway`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use memgate_crds::memory_gateway::MemoryGatewaySpec;

use super::GatewaySettings;

impl GatewaySettings {
    /// These settings with `spec`'s overrides applied.
    pub fn shaped_by(&self, spec: &MemoryGatewaySpec) -> GatewaySettings {
        let mut shaped = self.clone();
        if let Some(url) = &spec.public_url {
            shaped.public_url = Some(url.trim_end_matches('/').to_string());
        }
        if let Some(replicas) = spec.replicas {
            shaped.replicas = replicas;
        }
        if let Some(autoscaling) = &spec.autoscaling {
            shaped.autoscaling = Some(autoscaling.clone());
        }
        if let Some(resources) = &spec.resources {
            // Per resource name: a MemoryGateway setting only the memory limit keeps the CPU ones.
            overlay(&mut shaped.resources.requests, resources.requests.as_ref());
            overlay(&mut shaped.resources.limits, resources.limits.as_ref());
        }
        if let Some(listener) = &spec.listener {
            shaped.listener.max_in_flight = listener.max_in_flight.or(shaped.listener.max_in_flight);
            shaped.listener.max_connections = listener.max_connections.or(shaped.listener.max_connections);
        }
        if let Some(level) = &spec.log_level {
            shaped.log_level = level.clone();
        }
        if let Some(template) = &spec.pod_template {
            shaped.pod_template = template.clone();
        }
        if let Some(policy) = &spec.network_policy {
            shaped.network_policy = policy.enabled.unwrap_or(shaped.network_policy);
            if let Some(namespaces) = &policy.allowed_namespaces {
                shaped.network_policy_namespaces = namespaces.iter().cloned().collect();
            }
            shaped.network_policy_pods = policy.allowed_pods.clone();
        }
        if let Some(budget) = &spec.pod_disruption_budget {
            shaped.pod_disruption_budget = budget.enabled.unwrap_or(shaped.pod_disruption_budget);
        }
        shaped
    }
}

fn overlay(into: &mut BTreeMap<String, String>, from: Option<&BTreeMap<String, Quantity>>) {
    for (name, quantity) in from.into_iter().flatten() {
        into.insert(name.clone(), quantity.0.clone());
    }
}
