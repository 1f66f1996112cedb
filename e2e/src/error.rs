//! The one error type of this crate. It is `Clone` so that a failed start of the shared control plane can be
//! reported to every test that asks for it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything that can go wrong while providing, starting or using the test control plane.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Neither `KUBEBUILDER_ASSETS` nor the cache folder holds both binaries.
    #[error(
        "kube-apiserver and etcd not found (looked in: {looked_in}). Provide them by running \
         e2e/control-plane/provide.sh (builds Kubernetes v{kubernetes} and etcd v{etcd} from Go modules once, into \
         the cache folder), or set KUBEBUILDER_ASSETS to a folder holding both binaries"
    )]
    BinariesNotFound {
        /// Where discovery looked and what was missing there.
        looked_in: String,
        /// The pinned Kubernetes version.
        kubernetes: &'static str,
        /// The pinned etcd version.
        etcd: &'static str,
    },

    /// A control plane process exited on its own.
    #[error("{process} exited {phase} ({status}); last lines of {}:\n{tail}", log.display())]
    ProcessDied {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// When it was noticed, e.g. `during startup`.
        phase: &'static str,
        /// Its exit status.
        status: String,
        /// Its log file (stdout and stderr).
        log: PathBuf,
        /// The last lines of that log.
        tail: String,
    },

    /// A process kept running but did not become ready in time.
    #[error("{process} was not ready after {waited:?} ({condition}); last lines of {}:\n{tail}", log.display())]
    NotReady {
        /// `etcd` or `kube-apiserver`.
        process: &'static str,
        /// What was awaited.
        condition: String,
        /// How long.
        waited: Duration,
        /// Its log file.
        log: PathBuf,
        /// The last lines of that log.
        tail: String,
    },

    /// A program could not be started at all.
    #[error("could not run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: Arc<std::io::Error>,
    },

    /// A file system operation failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done, naming the path.
        action: String,
        /// Why.
        #[source]
        source: Arc<std::io::Error>,
    },

    /// A helper command (e.g. `openssl`) failed.
    #[error("{command} failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },

    /// The kubeconfig this crate wrote could not be turned into a client configuration.
    #[error("kubeconfig {}: {message}", path.display())]
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// Why.
        message: String,
    },

    /// No usable helm binary: `MEMGATE_HELM` is unset or does not name an executable.
    #[error(
        "helm not provided: {reason}. Run `export MEMGATE_HELM=$(e2e/helm/provide.sh | tail -n 1)` (builds the \
         pinned Helm from Go modules once, into the cache folder) or point MEMGATE_HELM at a helm v4 binary"
    )]
    HelmNotProvided {
        /// What is wrong with the variable.
        reason: String,
    },

    /// A helm command failed (a lint finding, a values.schema.json violation, a `fail` in a template).
    #[error("{command} failed ({status}):\n{output}")]
    Helm {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr, then stdout.
        output: String,
    },

    /// A manifest could not be read as Kubernetes objects.
    #[error("manifest: {message}")]
    Manifest {
        /// What is wrong, naming the document or object.
        message: String,
    },

    /// The API server of the shared control plane cannot be stopped or started: other tests use it.
    #[error(
        "cannot {action} the API server of ControlPlane::shared(): other tests use it; give the test a control \
         plane of its own (ControlPlane::start())"
    )]
    SharedControlPlane {
        /// `stop` or `start`.
        action: &'static str,
    },

    /// A Kubernetes API call made by this crate failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// Why.
        #[source]
        source: Arc<kube::Error>,
    },
}

impl Error {
    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { action: action.into(), source: Arc::new(source) }
    }

    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube { action: action.into(), source: Arc::new(source) }
    }
}
