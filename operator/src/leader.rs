//! Leader election on a `coordination.k8s.io/v1` Lease, with the maintained `kube-lease-manager`
//! crate (0.13, built on kube 5; alex-karpenko/kube-lease-manager): it locks the Lease with
//! server-side apply, renews it `grace` before it expires and takes over an expired one.
//!
//! Several operator replicas each hold a [`Leadership`]; only the holder of the Lease reconciles.
//! A replica that loses the Lease stops (the process exits and is restarted as a standby) rather
//! than risk reconciling beside the new leader. Dropping a [`Leadership`] releases the Lease, so
//! a clean shutdown hands over at once; a killed leader is replaced once its Lease expires.

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::settings::LeaderSettings;

/// A running election.
#[derive(Debug)]
pub struct Leadership {
    state: watch::Receiver<bool>,
    task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// The election could not start or ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be created or read.
    #[error("leader election on Lease {namespace}/{name}: {source}")]
    Lease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// The cause.
        #[source]
        source: LeaseManagerError,
    },
    /// The Lease was lost (or the election task ended) while leading.
    #[error("lost the leader Lease")]
    Lost,
}

impl Leadership {
    /// Join the election on the configured Lease (created when absent).
    pub async fn join(client: Client, settings: &LeaderSettings) -> Result<Leadership, LeaderError> {
        let lease_error =
            |source| LeaderError::Lease { namespace: settings.namespace.clone(), name: settings.lease.clone(), source };
        let manager = LeaseManagerBuilder::new(client, &settings.lease)
            .with_namespace(&settings.namespace)
            .with_identity(&settings.identity)
            .with_duration(settings.duration.as_secs())
            .with_grace(settings.grace.as_secs())
            .build()
            .await
            .map_err(lease_error)?;
        let (state, task) = manager.watch().await;
        Ok(Leadership { state, task })
    }

    /// Wait until this process holds the Lease.
    pub async fn acquired(&mut self) -> Result<(), LeaderError> {
        self.state.wait_for(|leading| *leading).await.map(|_| ()).map_err(|_| LeaderError::Lost)
    }

    /// Wait until this process no longer holds the Lease.
    pub async fn lost(&mut self) -> LeaderError {
        let _ = self.state.wait_for(|leading| !*leading).await;
        LeaderError::Lost
    }

    /// Release the Lease (if held) and end the election.
    pub async fn release(self) {
        let Leadership { state, task } = self;
        drop(state);
        if let Ok(Err(error)) = task.await {
            tracing::warn!(error = %error, "releasing the leader Lease failed; it expires on its own");
        }
    }
}
