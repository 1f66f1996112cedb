//! The memgate gateway.
//!
//! - [`config`]: the validated snapshot of what is served, loaded from a config folder and reloaded.
//! - [`engine`]: the bounded request engine, the only code that performs upstream HTTP.
//! - [`profile`]: External Context MCP Profile v1 input and output rules (pure).
//! - [`mcp`]: the Remote MCP surface, one `context_search` tool per provider.

pub mod config;
pub mod engine;
pub mod mcp;
pub mod profile;
