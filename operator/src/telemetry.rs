//! Logs: JSON lines on stderr, level from `RUST_LOG` (default `info`).
//!
//! Libraries that log request or response bodies below `info` (kube's client, which would show a
//! Secret it reads; hyper; h2) are capped whatever `RUST_LOG` says, so no log level can print a
//! Secret value.

use tracing_subscriber::EnvFilter;

/// Libraries capped at these levels.
const CAPS: [&str; 5] = ["kube_client=info", "kube_runtime=info", "hyper=info", "hyper_util=info", "h2=info"];

/// Install the global JSON log subscriber; a second call leaves the first in place.
pub fn init() {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    for cap in CAPS {
        if let Ok(directive) = cap.parse() {
            filter = filter.add_directive(directive);
        }
    }
    let _ = tracing_subscriber::fmt().json().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
