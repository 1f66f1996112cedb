//! What every Nexent route checks before doing its work, in one order for all of them: the provider
//! exists and serves the operation (404; ingest also needs a write contract), the caller may call it
//! (401 / 403 / 503), the operation's kill switch (503), the body fits (413). Refusals after the
//! provider is known are counted in the metrics.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use tokio::time::Instant;

use super::{ApiError, MAX_BODY_BYTES};
use crate::auth::Caller;
use crate::config::Provider;
use crate::listener::ClientAddr;
use crate::metrics::Operation;
use crate::state::AppState;

/// A call that passed admission.
pub(super) struct Admitted {
    /// The provider, from the snapshot the caller was checked against.
    pub provider: Arc<Provider>,
    /// Who is calling.
    pub caller: Caller,
    /// The request body (at most [`MAX_BODY_BYTES`]).
    pub body: Bytes,
    operation: Operation,
    started: Instant,
}

impl Admitted {
    /// Count `err` as a refusal of this call and return it.
    pub fn refuse(&self, state: &AppState, err: ApiError) -> ApiError {
        state.record_refusal(&self.provider, self.operation, Some(&self.caller), err.body.code, self.started.elapsed());
        err
    }
}

/// Run the admission checks of `operation` (Nexent search, or Nexent ingest) on provider `name`.
pub(super) async fn admit(
    state: &AppState,
    name: &str,
    operation: Operation,
    headers: &HeaderMap,
    client: Option<ClientAddr>,
    body: Body,
) -> Result<Admitted, ApiError> {
    let started = Instant::now();
    let ingest = operation == Operation::NexentIngest;
    let provider = state
        .provider(name)
        .filter(|p| if ingest { p.nexent_ingest } else { p.nexent_search })
        .ok_or_else(ApiError::not_found)?;
    if ingest && provider.write.is_none() {
        return Err(ApiError::not_writable());
    }
    let refuse = |err: ApiError, caller: Option<&Caller>| {
        state.record_refusal(&provider, operation, caller, err.body.code, started.elapsed());
        err
    };
    let mut caller = state
        .auth()
        .authenticate(&provider.name, &provider.access, headers)
        .await
        .map_err(|e| refuse(ApiError::from_auth(e), None))?;
    caller.client = client.map(|client| client.0);
    let switches = &state.settings().switches;
    if ingest && !switches.ingest {
        return Err(refuse(ApiError::ingest_switched_off(), Some(&caller)));
    }
    if !ingest && !switches.search {
        return Err(refuse(ApiError::switched_off(), Some(&caller)));
    }
    let body =
        axum::body::to_bytes(body, MAX_BODY_BYTES).await.map_err(|_| refuse(ApiError::too_large(), Some(&caller)))?;
    Ok(Admitted { provider, caller, body, operation, started })
}
