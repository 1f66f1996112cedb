// The official MCP TypeScript SDK (@modelcontextprotocol/sdk, the client library Qwen Code builds
// on: QwenLM/qwen-code packages/core/package.json) against real `memgate-gateway serve` replicas.
//
// What the SDK sends (dist/esm/client/streamableHttp.js, 1.32.2): every POST with
// `accept: application/json, text/event-stream`, after `initialize` the negotiated
// `mcp-protocol-version` (LATEST_PROTOCOL_VERSION = 2025-11-25 in dist/esm/types.js) and, only
// when the server handed one out, `mcp-session-id`. `callTool` sends `{name, arguments}` and no
// `_meta` unless a progress callback is given: the gateway's direct path answers those calls.
//
// `MEMGATE_GATEWAYS`: comma-separated host:port of the replicas, `MEMGATE_DEV_UPSTREAM` and
// `MEMGATE_DEV_UPSTREAM_API_KEY` the upstream they search (gateway/tests/typescript/run.sh).
import assert from 'node:assert/strict';
import { before, test } from 'node:test';

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
