#!/usr/bin/env bash
# Runs the official MCP Python SDK against two `mcp_test_server` processes (two "replicas").
# Self-contained: a venv in the cache folder (reused when requirements.txt is unchanged), the
# example built with cargo, both servers stopped on exit. Extra arguments go to pytest.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# shellcheck source=../../../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
venv="$(ensure_venv mcp-python-venv "$here/requirements.txt")"

cargo build --quiet --manifest-path "$repo/Cargo.toml" -p memgate-gateway --example mcp_test_server
server="$repo/target/debug/examples/mcp_test_server"

# shellcheck source=../../../scripts/lib/real-gateway.sh
source "$repo/scripts/lib/real-gateway.sh"
open_workdir

addresses=()
for n in 1 2; do
  "$server" > "$workdir/server-$n.out" 2> "$workdir/server-$n.err" &
  pids+=("$!")
  for _ in $(seq 1 100); do
    grep -q '^MCP_TEST_SERVER_LISTENING=' "$workdir/server-$n.out" && break
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$workdir/server-$n.err" >&2; exit 1; }
    sleep 0.1
  done
  address="$(sed -n 's/^MCP_TEST_SERVER_LISTENING=//p' "$workdir/server-$n.out")"
  [[ -n "$address" ]] || { echo "mcp_test_server $n did not start" >&2; exit 1; }
  addresses+=("$address")
done

# The real binary: a dev upstream and two `memgate-gateway serve` replicas on one config folder.
api_key="python-sdk-test-key"
start_real_gateways 2 "$workdir" "$api_key"

MEMGATE_GATEWAYS="$(IFS=,; echo "${gateways[*]}")" MEMGATE_DEV_UPSTREAM="$upstream" \
MEMGATE_DEV_UPSTREAM_API_KEY="$api_key" \
MCP_TEST_SERVERS="$(IFS=,; echo "${addresses[*]}")" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here" "$@"
