//! Qwen Code reads every `context_search` result once: real `node` re-serializes the
//! `structuredContent` of real gateway responses and finds the text block byte-identical.
//!
//! Qwen Code builds model input from an MCP tool result by prepending
//! `JSON.stringify(structuredContent)` unless a text block is exactly that string
//! (QwenLM/qwen-code `packages/core/src/tools/mcp-tool.ts`, `transformMcpContentToParts`; the
//! structuredContent is what the MCP TypeScript SDK got from `JSON.parse` of the response body).
//! This test serves `mcp::router` on 127.0.0.1 with a stand-in provider search (canned items per
//! query, so a seeded generator decides exactly what is rendered: unicode, escapes, control
//! characters, scores such as `1.0`, `-0`, `1e21`, `1e-7`, `0.1 + 0.2`, random bit patterns, and
//! results long enough to be truncated), sends real `tools/call` requests, and hands the raw
//! response bodies to `node`, which applies Qwen Code's rule.
//!
//! For results without `<` / `>` the model must see one part; with them, the profile's escaping
//! makes the bytes differ (two parts, as with Qwen's own reference extension) while both still
//! hold the same value. `node` is required: `./scripts/test.sh` installs it when missing.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

use futures::future::BoxFuture;
use memgate_gateway::engine::{EngineError, Item};
use memgate_gateway::mcp::{ProviderSearch, router};
use serde_json::{Value, json};

/// Node's side: Qwen Code's comparison, one verdict per response body (one body per line).
const CHECK_JS: &str = r#"
const fs = require('fs');
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean);
const verdicts = lines.map((line) => {
  const message = JSON.parse(line);
  const result = message.result;
  const structuredText = JSON.stringify(result.structuredContent);
  const texts = result.content.filter((block) => block.type === 'text').map((block) => block.text);
  // transformMcpContentToParts: the structured copy is prepended unless a text part equals it.
  const parts = texts.some((text) => text === structuredText) ? texts.length : texts.length + 1;
  return {
    blocks: result.content.length,
    parts,
    identical: texts[0] === structuredText,
    sameValue: JSON.stringify(JSON.parse(texts[0])) === structuredText,
    angleBrackets: /[<>]/.test(structuredText),
    utf16Units: texts[0].length,
  };
});
process.stdout.write(JSON.stringify(verdicts));
"#;

/// Canned items per query: `case-<n>` answers the n-th generated case.
struct CannedSearch(HashMap<String, Vec<Item>>);

impl ProviderSearch for CannedSearch {
    fn exists(&self, provider: &str) -> bool {
        provider == "parity"
    }

    fn search<'a>(
        &'a self,
        _provider: &'a str,
        query: String,
        _limit: u32,
    ) -> BoxFuture<'a, Result<Vec<Item>, EngineError>> {
        Box::pin(async move { Ok(self.0.get(&query).cloned().unwrap_or_default()) })
    }
}

/// xorshift64*: deterministic, so a failing case reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn text(&mut self, max_len: u64, angle_brackets: bool) -> String {
        const ALPHABET: &[char] = &[
            'a',
            'Z',
            '0',
            ' ',
            '&',
            '"',
            '\\',
            '/',
            '\n',
            '\t',
            '\r',
            '\u{8}',
            '\u{c}',
            '\u{0}',
            '\u{1f}',
            '\u{7f}',
            'é',
            '中',
            '\u{2028}',
            '\u{2029}',
            '\u{FEFF}',
            '😀',
            '🧪',
            '\u{10FFFF}',
            '\u{0301}',
            '\'',
            '`',
            '$',
            '{',
        ];
        let len = 1 + self.below(max_len);
        (0..len)
            .map(|_| {
                if angle_brackets && self.below(20) == 0 {
                    if self.below(2) == 0 { '<' } else { '>' }
                } else {
                    ALPHABET[self.below(ALPHABET.len() as u64) as usize]
                }
            })
            .collect()
    }

    fn optional(&mut self, max_len: u64, angle_brackets: bool) -> Option<String> {
        (self.below(3) != 0).then(|| self.text(max_len, angle_brackets))
    }

    fn score(&mut self) -> Option<f64> {
        const SPECIAL: [f64; 16] = [
            1.0,
            0.0,
            -0.0,
            -1.0,
            1e21,
            1e20,
            1e-7,
            1e-6,
            1.5e-7,
            0.1 + 0.2,
            5e-324,
            f64::MAX,
            9_007_199_254_740_994.0,
            123_456_789.0,
            0.91,
            f64::NAN,
        ];
        match self.below(4) {
            0 => None,
            1 => Some(SPECIAL[self.below(SPECIAL.len() as u64) as usize]),
            2 => Some(f64::from_bits(self.next())).filter(|score| score.is_finite()),
            _ => Some((self.below(1_000_000) as f64) / 1_000_000.0),
        }
    }

    fn items(&mut self, angle_brackets: bool) -> Vec<Item> {
        let long = self.below(4) == 0;
        (0..self.below(8))
            .map(|_| Item {
                id: self.text(if long { 160 } else { 20 }, angle_brackets),
                content: self.text(if long { 1300 } else { 120 }, angle_brackets),
                title: self.optional(if long { 260 } else { 30 }, angle_brackets),
                uri: self.optional(if long { 600 } else { 40 }, angle_brackets),
                score: self.score(),
                updated_at: self.optional(80, angle_brackets),
            })
            .collect()
    }
}

async fn gateway(search: CannedSearch) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let app = router(Arc::new(search), Vec::new());
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The raw body of one `tools/call` (plain JSON, one line).
async fn call(client: &reqwest::Client, addr: SocketAddr, query: &str) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "context_search", "arguments": {"query": query}},
    });
    let response = client
        .post(format!("http://{addr}/mcp/parity"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string())
        .send()
        .await
        .expect("gateway answers");
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    assert!(!text.contains('\n'), "one JSON document per line: {text}");
    text
}

fn node() -> String {
    std::env::var("NODE").unwrap_or_else(|_| "node".to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qwen_code_sees_the_text_block_equal_to_its_reserialized_structured_content() {
    const CASES: usize = 400;
    let mut rng = Rng(0x005E_ED0F_0A11_CA5E);
    // Every fourth case may hold angle brackets; the rest never do.
    let cases: Vec<(bool, Vec<Item>)> = (0..CASES)
        .map(|n| {
            let angle = n % 4 == 3;
            (angle, rng.items(angle))
        })
        .collect();
    let canned = cases.iter().enumerate().map(|(n, (_, items))| (format!("case-{n}"), items.clone())).collect();
    let addr = gateway(CannedSearch(canned)).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    let mut bodies = String::new();
    for n in 0..CASES {
        bodies.push_str(&call(&client, addr, &format!("case-{n}")).await);
        bodies.push('\n');
    }

    let dir = tempfile::tempdir().expect("temp dir");
    let (script, input) = (dir.path().join("check.js"), dir.path().join("bodies.jsonl"));
    std::fs::write(&script, CHECK_JS).expect("write script");
    std::fs::write(&input, &bodies).expect("write bodies");
    let output = Command::new(node()).arg(&script).arg(&input).output().unwrap_or_else(|err| {
        panic!("`node` is required for this test ({err}); ./scripts/test.sh installs Node.js when it is missing")
    });
    assert!(output.status.success(), "node failed: {}", String::from_utf8_lossy(&output.stderr));
    let verdicts: Vec<Value> = serde_json::from_slice(&output.stdout).expect("node prints JSON");
    assert_eq!(verdicts.len(), CASES);

    let (mut with_angle, mut truncated, mut items_seen) = (0, 0, 0);
    for ((angle_allowed, items), verdict) in cases.iter().zip(&verdicts) {
        let case = || format!("{verdict} for items {items:?}");
        assert_eq!(verdict["blocks"], 1, "exactly one content block: {}", case());
        assert_eq!(verdict["sameValue"], true, "the text holds the structured value: {}", case());
        let angle = verdict["angleBrackets"] == true;
        assert!(!angle || *angle_allowed, "angle brackets appeared from nowhere: {}", case());
        if angle {
            with_angle += 1;
            // The profile's escaping: same value, other bytes, so Qwen Code adds its own copy.
            assert_eq!(verdict["identical"], false, "{}", case());
            assert_eq!(verdict["parts"], 2, "{}", case());
        } else {
            assert_eq!(verdict["identical"], true, "text differs from JSON.stringify(structuredContent): {}", case());
            assert_eq!(verdict["parts"], 1, "the model would see the result twice: {}", case());
        }
        let units = verdict["utf16Units"].as_u64().expect("length");
        assert!(units <= 4000, "{}", case());
        if units > 3500 {
            truncated += 1;
        }
        items_seen += items.len();
    }
    // The generator reached what it is meant to reach.
    assert!(with_angle >= 20, "only {with_angle} results held angle brackets");
    assert!(truncated >= 10, "only {truncated} results came near the budget");
    assert!(items_seen >= CASES, "only {items_seen} items generated");
}

#[tokio::test]
async fn special_scores_go_out_as_javascript_writes_them_in_the_text() {
    let score = |value: f64| Item {
        id: "s".into(),
        content: "c".into(),
        title: None,
        uri: None,
        score: Some(value),
        updated_at: None,
    };
    let canned: HashMap<String, Vec<Item>> =
        [("one", 1.0), ("minus-zero", -0.0), ("big", 1e21), ("tiny", 1e-7), ("sum", 0.1 + 0.2), ("twenty", 1e20)]
            .into_iter()
            .map(|(query, value)| (query.to_string(), vec![score(value)]))
            .collect();
    let addr = gateway(CannedSearch(canned)).await;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder().no_proxy().build().expect("client");
    for (query, written) in [
        ("one", "1"),
        ("minus-zero", "0"),
        ("big", "1e+21"),
        ("tiny", "1e-7"),
        ("sum", "0.30000000000000004"),
        ("twenty", "100000000000000000000"),
    ] {
        let body: Value = serde_json::from_str(&call(&client, addr, query).await).expect("JSON");
        let text = body["result"]["content"][0]["text"].as_str().expect("text block");
        assert!(text.ends_with(&format!(r#""score":{written}}}]}}}}"#)), "{query}: {text}");
    }
}
