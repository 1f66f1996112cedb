#!/usr/bin/env bash
# Runs the official MCP TypeScript SDK (pinned in package-lock.json) against two real
# `memgate-gateway serve` replicas and a dev upstream. Self-contained: the SDK is installed with
# `npm ci` into the cache folder (reused while package-lock.json is unchanged), the processes are
# stopped on exit. Needs node and npm (scripts/lib/provision.sh installs them).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
cache="${MEMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memgate}"
stamp="$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)"
modules="$cache/mcp-typescript-sdk-$stamp"
if [[ ! -d "$modules/node_modules" ]]; then
  # Installed beside, then moved into place: an interrupted install never looks complete. Other
  # versions' folders go, and installs left over from an interrupted run an hour ago.
  mkdir -p "$cache"
  partial="$(mktemp -d "$cache/mcp-typescript-sdk-partial.XXXXXX")"
  cp "$here/package.json" "$here/package-lock.json" "$partial/"
  (cd "$partial" && npm ci --no-audit --no-fund --loglevel=error >&2)
  find "$cache" -maxdepth 1 -name 'mcp-typescript-sdk-*' ! -name 'mcp-typescript-sdk-partial.*' \
    ! -name "mcp-typescript-sdk-$stamp" -exec rm -rf {} +
  find "$cache" -maxdepth 1 -name 'mcp-typescript-sdk-partial.*' -mmin +60 -exec rm -rf {} +
  mv -T "$partial" "$modules" 2>/dev/null || rm -rf "$partial"
fi

workdir="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$workdir"
}
trap cleanup EXIT

# ES modules resolve packages next to the importing file: the test runs from the work folder,
# beside a link to the installed packages.
cp "$here/client.test.mjs" "$workdir/"
ln -s "$modules/node_modules" "$workdir/node_modules"

# shellcheck source=../../../scripts/lib/real-gateway.sh
source "$repo/scripts/lib/real-gateway.sh"
api_key="typescript-sdk-test-key"
start_real_gateways 2 "$workdir" "$api_key"

MEMGATE_GATEWAYS="$(IFS=,; echo "${gateways[*]}")" MEMGATE_DEV_UPSTREAM="$upstream" \
MEMGATE_DEV_UPSTREAM_API_KEY="$api_key" node --test "$workdir/client.test.mjs" "$@" || {
  for log in "$workdir"/*.err; do echo "== $log" >&2; tail -20 "$log" >&2; done
  exit 1
}
