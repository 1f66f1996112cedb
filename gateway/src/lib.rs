//! The memgate gateway.
//!
//! - [`engine`]: the bounded request engine, the only code that performs upstream HTTP.

pub mod engine;
