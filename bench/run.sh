#!/usr/bin/env bash
# The benchmark command (README "Benchmarks"): one run, every figure of issue 12 side by side.
#   1. installs what it needs when missing (scripts/lib/provision.sh with wrk added), provides
#      kube-apiserver + etcd (built once from Go modules and cached, as for the tests);
#   2. builds the release binaries exactly as the Dockerfile does (scripts/build-release.sh) and
#      measures copies of those, so the figures are the image's binaries';
#   3. the gateway benchmark (gateway/benches/throughput): direct vs Nexent search vs MCP at 1 and
#      32 connections with wrk, peak RSS under load, idle RSS/CPU with 1/100/1000 providers, sizes;
#   4. the operator scale benchmark (operator/benches/scale) on a real kube-apiserver + etcd.
# The tables go to stdout, progress to stderr. Benchmarks are not tests: nothing here passes or
# fails on a figure; a target missed is printed as MISSED.
set -euo pipefail
cd "$(dirname "$0")/.."

# wrk on top of the test needs; the fuzz toolchain (nightly, cargo-fuzz) is not needed here.
MEMGATE_FUZZ=0 MEMGATE_PROVISION_BENCH=1 bash scripts/lib/provision.sh
assets=$(e2e/control-plane/provide.sh | tail -n 1)
export KUBEBUILDER_ASSETS="${assets}"

echo "== release build" >&2
./scripts/build-release.sh
release=$(mktemp -d)
trap 'rm -rf "${release}"' EXIT
cp target/release/memgate-gateway target/release/memgate-operator "${release}/"
export MEMGATE_RELEASE_DIR="${release}"

echo "# memgate benchmarks, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo
echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(free -g | awk '/^Mem:/ {print $2}') GiB, $(uname -sr); load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(wrk --version 2>&1 | head -n 1 | cut -d' ' -f1-2)"

echo "== gateway benchmark" >&2
cargo bench --locked -p memgate-gateway --bench throughput

echo "== operator scale benchmark" >&2
cargo bench --locked -p memgate-operator --bench scale

# cargo bench linked its own builds (dev-dependency features unified) to target/release; put the
# image's binaries back for the tests that check them.
./scripts/build-release.sh >&2
