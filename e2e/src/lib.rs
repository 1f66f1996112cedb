//! Test support for memgate: a real Kubernetes control plane (etcd + kube-apiserver, no container engine) for
//! integration and end-to-end tests.
//!
//! ```no_run
//! # async fn example() -> Result<(), memgate_e2e::Error> {
//! use memgate_e2e::ControlPlane;
//!
//! // One control plane per test binary, one namespace per test.
//! let control_plane = ControlPlane::shared().await?;
//! let namespace = control_plane.new_namespace("my-test").await?;
//! let client = control_plane.client()?;
//! # let _ = (namespace, client);
//! # Ok(())
//! # }
//! ```
//!
//! The binaries are found in `KUBEBUILDER_ASSETS` (envtest convention) or in the cache folder that
//! `e2e/control-plane/provide.sh` fills for the version pinned in `e2e/control-plane/versions.env`; when neither
//! has them, starting fails with [`Error::BinariesNotFound`] saying how to provide them.
//!
//! For the Helm chart checks, [`Helm`] runs the pinned helm binary (`MEMGATE_HELM`, from
//! `e2e/helm/provide.sh`), [`split_manifest`] reads what it renders and [`apply_manifest`] sends those
//! objects to the control plane by server-side apply.
//!
//! What a bare control plane does not do (no scheduler, kubelet or controller manager): Pods never run,
//! Deployments get no ReplicaSets or status, namespaces never finish terminating, owner references are not
//! garbage collected, service accounts are not created automatically.

mod binaries;
mod control_plane;
mod error;
mod helm;
mod pki;
mod process;
pub mod procfs;
mod versions;

pub use binaries::Binaries;
pub use control_plane::{Builder, ControlPlane, TEST_NAMESPACE_LABEL};
pub use error::Error;
pub use helm::{HELM_ENV, Helm, apply_manifest, describe, get_object, split_manifest};
pub use versions::{PinnedVersions, pinned_versions};
