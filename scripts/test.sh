#!/usr/bin/env bash
# The project's test command (the README's): everything a change must pass.
#  0. installs what the tests need when it is missing (scripts/lib/provision.sh: redis-server,
#     python3-venv, openssl, curl, Go, Node.js and npm, gcc, and for fuzzing g++, a nightly toolchain and
#     cargo-fuzz; apt-get as root, otherwise it says what to install);
#  1. provides kube-apiserver + etcd for the real-control-plane tests, Jaeger for the trace export
#     test, and the real kubectl and kstatus (e2e/kube-tools: `kubectl auth can-i --list`, `kubectl
#     wait`, cli-utils' kstatus verdicts), each built once from Go modules and cached (see
#     e2e/control-plane/README.md, e2e/trace-backend/provide.sh, e2e/kube-tools/README.md), and the
#     prometheus-operator CRDs with promtool's rule checks (e2e/prometheus-tools/README.md);
#  2. builds the release binaries exactly as the Dockerfile does (scripts/build-release.sh), provides
#     Helm (e2e/helm/provide.sh) and the Python venvs of the end-to-end test, then runs every Rust test
#     of the workspace (unit, contract, real API server, real gateway processes, the chart checks, the
#     platform path end to end on the release binaries, and the container image checked against them);
#  3. runs the official MCP Python SDK against the real gateway binary (gateway/tests/python/run.sh),
#     then the official MCP TypeScript SDK, pinned, installed with npm and cached
#     (gateway/tests/typescript/run.sh), then the official MCP Inspector's CLI in both protocol
#     eras, pinned and cached the same way with the Node.js 22 it needs from the npm registry
#     (gateway/tests/inspector/run.sh);
#  4. loads the Nexent plugin the way Nexent's loader does and drives it through the real gateway
#     (nexent-plugin/tests/run.sh);
#  5. runs the OIDC suite: a real Ory Hydra (built once from Go modules and cached, see
#     e2e/identity-provider/provide.sh) against the gateway, with the MCP Python SDK's OAuth client
#     (gateway/tests/oauth/run.sh);
#  6. runs the README's quickstart once (dev upstream + gateway + one MCP round trip);
#  7. runs every fuzz target for a short budget (fuzz/run.sh; MEMGATE_FUZZ_SECONDS, default 20).
#     MEMGATE_FUZZ=0 skips this step (and its provisioning) and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
# Disk: incremental caches of a whole-suite build are several GiB and only pay off in an edit loop;
# the suite builds without them unless the caller asks otherwise.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== provision" >&2
bash scripts/lib/provision.sh

echo "== control plane binaries" >&2
assets=$(e2e/control-plane/provide.sh | tail -n 1)
echo "using kube-apiserver and etcd from ${assets}" >&2
echo "== identity provider binary" >&2
e2e/identity-provider/provide.sh | tail -n 1 >&2
echo "== helm" >&2
MEMGATE_HELM=$(e2e/helm/provide.sh | tail -n 1); export MEMGATE_HELM
echo "== kubectl and kstatus" >&2
MEMGATE_KUBE_TOOLS=$(e2e/kube-tools/provide.sh | tail -n 1); export MEMGATE_KUBE_TOOLS
echo "== prometheus-operator CRDs and promtool's rule checks" >&2
MEMGATE_PROMETHEUS_TOOLS=$(e2e/prometheus-tools/provide.sh | tail -n 1); export MEMGATE_PROMETHEUS_TOOLS

echo "== release build (the container image's binaries, checked by e2e/tests/container_image.rs)" >&2
./scripts/build-release.sh

echo "== trace backend (Jaeger)" >&2
MEMGATE_JAEGER=$(e2e/trace-backend/provide.sh | tail -n 1)
export MEMGATE_JAEGER
echo "using ${MEMGATE_JAEGER}" >&2

echo "== Python venvs for the end-to-end test (MCP SDK, Nexent harness)" >&2
# shellcheck source=lib/python-venv.sh
source scripts/lib/python-venv.sh
MEMGATE_MCP_PYTHON="$(ensure_venv mcp-python-venv gateway/tests/python/requirements.txt)/bin/python"
MEMGATE_NEXENT_PYTHON="$(ensure_venv nexent-plugin-venv nexent-plugin/tests/requirements.txt)/bin/python"
export MEMGATE_MCP_PYTHON MEMGATE_NEXENT_PYTHON

echo "== cargo test" >&2
cargo test --workspace --locked --no-fail-fast

echo "== MCP Python SDK against the gateway" >&2
bash gateway/tests/python/run.sh

echo "== MCP TypeScript SDK against the gateway" >&2
bash gateway/tests/typescript/run.sh

echo "== MCP Inspector (CLI) against the gateway" >&2
bash gateway/tests/inspector/run.sh

echo "== OIDC against a real identity provider (Ory Hydra)" >&2
bash gateway/tests/oauth/run.sh

echo "== Nexent plugin harness" >&2
bash nexent-plugin/tests/run.sh

echo "== quickstart" >&2
MEMGATE_QUICKSTART_ONCE=1 MEMGATE_QUICKSTART_LISTEN=127.0.0.1:18080 ./scripts/quickstart.sh >/dev/null
echo "quickstart round trip ok" >&2

if [[ "${MEMGATE_FUZZ:-1}" == 0 ]]; then
  echo "== fuzz: SKIPPED because MEMGATE_FUZZ=0 (the fuzz targets did not run)" >&2
else
  echo "== fuzz (each target ${MEMGATE_FUZZ_SECONDS:-20} s)" >&2
  bash fuzz/run.sh
fi

echo "== disk: the workspace target directory holds $(du -sh target 2>/dev/null | cut -f1)" >&2
