# Sourced by the end-to-end SDK runners: `start_real_gateways COUNT WORKDIR API_KEY` builds the
# gateway binary, starts a dev upstream (`memgate-gateway dev-upstream`) and COUNT
# `memgate-gateway serve` replicas on one config folder (examples/quickstart/mem0-oss.yaml, pointed
# at that upstream), waits until each answers /readyz, and sets `upstream` (host:port),
# `gateways` (host:port each) and appends every process id to the caller's `pids` array (the caller
# stops them on exit). Logs go to WORKDIR.
start_real_gateways() {
  local count="$1" workdir="$2" api_key="$3" repo gateway port n
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  cargo build --quiet --manifest-path "$repo/Cargo.toml" -p memgate-gateway --bin memgate-gateway
  gateway="$repo/target/debug/memgate-gateway"
  upstream="127.0.0.1:$(free_port)"
  "$gateway" dev-upstream --listen "$upstream" --api-key "$api_key" 2> "$workdir/upstream.err" &
  pids+=("$!")
  # Any HTTP answer (404 on /) means it listens.
  for _ in $(seq 1 100); do
    curl -s -o /dev/null "http://$upstream/" && break
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$workdir/upstream.err" >&2; return 1; }
    sleep 0.1
  done
  curl -s -o /dev/null "http://$upstream/" || { echo "dev upstream not listening" >&2; return 1; }
  mkdir -p "$workdir/config"
  sed -e "s|http://127.0.0.1:18888|http://$upstream|" -e "s|dev-only-key|$api_key|" \
    "$repo/examples/quickstart/mem0-oss.yaml" > "$workdir/config/providers.yaml"
  gateways=()
  for n in $(seq 1 "$count"); do
    port="$(free_port)"
    "$gateway" serve --config "$workdir/config" --listen "127.0.0.1:$port" 2> "$workdir/gateway-$n.err" &
    pids+=("$!")
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$port/readyz" > /dev/null && break
      kill -0 "${pids[-1]}" 2>/dev/null || { cat "$workdir/gateway-$n.err" >&2; return 1; }
      sleep 0.1
    done
    curl -sf "http://127.0.0.1:$port/readyz" > /dev/null || { echo "gateway $n not ready" >&2; return 1; }
    gateways+=("127.0.0.1:$port")
  done
}

# `open_workdir`: sets `workdir` (a fresh temporary folder) and an empty `pids` array, and traps
# EXIT to stop every process in `pids` and remove the folder.
open_workdir() {
  workdir="$(mktemp -d)"
  pids=()
  trap close_workdir EXIT
}

close_workdir() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$workdir"
}

# A free TCP port on 127.0.0.1 (the kernel's choice; released before use).
free_port() {
  "${PYTHON:-python3}" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
