#!/usr/bin/env bash
# Runs the Nexent plugin harness (pytest) against the real `memgate-gateway` binary.
# Self-contained: a venv in the cache folder (reused while requirements.txt is unchanged), the binary
# built with cargo, a dev upstream and a gateway on free loopback ports, the plugin folder written by
# `memgate-gateway write-nexent-plugins`; everything started here is stopped on exit.
# Extra arguments go to pytest.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
# shellcheck source=../../scripts/lib/python-venv.sh
source "$repo/scripts/lib/python-venv.sh"
venv="$(ensure_venv nexent-plugin-venv "$here/requirements.txt")"

cargo build --quiet --manifest-path "$repo/Cargo.toml" -p memgate-gateway --bin memgate-gateway
gateway_bin="$repo/target/debug/memgate-gateway"

workdir="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$workdir"
}
trap cleanup EXIT

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
upstream="127.0.0.1:$(free_port)"
gateway="127.0.0.1:$(free_port)"
closed="127.0.0.1:$(free_port)"   # nothing listens here: the "upstream down" provider
api_key="nexent-plugin-upstream-key-$RANDOM$RANDOM"
caller_token="nexent-plugin-caller-token-$RANDOM$RANDOM"

mkdir -p "$workdir/config" "$workdir/plugins"
provider() { # name origin nexent access
  cat <<YAML
---
apiVersion: memgate.io/v1alpha1
kind: MemoryProvider
metadata: {name: $1, namespace: agents}
spec:
  dialect: {builtin: mem0-oss-rest-2026-08}
  endpoint: {origin: "http://$2", allowInsecureHttp: true}
  credentials: {secretRef: {name: upstream, key: api-key}}
  scope: {userId: repository-memory, agentId: qwen-code}
  timeoutMs: 5000
  nexent: $3
  access: $4
YAML
}
{
  printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: upstream, namespace: agents}\nstringData: {api-key: "%s"}\n' "$api_key"
  printf -- '---\napiVersion: v1\nkind: Secret\nmetadata: {name: callers, namespace: agents}\nstringData: {token: "%s"}\n' "$caller_token"
  bearer='{bearerToken: {secretRef: {name: callers, key: token}}}'
  provider repo-memory "$upstream" '{search: true, ingest: true}' "$bearer"
  provider open-memory "$upstream" '{search: true}' '{anonymous: true}'
  provider down-memory "$closed" '{search: true, ingest: true}' "$bearer"
} > "$workdir/config/providers.yaml"

"$gateway_bin" write-nexent-plugins --config "$workdir/config" --dest "$workdir/plugins" \
  --gateway-url "http://$gateway" > "$workdir/write-report.json" 2> "$workdir/write.err" \
  || { cat "$workdir/write.err" >&2; exit 1; }

"$gateway_bin" dev-upstream --listen "$upstream" --api-key "$api_key" 2> "$workdir/upstream.err" &
pids+=("$!")
"$gateway_bin" serve --config "$workdir/config" --listen "$gateway" 2> "$workdir/gateway.err" &
pids+=("$!")
for _ in $(seq 1 200); do
  curl -sf "http://$gateway/readyz" > /dev/null && break
  kill -0 "${pids[-1]}" 2>/dev/null || { cat "$workdir/gateway.err" >&2; exit 1; }
  sleep 0.1
done
curl -sf "http://$gateway/readyz" > /dev/null || { echo "gateway not ready" >&2; exit 1; }
for _ in $(seq 1 200); do
  curl -sf -H "x-api-key: $api_key" "http://$upstream/memories?user_id=probe" > /dev/null && break
  sleep 0.1
done

status=0
MEMGATE_GATEWAY="$gateway" MEMGATE_GATEWAY_BIN="$gateway_bin" MEMGATE_CONFIG_DIR="$workdir/config" \
MEMGATE_PLUGINS_DIR="$workdir/plugins" MEMGATE_DEV_UPSTREAM="$upstream" MEMGATE_DEV_UPSTREAM_API_KEY="$api_key" \
MEMGATE_CALLER_TOKEN="$caller_token" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here" "$@" || status=$?
# The plugin never logs; the gateway's log must not hold the caller token either.
if grep -q -- "$caller_token" "$workdir/gateway.err"; then echo "caller token in the gateway log" >&2; status=1; fi
exit "$status"
