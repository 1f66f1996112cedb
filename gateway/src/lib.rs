//! The memgate gateway.
//!
//! - [`config`]: the validated snapshot of what is served, loaded from a config folder and reloaded.
//! - [`engine`]: the bounded request engine, the only code that performs upstream HTTP.
//! - [`profile`]: External Context MCP Profile v1 input and output rules (pure).
//! - [`mcp`]: the Remote MCP surface, one `context_search` tool per provider.
//! - [`auth`]: who may call a provider (anonymous opt-in, static bearer tokens, ServiceAccount
//!   tokens reviewed by the API server or verified offline, OIDC access tokens).
//! - [`oauth_resource`]: RFC 9728 protected resource metadata and the `WWW-Authenticate` challenge.
//! - [`nexent`]: the Nexent search API and its error mapping.
//! - [`gateway_id`]: which gateway this process is (keys shared state, names audit events).
//! - [`audit`]: one structured event per call, on its own stream.
//! - [`limits`]: per-caller and upstream limits of a provider (token buckets, shared through Redis).
//! - [`redis_store`]: the Redis connection shared by the ingest ledger and the limits.
//! - [`hex`]: the one hex encoder of keys and digests.
//! - [`held_bytes`]: the budget of large answer bytes, shared by the engine and the listener.
//! - [`ingest`]: Nexent ingest written upstream exactly once per unit (idempotency ledger).
//! - [`plugin`]: the Nexent plugin directories (rendering, and writing them into Nexent's folder).
//! - [`state`]: the shared request state and the one search entry of both surfaces.
//! - [`serve_args`]: the flags of `memgate-gateway serve`.
//! - [`server`]: every HTTP route, health, readiness, metrics, the shutdown signal.
//! - [`listener`]: accepting connections with every resource bounded, and draining on shutdown.
//! - [`metrics`] and [`telemetry`]: Prometheus metrics, JSON logs and spans.

pub mod audit;
pub mod auth;
pub mod config;
pub mod dev_upstream;
pub mod engine;
pub mod gateway_id;
pub mod held_bytes;
pub mod hex;
pub mod ingest;
pub mod limits;
pub mod listener;
pub mod local_reactor;
pub mod mcp;
pub mod metrics;
pub mod nexent;
pub mod oauth_resource;
pub mod plugin;
pub mod profile;
pub mod redis_store;
pub mod serve_args;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod wake_gate;
