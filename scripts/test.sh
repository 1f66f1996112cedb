#!/usr/bin/env bash
# The project's test command (the README's): everything a change must pass.
# - provides kube-apiserver + etcd for the real-control-plane tests (built once, cached; see
#   e2e/control-plane/README.md), then
# - runs every Rust test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== control plane binaries" >&2
assets=$(e2e/control-plane/provide.sh | tail -n 1)
echo "using kube-apiserver and etcd from ${assets}" >&2

echo "== cargo test" >&2
cargo test --workspace --locked --no-fail-fast
