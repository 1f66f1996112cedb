//! The memgate operator: turns the MemoryProviders of each namespace into a running gateway.
//!
//! ```text
//! watches --> index --> queue --> reconcile(namespace):
//!                                   resolve   (read referenced Secrets by name, keep only verdicts)
//!                                   validate  (shared rules of memgate-crds; pure)
//!                                   render    (ConfigMap, Deployment, Service, ServiceAccount, binding; pure)
//!                                   apply     (server-side apply, one field manager; delete what is no longer desired)
//!                                   status    (conditions from the verdicts and the rollout; pure, then one write)
//! ```
//!
//! One gateway per namespace that has MemoryProviders; DialectPresets get their own status. Leader
//! election ([`leader`]) makes several replicas safe; [`http`] serves `/metrics`, `/healthz` and
//! `/readyz`. Each module's documentation says what it owns and what it never does.

pub mod apply;
pub mod controller;
pub mod events;
pub mod http;
pub mod index;
pub mod leader;
pub mod metrics;
pub mod owned;
pub mod queue;
pub mod reasons;
pub mod reconcile;
pub mod render;
pub mod resolve;
pub mod settings;
pub mod status;
pub mod telemetry;
pub mod validate;
pub mod watch_backoff;
