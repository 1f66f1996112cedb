#!/usr/bin/env bash
# The OIDC suite: memgate as an MCP authorization resource server against a real OpenID provider.
# Provides Ory Hydra (built once from Go modules, e2e/identity-provider/provide.sh), builds the gateway,
# and runs pytest here with the official MCP Python SDK's venv (gateway/tests/python/requirements.txt).
# Extra arguments go to pytest.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# shellcheck source=../../../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
venv="$(ensure_venv mcp-python-venv "$repo/gateway/tests/python/requirements.txt")"

hydra="$("$repo/e2e/identity-provider/provide.sh" | tail -n 1)"
cargo build --quiet --manifest-path "$repo/Cargo.toml" -p memgate-gateway --bin memgate-gateway

MEMGATE_HYDRA="$hydra" MEMGATE_GATEWAY_BIN="$repo/target/debug/memgate-gateway" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here" "$@"
