//! A Remote MCP server for client compatibility tests (`gateway/tests/python/run.sh`).
//!
//! Serves [`memgate_gateway::mcp::router`] on 127.0.0.1 (port from the first argument, default 0
//! = any free port) with a deterministic in-process backend that stands in for the engine (the
//! engine is tested against real upstream servers in `tests/failure_matrix.rs` and
//! `tests/mcp_surface.rs`). Prints `MCP_TEST_SERVER_LISTENING=127.0.0.1:<port>` once ready and
//! serves until killed.
//!
//! Providers:
//! - `docs`: seven items; the first echoes the normalised query in its title and the requested
//!   limit in its uri, and its content carries `<b>` markup.
//! - `broken`: always fails as an upstream 503 would.

use std::io::Write;
use std::sync::Arc;

use futures::future::BoxFuture;
use memgate_gateway::engine::{EngineError, Item};
use memgate_gateway::mcp::{ProviderSearch, router};

/// The deterministic backend described in the module docs.
struct DeterministicSearch;

impl ProviderSearch for DeterministicSearch {
    fn exists(&self, provider: &str) -> bool {
        matches!(provider, "docs" | "broken")
    }

    fn search<'a>(
        &'a self,
        provider: &'a str,
        query: String,
        limit: u32,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
        Box::pin(async move {
            if provider != "docs" {
                return Err(EngineError::ServerError(503));
            }
            let first = Item {
                id: "doc-1".into(),
                content: "Refunds are <b>never</b> automatic.".into(),
                title: Some(format!("echo: {query}")),
                uri: Some(format!("memgate://limit/{limit}")),
                score: Some(0.5),
                updated_at: Some("2026-11-30T12:00:00Z".into()),
            };
            let rest = (2..=7).map(|n| Item {
                id: format!("doc-{n}"),
                content: format!("memory {n}"),
                title: None,
                uri: None,
                score: None,
                updated_at: None,
            });
            Ok(std::iter::once(first).chain(rest).collect())
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let port: u16 = match std::env::args().nth(1) {
        Some(raw) => raw.parse().map_err(|_| std::io::Error::other("the port must be a number"))?,
        None => 0,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let app = router(Arc::new(DeterministicSearch), Vec::new());
    let mut stdout = std::io::stdout();
    writeln!(stdout, "MCP_TEST_SERVER_LISTENING={addr}")?;
    stdout.flush()?;
    axum::serve(listener, app).await
}
