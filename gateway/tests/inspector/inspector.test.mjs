// The official MCP Inspector's CLI (@modelcontextprotocol/inspector 2.12.0, `--cli`) against a real
// `memgate-gateway serve`, in both of its protocol eras: `legacy` (initialize, then 2025-11-25)
// and `modern` (server/discover, then 2026-07-28 with the `_meta` envelope on every request).
// The Inspector's documented smoke test is connect, list, call and assert on `--format json` and
// the exit code; `--strict` on tools/list reports tool-schema portability problems (exit 6 if any
// is an error). Read from clients/cli/build/index.js of that release: the result is printed on
// standard output, a failure's verdict as JSON on standard error; exit 0 on success, 5 for a tool
// answering `isError: true` (`tool_is_error`, its result still printed) or a tool not in
// tools/list (`tool_not_found`, decided by the CLI from the list, nothing called).
//
// The CLI talks to the gateway through a recording pass-through on this process (a plain HTTP
// forwarder, it changes nothing) so that each test can show which protocol version the era
// actually negotiated. Runs under Node.js >= 22.19 (the Inspector's `engines`), which
// gateway/tests/inspector/run.sh provides.
//
// `MEMGATE_GATEWAY`: host:port of the gateway, `MEMGATE_DEV_UPSTREAM` and
// `MEMGATE_DEV_UPSTREAM_API_KEY` the upstream it searches, `MEMGATE_INSPECTOR` the Inspector's
// launcher script.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import { after, before, test } from 'node:test';

const gateway = process.env.MEMGATE_GATEWAY ?? '';
const upstream = process.env.MEMGATE_DEV_UPSTREAM ?? '';
const apiKey = process.env.MEMGATE_DEV_UPSTREAM_API_KEY ?? '';
const inspector = process.env.MEMGATE_INSPECTOR ?? '';
const provider = 'repo-memory';
const memory = 'The release checklist needs two approvals.';
const inputErrorPrefix = 'Invalid arguments: `query` must be a string of 1 to 2000 characters';

/** Every request the CLI sent through the pass-through: HTTP method, version header, JSON-RPC method. */
let seen = [];
let recorder;
let recorderUrl;

function startRecorder() {
  const [host, port] = gateway.split(':');
  recorder = http.createServer((request, response) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      let rpcMethod = null;
      try {
        rpcMethod = JSON.parse(body.toString('utf8')).method ?? null;
      } catch {
        // A GET (the SSE probe) has no body.
      }
      seen.push({ http: request.method, version: request.headers['mcp-protocol-version'] ?? null, rpcMethod });
      const forwarded = http.request(
        { host, port, method: request.method, path: request.url, headers: request.headers },
        (answer) => {
          response.writeHead(answer.statusCode, answer.headers);
          answer.pipe(response);
        },
      );
      forwarded.on('error', () => response.destroy());
      forwarded.end(body);
    });
  });
  return new Promise((resolve) => {
    recorder.listen(0, '127.0.0.1', () => {
      recorderUrl = `http://127.0.0.1:${recorder.address().port}/mcp/${provider}`;
      resolve();
    });
  });
}

/**
 * Runs the Inspector's CLI once: its exit code, the JSON it printed on standard output (the
 * result, when there is one) and the JSON error it printed on standard error (the verdict, when
 * it is not a success).
 */
function inspect(era, ...args) {
  seen = [];
  const argv = [inspector, '--cli', recorderUrl, '--transport', 'http', '--protocol-era', era, '--format', 'json', ...args];
  return new Promise((resolve) => {
    execFile(process.execPath, argv, { timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? error.code : 0;
      const json = (text, stream) => {
        if (text.trim() === '') return null;
        try {
          return JSON.parse(text);
        } catch {
          assert.fail(`the Inspector printed no JSON on ${stream} (exit ${code}): ${stdout}\n${stderr}`);
        }
      };
      resolve({ code, output: json(stdout, 'stdout'), verdict: json(stderr, 'stderr') });
    });
  });
}

/** The versions each era must have negotiated, judged from what the CLI sent. */
function assertNegotiated(era) {
  const posts = seen.filter((request) => request.http === 'POST');
  if (era === 'legacy') {
    assert.equal(posts[0].rpcMethod, 'initialize', 'legacy opens with initialize');
    for (const request of posts.slice(1)) assert.equal(request.version, '2025-11-25', request.rpcMethod);
  } else {
    assert.equal(posts[0].rpcMethod, 'server/discover', 'modern opens with server/discover');
    assert.ok(posts.every((request) => request.rpcMethod !== 'initialize'), 'modern never initializes');
    for (const request of posts) assert.equal(request.version, '2026-07-28', request.rpcMethod);
  }
}

before(async () => {
  assert.ok(gateway && upstream && inspector, 'MEMGATE_GATEWAY, MEMGATE_DEV_UPSTREAM and MEMGATE_INSPECTOR are set');
  // One memory in the provider's scope (examples/quickstart/mem0-oss.yaml), written to the
  // upstream directly with Mem0's add API.
  const response = await fetch(`http://${upstream}/memories`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({
      messages: [{ role: 'user', content: memory }],
      user_id: 'repository-memory',
      agent_id: 'qwen-code',
      infer: false,
    }),
  });
  assert.equal(response.status, 200);
  await startRecorder();
});

after(() => recorder?.close());

for (const era of ['legacy', 'modern']) {
  test(`${era}: tools/list passes --strict and lists context_search alone`, async () => {
    const { code, output, verdict } = await inspect(era, '--method', 'tools/list', '--strict');
    assert.equal(code, 0, JSON.stringify(verdict));
    assert.equal(verdict, null);
    assertNegotiated(era);
    const tools = output.result.tools;
    assert.deepEqual(tools.map((tool) => tool.name), ['context_search']);
    assert.deepEqual(tools[0].inputSchema, {
      type: 'object',
      properties: { query: { type: 'string', minLength: 1, maxLength: 2000 } },
      required: ['query'],
      additionalProperties: false,
    });
  });

  test(`${era}: tools/call context_search finds the memory, text equal to structured content`, async () => {
    const { code, output, verdict } = await inspect(
      era, '--method', 'tools/call', '--tool-name', 'context_search', '--tool-args-json', '{"query":"release checklist"}',
    );
    assert.equal(code, 0, JSON.stringify(verdict));
    assertNegotiated(era);
    assert.ok(seen.some((request) => request.rpcMethod === 'tools/call'), 'the call reached the gateway');
    const result = output.result;
    assert.equal(result.isError, false);
    const items = result.structuredContent.untrusted_external_context.items;
    assert.ok(items.some((item) => item.content === memory), JSON.stringify(items));
    assert.equal(result.content.length, 1);
    assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
  });

  test(`${era}: an empty query is a tool error the CLI reports as such`, async () => {
    const { code, output, verdict } = await inspect(
      era, '--method', 'tools/call', '--tool-name', 'context_search', '--tool-args-json', '{"query":""}',
    );
    assert.equal(code, 5);
    assertNegotiated(era);
    assert.equal(verdict.error.code, 'tool_is_error');
    assert.equal(output.result.isError, true);
    assert.ok(output.result.content[0].text.startsWith(inputErrorPrefix), output.result.content[0].text);
  });

  test(`${era}: a tool the server does not list is refused`, async () => {
    const { code, output, verdict } = await inspect(
      era, '--method', 'tools/call', '--tool-name', 'memory_write', '--tool-args-json', '{"query":"x"}',
    );
    assert.equal(code, 5);
    assert.equal(output, null);
    assert.equal(verdict.error.code, 'tool_not_found');
    assert.ok(seen.every((request) => request.rpcMethod !== 'tools/call'), 'decided from tools/list');
  });
}

