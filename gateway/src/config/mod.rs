//! What the gateway serves: a validated, immutable [`Snapshot`] of providers built from a config
//! folder, and the handle that swaps snapshots on reload.
//!
//! A config folder holds the same YAML a person would `kubectl apply` (DialectPresets,
//! MemoryProviders and the `v1` Secrets they reference, in any files) or what the operator renders:
//! the same objects with `SecretMount` documents in place of Secrets, pointing at mounted Secret
//! volumes (one file per key), so no credential value is ever part of the rendered config.
//!
//! ```text
//! [ files ] --read (files.rs, I/O)--> [ documents + secret data ] --build (build.rs, pure)--> [ Snapshot ]
//! ```
//!
//! A snapshot is all-or-nothing: if any document is invalid the whole load fails and the caller
//! keeps serving the last good snapshot (see [`ConfigHandle`]).

mod build;
mod files;
mod handle;
mod model;

pub use build::{BuildError, build_snapshot};
pub use files::{
    LoadError, MAX_SECRET_FILE_BYTES, Sources, content_fingerprint, failure_fingerprint, load_dir, load_dir_with,
    metadata_fingerprint, read_sources, read_sources_with,
};
pub use handle::{ConfigHandle, FULL_READ_EVERY, Loaded, ReloadStatus, load_watched, watch};
pub use model::{Access, KeyText, Provider, SECRET_MOUNT_API_VERSION, SECRET_MOUNT_KIND, Snapshot};

/// A provider the config tests share (its Secret `agents/mem0-api`, key `api-key`, not included).
#[cfg(test)]
mod test_fixtures {
    pub(super) const PROVIDER: &str = r#"
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {name: repo-memory, namespace: agents}
spec:
  dialect: {builtin: mem0-oss-rest-2026-08}
  endpoint: {origin: "http://127.0.0.1:18888", allowInsecureHttp: true}
  credentials: {secretRef: {name: mem0-api, key: api-key}}
  scope: {userId: repository-memory, agentId: qwen-code}
  access: {anonymous: true}
"#;
}
