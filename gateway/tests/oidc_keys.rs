//! The issuer key cache against a real local HTTP server: unknown `kid`s refetch at most once per
//! interval, a failed refetch keeps the last good keys, an issuer never reached is "unavailable",
//! the discovery `issuer` must match exactly, and off-origin redirects are not followed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use memgate_gateway::auth::keys::{KeyError, KeySource, KeyStore};
use serde_json::json;

#[derive(Clone, Default)]
struct Issuer {
    origin: Arc<std::sync::Mutex<String>>,
    claimed_issuer: Arc<std::sync::Mutex<Option<String>>>,
    jwks_fetches: Arc<AtomicUsize>,
    down: Arc<std::sync::atomic::AtomicBool>,
    redirect_to: Arc<std::sync::Mutex<Option<String>>>,
}

// An RSA public key (2048 bit) in JWK form: only its shape matters to the cache.
const N: &str = "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw";

async fn discovery(State(issuer): State<Issuer>) -> Response {
    if issuer.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let origin = issuer.origin.lock().expect("lock").clone();
    let claimed = issuer.claimed_issuer.lock().expect("lock").clone().unwrap_or_else(|| origin.clone());
    axum::Json(json!({"issuer": claimed, "jwks_uri": format!("{origin}/jwks")})).into_response()
}

async fn jwks(State(issuer): State<Issuer>) -> Response {
    if let Some(target) = issuer.redirect_to.lock().expect("lock").clone() {
        return (StatusCode::FOUND, [(header::LOCATION, target)]).into_response();
    }
    if issuer.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    issuer.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    axum::Json(json!({"keys": [{"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": N, "e": "AQAB"}]}))
        .into_response()
}

async fn serve(issuer: Issuer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    *issuer.origin.lock().expect("lock") = origin.clone();
    let app = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .with_state(issuer);
    tokio::spawn(async move { axum::serve(listener, app).await });
    origin
}

fn source(origin: &str) -> KeySource {
    KeySource::Issuer { issuer: origin.to_string(), allow_http: true }
}

#[tokio::test]
async fn unknown_kids_refetch_at_most_once_per_interval_and_outages_keep_the_last_keys() {
    let issuer = Issuer::default();
    let origin = serve(issuer.clone()).await;
    let store = KeyStore::new(None, Duration::from_millis(300)).expect("store");
    let keys = store.keys(&source(&origin), Some("k1")).await.expect("first fetch");
    assert_eq!(keys.issuer, origin);
    assert_eq!(keys.keys.len(), 1);
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), 1);

    for _ in 0..20 {
        store.keys(&source(&origin), Some("made-up")).await.expect("cached keys");
    }
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), 1, "unknown kids within the interval fetch nothing");
    tokio::time::sleep(Duration::from_millis(350)).await;
    store.keys(&source(&origin), Some("made-up")).await.expect("cached keys");
    assert_eq!(issuer.jwks_fetches.load(Ordering::SeqCst), 2, "one refetch after the interval");

    issuer.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(350)).await;
    let kept = store.keys(&source(&origin), Some("rotated")).await.expect("last good keys while the issuer is down");
    assert!(kept.keys.has_kid("k1"));

    let fresh = KeyStore::new(None, Duration::from_millis(300)).expect("store");
    assert_eq!(fresh.keys(&source(&origin), None).await.err(), Some(KeyError::Unavailable));
}

#[tokio::test]
async fn a_discovery_document_naming_another_issuer_is_refused() {
    let issuer = Issuer::default();
    *issuer.claimed_issuer.lock().expect("lock") = Some("https://evil.example".into());
    let origin = serve(issuer.clone()).await;
    let store = KeyStore::new(None, Duration::from_millis(100)).expect("store");
    assert_eq!(store.keys(&source(&origin), None).await.err(), Some(KeyError::Unavailable));
    // A trailing slash is another issuer too: exact comparison.
    let store = KeyStore::new(None, Duration::from_millis(100)).expect("store");
    assert_eq!(store.keys(&source(&format!("{origin}/")), None).await.err(), Some(KeyError::Unavailable));
}

#[tokio::test]
async fn a_jwks_redirect_to_another_origin_is_not_followed() {
    let elsewhere = Issuer::default();
    let other_origin = serve(elsewhere.clone()).await;
    let issuer = Issuer::default();
    *issuer.redirect_to.lock().expect("lock") = Some(format!("{other_origin}/jwks"));
    let origin = serve(issuer.clone()).await;
    let store = KeyStore::new(None, Duration::from_millis(100)).expect("store");
    assert_eq!(store.keys(&source(&origin), None).await.err(), Some(KeyError::Unavailable));
    assert_eq!(elsewhere.jwks_fetches.load(Ordering::SeqCst), 0, "the other origin was never asked");

    // Plain http is refused unless the provider opted in.
    let strict = KeySource::Issuer { issuer: other_origin.clone(), allow_http: false };
    assert_eq!(store.keys(&strict, None).await.err(), Some(KeyError::Unavailable));
}
