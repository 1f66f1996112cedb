// The official MCP TypeScript SDK against real `memgate-gateway serve` replicas, both release
// lines: v1 (@modelcontextprotocol/sdk, the client library Qwen Code builds on: QwenLM/qwen-code
// packages/core/package.json) speaking 2025-11-25, and v2 (@modelcontextprotocol/client) speaking
// 2026-07-28.
//
// What v1 sends (dist/esm/client/streamableHttp.js, 1.32.2): every POST with
// `accept: application/json, text/event-stream`, after `initialize` the negotiated
// `mcp-protocol-version` (LATEST_PROTOCOL_VERSION = 2025-11-25 in dist/esm/types.js) and, only
// when the server handed one out, `mcp-session-id`. `callTool` sends `{name, arguments}` and no
// `_meta` unless a progress callback is given: the gateway's direct path answers those calls.
// v2 (2.3.1, dist/index.mjs) with `versionNegotiation` opens with `server/discover` and then stamps
// every request with the `_meta` envelope, deriving `MCP-Protocol-Version`, `Mcp-Method` and
// `Mcp-Name` from it (`_applyBodyDerivedHeaders`): its `tools/call` takes the direct path too.
//
// `MEMGATE_GATEWAYS`: comma-separated host:port of the replicas, `MEMGATE_DEV_UPSTREAM` and
// `MEMGATE_DEV_UPSTREAM_API_KEY` the upstream they search (gateway/tests/typescript/run.sh).
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';

const gateways = (process.env.MEMGATE_GATEWAYS ?? '').split(',').filter(Boolean);
const upstream = process.env.MEMGATE_DEV_UPSTREAM ?? '';
const apiKey = process.env.MEMGATE_DEV_UPSTREAM_API_KEY ?? '';
const provider = 'repo-memory';
const inputErrorPrefix = 'Invalid arguments: `query` must be a string of 1 to 2000 characters';

async function connect(gateway) {
  const client = new Client({ name: 'memgate-ts-sdk-test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`http://${gateway}/mcp/${provider}`));
  await client.connect(transport);
  return { client, transport };
}

// One memory in the provider's scope (examples/quickstart/mem0-oss.yaml), written to the upstream
// directly with Mem0's add API.
before(async () => {
  assert.equal(gateways.length, 2, 'MEMGATE_GATEWAYS names two replicas');
  const response = await fetch(`http://${upstream}/memories`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({
      messages: [{ role: 'user', content: 'The release checklist needs two approvals.' }],
      user_id: 'repository-memory',
      agent_id: 'qwen-code',
      infer: false,
    }),
  });
  assert.equal(response.status, 200);
});

test('initialize negotiates 2025-11-25 without a session', async () => {
  const { client, transport } = await connect(gateways[0]);
  try {
    assert.equal(transport.protocolVersion, '2025-11-25');
    assert.equal(transport.sessionId, undefined, 'stateless: no Mcp-Session-Id');
    assert.equal(client.getServerVersion()?.name, 'memgate-gateway');
    assert.ok(client.getServerCapabilities()?.tools, 'tools capability');
    await client.ping();
  } finally {
    await client.close();
  }
});

test('tools/list offers exactly context_search', async () => {
  const { client } = await connect(gateways[0]);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((tool) => tool.name), ['context_search']);
    assert.deepEqual(tools[0].inputSchema, {
      type: 'object',
      properties: { query: { type: 'string', minLength: 1, maxLength: 2000 } },
      required: ['query'],
      additionalProperties: false,
    });
    assert.deepEqual(tools[0].annotations, { destructiveHint: false });
  } finally {
    await client.close();
  }
});

test('context_search answers on either replica with text equal to its structured content', async () => {
  for (const gateway of gateways) {
    const { client } = await connect(gateway);
    try {
      const result = await client.callTool({ name: 'context_search', arguments: { query: 'release checklist' } });
      assert.equal(result.isError, false);
      assert.equal(result.content.length, 1);
      assert.equal(result.content[0].type, 'text');
      const items = result.structuredContent.untrusted_external_context.items;
      assert.ok(items.length >= 1, `items from ${gateway}`);
      assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
    } finally {
      await client.close();
    }
  }
});

test('bad arguments are a tool error the model can read; an unknown tool is invalid params', async () => {
  const { client } = await connect(gateways[1]);
  try {
    for (const args of [{ query: '' }, { query: '   ' }, { query: 'x', limit: 3 }, {}]) {
      const result = await client.callTool({ name: 'context_search', arguments: args });
      assert.equal(result.isError, true, JSON.stringify(args));
      assert.ok(result.content[0].text.startsWith(inputErrorPrefix), result.content[0].text);
    }
    await assert.rejects(
      client.callTool({ name: 'other_tool', arguments: { query: 'x' } }),
      (error) => error instanceof McpError && error.code === ErrorCode.InvalidParams,
    );
  } finally {
    await client.close();
  }
});

async function connectV2(gateway, mode) {
  const client = new ClientV2({ name: 'memgate-ts-sdk-v2-test', version: '1.0.0' }, { versionNegotiation: { mode } });
  const transport = new TransportV2(new URL(`http://${gateway}/mcp/${provider}`));
  await client.connect(transport);
  return { client, transport };
}

test('v2: server/discover negotiates 2026-07-28, pinned or automatic', async () => {
  for (const mode of [{ pin: '2026-07-28' }, 'auto']) {
    const { client, transport } = await connectV2(gateways[0], mode);
    try {
      assert.equal(transport.protocolVersion, '2026-07-28', JSON.stringify(mode));
      assert.equal(transport.sessionId, undefined, 'no session in 2026-07-28');
      assert.equal(client.getServerVersion()?.name, 'memgate-gateway');
      const listed = await client.listTools();
      assert.deepEqual(listed.tools.map((tool) => tool.name), ['context_search']);
      assert.equal(listed.cacheScope, 'private', 'the cache hints rmcp fills in for 2026-07-28');
    } finally {
      await client.close();
    }
  }
});

test('v2: context_search in 2026-07-28 on either replica, errors as in 2025-11-25', async () => {
  for (const gateway of gateways) {
    const { client } = await connectV2(gateway, { pin: '2026-07-28' });
    try {
      const result = await client.callTool({ name: 'context_search', arguments: { query: 'release checklist' } });
      assert.equal(result.isError, false);
      const items = result.structuredContent.untrusted_external_context.items;
      assert.ok(items.length >= 1, `items from ${gateway}`);
      assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
      const refused = await client.callTool({ name: 'context_search', arguments: { query: ' ' } });
      assert.equal(refused.isError, true);
      assert.ok(refused.content[0].text.startsWith(inputErrorPrefix), refused.content[0].text);
      await assert.rejects(client.callTool({ name: 'other_tool', arguments: { query: 'x' } }), (error) => {
        assert.equal(error.code, -32602, String(error));
        return true;
      });
    } finally {
      await client.close();
    }
  }
});
