#!/usr/bin/env bash
# The README's run command: memgate on one machine, no cluster.
#  1. starts `memgate-gateway dev-upstream` (an in-memory Mem0-compatible server, for trying memgate only)
#  2. starts `memgate-gateway serve --config examples/quickstart` (the same YAML you would kubectl apply)
#  3. stores one memory upstream and runs one real MCP `context_search` round trip through the gateway
#  4. keeps serving until Ctrl-C (MEMGATE_QUICKSTART_ONCE=1 stops after the round trip).
set -euo pipefail
cd "$(dirname "$0")/.."

UPSTREAM=127.0.0.1:18888      # must match spec.endpoint.origin in examples/quickstart/mem0-oss.yaml
GATEWAY=${MEMGATE_QUICKSTART_LISTEN:-127.0.0.1:8080}
KEY=dev-only-key              # the Secret in examples/quickstart/mem0-oss.yaml

# The gateway links jemalloc, built from C source: a C compiler and make (installed when missing).
MEMGATE_PROVISION_SCOPE=build bash scripts/lib/provision.sh
cargo build -q -p memgate-gateway --bin memgate-gateway
bin=target/debug/memgate-gateway
logs=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$bin" dev-upstream --listen "$UPSTREAM" --api-key "$KEY" 2>"$logs/upstream.log" & pids+=($!)
"$bin" serve --config examples/quickstart --listen "$GATEWAY" 2>"$logs/gateway.log" & pids+=($!)

for _ in $(seq 100); do
  curl -sf "http://$GATEWAY/readyz" >/dev/null && curl -s -o /dev/null "http://$UPSTREAM/" && break
  sleep 0.1
done
curl -sf "http://$GATEWAY/readyz" >/dev/null || { echo "gateway did not become ready; log:"; cat "$logs/gateway.log"; exit 1; }

echo "== store a memory in the dev upstream (POST /memories)"
curl -sf -X POST "http://$UPSTREAM/memories" -H "X-API-Key: $KEY" -H 'content-type: application/json' \
  -d '{"messages":[{"role":"user","content":"Deploys to production need two approvals."}],"user_id":"repository-memory","agent_id":"qwen-code","infer":false}'
echo
mcp() {
  curl -sf -X POST "http://$GATEWAY/mcp/repo-memory" -H 'content-type: application/json' \
    -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2025-11-25' -d "$1"
}
echo "== MCP tools/list on http://$GATEWAY/mcp/repo-memory"
mcp '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
echo
echo "== MCP tools/call context_search {\"query\":\"production deploys\"}"
result=$(mcp '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"context_search","arguments":{"query":"production deploys"}}}')
echo "$result"
echo "$result" | grep -q 'two approvals' || { echo "round trip did not return the stored memory"; exit 1; }
echo "== round trip ok"

if [ "${MEMGATE_QUICKSTART_ONCE:-0}" = 1 ]; then exit 0; fi
echo "memgate is serving http://$GATEWAY/mcp/repo-memory (MCP) and http://$GATEWAY/nexent/v1/repo-memory/search; Ctrl-C stops it."
echo "logs: $logs"
wait
