#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK (pinned in package-lock.json) against two real
# `memgate-gateway serve` replicas and a dev upstream. Self-contained: the SDK is installed with
# `npm ci` into the cache folder (reused while package-lock.json is unchanged), the processes are
# stopped on exit. Needs node and npm (scripts/lib/provision.sh installs them).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# shellcheck source=../../../scripts/lib/npm-cache.sh
source "$repo/scripts/lib/npm-cache.sh"
modules="$(npm_cached_install mcp-typescript-sdk "$here")"

# shellcheck source=../../../scripts/lib/real-gateway.sh
source "$repo/scripts/lib/real-gateway.sh"
open_workdir

# ES modules resolve packages next to the importing file: the test runs from the work folder,
# beside a link to the installed packages.
cp "$here/client.test.mjs" "$workdir/"
ln -s "$modules/node_modules" "$workdir/node_modules"

api_key="typescript-sdk-test-key"
start_real_gateways 2 "$workdir" "$api_key"

MEMGATE_GATEWAYS="$(IFS=,; echo "${gateways[*]}")" MEMGATE_DEV_UPSTREAM="$upstream" \
MEMGATE_DEV_UPSTREAM_API_KEY="$api_key" node --test "$workdir/client.test.mjs" "$@" || {
  for log in "$workdir"/*.err; do echo "== $log" >&2; tail -20 "$log" >&2; done
  exit 1
}
