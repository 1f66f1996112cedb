//! The operator's own HTTP side: `/metrics` (OpenMetrics), `/healthz` (the process runs) and
//! `/readyz` (every watch has listed its objects once, leader or standby alike).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::metrics::{Metrics, OPENMETRICS_CONTENT_TYPE};

/// What `/readyz` reports.
#[derive(Debug, Default)]
pub struct Health {
    synced: AtomicBool,
}

impl Health {
    /// Every watch has listed its objects once.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::SeqCst);
    }

    /// Whether every watch has listed its objects once.
    pub fn synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst)
    }
}

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Arc<Health>,
}

/// The router.
pub fn app(metrics: Arc<Metrics>, health: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { metrics, health })
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.health.synced() {
        "ok\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "watches not synced yet\n").into_response()
    }
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], state.metrics.encode()).into_response()
}
