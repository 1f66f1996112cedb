//! The benchmark's upstream: a fixed-answer Mem0-compatible `POST /search` server (hyper, HTTP/1.1
//! keep-alive) whose answer is about 1.5 KiB (about 20 KiB for the large-answer rows), so that what
//! is measured is the gateway, not a search.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// A running upstream; counts the searches it answered.
pub struct Upstream {
    pub address: SocketAddr,
    searches: Arc<AtomicU64>,
}

impl Upstream {
    /// Searches answered so far.
    pub fn searches(&self) -> u64 {
        self.searches.load(Ordering::Relaxed)
    }
}

/// The `mem0-oss-rest-2026-08` search answer: four memories, about 1.5 KiB of JSON.
pub fn answer_body() -> Vec<u8> {
    answer_of(4, 0)
}

/// The answer of the large-answer rows: five memories of about 4 KiB each (about 20 KiB of JSON),
/// so that a search with `limit` 5 carries all of it through the gateway.
pub fn large_answer_body() -> Vec<u8> {
    answer_of(5, 4 * 1024)
}

/// The answer of the stalled-readers rows: twenty memories of about 48 KiB each (about 1 MiB of
/// JSON), so that a 20-result search carries all of it.
pub fn megabyte_answer_body() -> Vec<u8> {
    answer_of(20, 48 * 1024)
}

/// `memories` results whose `memory` text repeats one sentence until it is at least
/// `memory_bytes` long (one sentence when 0).
fn answer_of(memories: u32, memory_bytes: usize) -> Vec<u8> {
    let results: Vec<Value> = (1..=memories)
        .map(|n| {
            let sentence = format!(
                "Decision {n}: the payments service retries idempotent writes three times with \
                 exponential backoff and records every attempt in the ledger."
            );
            let mut memory = sentence.clone();
            while memory.len() < memory_bytes {
                memory.push(' ');
                memory.push_str(&sentence);
            }
            json!({
                "id": format!("7d3c9a1e-0b4f-4c2a-9e61-00000000000{n}"),
                "memory": memory,
                "hash": format!("5f1c0e9b7a2d4e8f9a0b1c2d3e4f5a6{n}"),
                "metadata": {},
                "score": 0.9 - f64::from(n) / 10.0,
                "created_at": "2026-11-30T12:00:00Z",
                "updated_at": "2026-12-01T08:30:00Z",
                "user_id": "bench",
                "agent_id": "bench",
            })
        })
        .collect();
    json!({ "results": results }).to_string().into_bytes()
}

/// Start the upstream on a free loopback port, on the current runtime, answering each search
/// with [`answer_body`] after `delay` (zero: at once; otherwise a stand-in for a real search's
/// latency).
pub async fn start(delay: Duration) -> Result<Upstream> {
    start_with(delay, answer_body()).await
}

/// [`start`] answering every search with `body`.
pub async fn start_with(delay: Duration, body: Vec<u8>) -> Result<Upstream> {
    let listener = TcpListener::bind("127.0.0.1:0").await.context("binding the upstream")?;
    let address = listener.local_addr()?;
    let searches = Arc::new(AtomicU64::new(0));
    let body = Bytes::from(body);
    let counter = Arc::clone(&searches);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let (body, counter) = (body.clone(), Arc::clone(&counter));
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let (body, counter) = (body.clone(), Arc::clone(&counter));
                    async move {
                        let (head, incoming) = request.into_parts();
                        // Read the whole request so the connection can be kept alive.
                        let _ = incoming.collect().await;
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        Ok::<_, Infallible>(respond(&head, body, &counter))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(Upstream { address, searches })
}

fn respond(request: &hyper::http::request::Parts, body: Bytes, searches: &AtomicU64) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    if request.method != Method::POST || request.uri.path() != "/search" {
        *response.status_mut() = StatusCode::NOT_FOUND;
        *response.body_mut() = Full::new(Bytes::from_static(b"{\"detail\":\"Not Found\"}"));
    } else {
        searches.fetch_add(1, Ordering::Relaxed);
    }
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/json".parse().expect("static header"));
    response
}
