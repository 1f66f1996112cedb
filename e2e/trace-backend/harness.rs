//! A real trace backend for tests: Jaeger v2 (the OpenTelemetry-Collector based `jaeger` binary of
//! jaegertracing/jaeger, `cmd/jaeger`) with in-memory storage, only the OTLP/HTTP receiver and the
//! query service, every listener on a free loopback port (its defaults, in
//! `cmd/jaeger/internal/all-in-one.yaml`, listen on 4317/4318, 16685/16686 and more, the query
//! server on all interfaces, so each is set here).
//!
//! The binary is built once from Go modules by `provide.sh` next to this file and found in its
//! cache (or through `MEMGATE_JAEGER`); a test never builds it and fails, naming the script, when it
//! is missing. Shared by the gateway's and the operator's trace tests (`#[path]` include), so both
//! test crates need `reqwest`, `rustls`, `serde_json` and `tokio` (process).

// Each including test crate uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, Command};

/// How long Jaeger may take to start, and a span to become queryable.
const JAEGER_PATIENCE: Duration = Duration::from_secs(30);

fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().no_proxy().build().expect("client")
}

/// A running Jaeger with in-memory storage; killed when dropped.
pub struct Jaeger {
    _child: Child,
    /// Port of the OTLP/HTTP receiver.
    pub otlp_http: u16,
    query_http: u16,
    log: PathBuf,
}

/// The Jaeger binary: `MEMGATE_JAEGER`, else the cache `provide.sh` fills.
fn jaeger_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MEMGATE_JAEGER") {
        return PathBuf::from(path);
    }
    let versions = include_str!("versions.env");
    let version = versions
        .lines()
        .find_map(|line| line.strip_prefix("JAEGER_VERSION="))
        .expect("versions.env sets JAEGER_VERSION")
        .trim();
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .expect("HOME or XDG_CACHE_HOME is set");
    let binary = cache.join(format!("memgate/jaeger-v{version}/bin/jaeger"));
    assert!(
        binary.is_file(),
        "Jaeger v{version} not found at {}: run e2e/trace-backend/provide.sh (./scripts/test.sh does) or set MEMGATE_JAEGER",
        binary.display()
    );
    binary
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
}

impl Jaeger {
    /// Start Jaeger with its files in `dir`.
    pub async fn start(dir: &Path) -> Jaeger {
        let (otlp_http, query_http, query_grpc) = (free_port(), free_port(), free_port());
        let config = format!(
            "service:\n  extensions: [jaeger_storage, jaeger_query]\n  pipelines:\n    traces:\n      \
             receivers: [otlp]\n      exporters: [jaeger_storage_exporter]\n  telemetry:\n    metrics:\n      \
             level: none\n    logs:\n      level: warn\n\
             extensions:\n  jaeger_storage:\n    backends:\n      memstore:\n        memory:\n          max_traces: 10000\n  \
             jaeger_query:\n    storage:\n      traces: memstore\n    enable_tracing: false\n    \
             http:\n      endpoint: 127.0.0.1:{query_http}\n    grpc:\n      endpoint: 127.0.0.1:{query_grpc}\n\
             receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{otlp_http}\n\
             exporters:\n  jaeger_storage_exporter:\n    trace_storage: memstore\n"
        );
        let config_path = dir.join("jaeger.yaml");
        std::fs::write(&config_path, config).expect("write jaeger config");
        let log = dir.join("jaeger.log");
        let mut child = Command::new(jaeger_binary())
            .arg("--config")
            .arg(&config_path)
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(Stdio::from(std::fs::File::create(&log).expect("log")))
            .stderr(Stdio::from(std::fs::File::create(dir.join("jaeger.err")).expect("log")))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn jaeger");
        let http = http_client();
        let deadline = tokio::time::Instant::now() + JAEGER_PATIENCE * 2;
        loop {
            let services = http.get(format!("http://127.0.0.1:{query_http}/api/services")).send().await;
            let otlp = tokio::net::TcpStream::connect(("127.0.0.1", otlp_http)).await;
            if services.is_ok_and(|r| r.status().is_success()) && otlp.is_ok() {
                return Jaeger { _child: child, otlp_http, query_http, log };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "jaeger exited with {status}: {}",
                    std::fs::read_to_string(dir.join("jaeger.err")).unwrap_or_default()
                );
            }
            assert!(tokio::time::Instant::now() < deadline, "jaeger did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The trace `trace_id` as Jaeger's query API returns it, once it holds at least `spans` spans.
    pub async fn trace(&self, trace_id: &str, spans: usize) -> Value {
        let http = http_client();
        let url = format!("http://127.0.0.1:{}/api/traces/{trace_id}", self.query_http);
        let deadline = tokio::time::Instant::now() + JAEGER_PATIENCE;
        loop {
            let answer = http.get(&url).send().await.expect("query jaeger");
            if answer.status().is_success() {
                let body: Value = answer.json().await.expect("jaeger answers JSON");
                let found = body["data"][0]["spans"].as_array().map_or(0, Vec::len);
                if found >= spans {
                    return body;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "trace {trace_id} never reached jaeger with {spans} span(s); jaeger log: {}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `GET path` on the query API, as JSON.
    pub async fn get(&self, path: &str) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.query_http);
        http_client().get(url).send().await.expect("query jaeger").json().await.expect("JSON")
    }
}
