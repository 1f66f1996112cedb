//! Helpers of the `ingest_*` tests: providers, requests, a real `redis-server` child process and
//! the development upstream with an add counter. No mocks: every upstream and store is a real
//! server on 127.0.0.1.

#![allow(dead_code, missing_docs)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::{self, Next};
use memgate_crds::Scope;
use memgate_crds::validation::credential_value;
use memgate_gateway::config::{Access, Provider};
use memgate_gateway::engine::Target;
use memgate_gateway::ingest::{IngestRequest, IngestUnit};
use serde_json::Map;

/// Where the tests expect the Redis server binary (`apt-get install -y redis-server`).
pub const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// A provider `namespace/name` = `agents/<name>` serving Nexent ingest with built-in `dialect`.
pub fn provider(name: &str, dialect: &str, target: Target) -> Provider {
    let builtin = memgate_presets::get(dialect).expect("built-in dialect");
    Provider {
        name: name.to_string(),
        namespace: "agents".to_string(),
        dialect_id: builtin.id.clone(),
        dialect: builtin.spec.clone(),
        encoding: builtin.content_encoding,
        write: builtin.write.clone(),
        target,
        mcp: false,
        nexent_search: true,
        nexent_ingest: true,
        access: Access::default(),
        limits: None,
        series: Default::default(),
        key_text: Default::default(),
    }
}

/// A target at `origin` with credential `credential`.
pub fn target(origin: &str, base_path: &str, scope: Scope, credential: &str, timeout: Duration) -> Target {
    Target {
        origin: origin.to_string(),
        base_path: base_path.to_string(),
        scope,
        credential: credential_value("test", credential.as_bytes()).expect("valid credential"),
        timeout,
        max_in_flight: None,
        urls: memgate_gateway::engine::UrlCache::default(),
    }
}

/// A unit of type `fact`.
pub fn unit(event_id: &str, content: &str) -> IngestUnit {
    IngestUnit {
        event_id: event_id.to_string(),
        event_type: "message".to_string(),
        unit_type: "fact".to_string(),
        unit_content: content.to_string(),
        unit_index: None,
        metadata: Map::new(),
    }
}

/// A request with Nexent's idempotency key for `event`.
pub fn request(event: &str, units: Vec<IngestUnit>) -> IngestRequest {
    IngestRequest {
        tenant_id: "tenant-1".to_string(),
        user_id: "user-1".to_string(),
        agent_id: Some("agent-1".to_string()),
        conversation_id: Some("conv-1".to_string()),
        units,
        idempotency_key: format!("nexent:tenant-1:agent-1:user-1:conv-1:message:{event}"),
        metadata: Map::new(),
    }
}

/// The development upstream (mem0 REST) on 127.0.0.1, counting `POST /memories` calls.
pub struct DevUpstream {
    pub origin: String,
    pub api_key: String,
    adds: Arc<AtomicUsize>,
}

impl DevUpstream {
    pub async fn start() -> DevUpstream {
        let api_key = "dev-upstream-key-3c9f".to_string();
        let adds = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&adds);
        let app = memgate_gateway::dev_upstream::router(api_key.clone()).layer(middleware::from_fn(
            move |request: Request, next: Next| {
                let counter = Arc::clone(&counter);
                async move {
                    if request.method() == axum::http::Method::POST && request.uri().path() == "/memories" {
                        counter.fetch_add(1, Ordering::SeqCst);
                    }
                    next.run(request).await
                }
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let origin = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        DevUpstream { origin, api_key, adds }
    }

    /// `POST /memories` calls received.
    pub fn adds(&self) -> usize {
        self.adds.load(Ordering::SeqCst)
    }

    /// Memories stored for `user_id`.
    pub async fn stored(&self, user_id: &str) -> Vec<String> {
        // The engine installs the same default; a test may list before building one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let url = format!("{}/memories?user_id={user_id}", self.origin);
        let answer: serde_json::Value = reqwest::Client::new()
            .get(url)
            .header("x-api-key", &self.api_key)
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        answer["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|memory| memory["memory"].as_str().expect("text").to_string())
            .collect()
    }
}

/// A free port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
}

/// A real `redis-server` child process on 127.0.0.1, no persistence; killed on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
}

impl RedisServer {
    /// Start one on a free port and wait until it answers `PING`.
    pub fn start() -> RedisServer {
        RedisServer::start_on(free_port())
    }

    /// Start one on `port` and wait until it answers `PING`.
    pub fn start_on(port: u16) -> RedisServer {
        RedisServer::start_with(port, &[])
    }

    /// Start one on `port` with more `redis-server` options (`--aclfile …`, `--tls-port …`); the
    /// default user must still answer `PING` on the plain port.
    pub fn start_with(port: u16, options: &[String]) -> RedisServer {
        assert!(
            Path::new(REDIS_SERVER).exists(),
            "{REDIS_SERVER} is missing: the ingest ledger tests need a real Redis server \
             (install it with `apt-get install -y redis-server`)"
        );
        let child = Command::new(REDIS_SERVER)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning"])
            .args(options)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let mut server = RedisServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server.answers_ping() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("redis-server on port {port} exited early: {status}");
            }
            assert!(Instant::now() < deadline, "redis-server on port {port} did not answer PING in time");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn answers_ping(&self) -> bool {
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        let Ok(mut stream) = StdStream::connect_timeout(&address, Duration::from_millis(200)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut answer = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
    }

    /// Stop the server (the test's own child process) and wait for it.
    pub fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
