#!/usr/bin/env bash
# Provides `kubectl` and `kstatus`, two upstream Kubernetes tools the end-to-end tests run:
#   kubectl  the real kubectl (k8s.io/kubectl, the main of k8s.io/kubernetes cmd/kubectl), for
#            `kubectl auth can-i --list --as=…` and `kubectl wait --for=…` against the test control plane;
#   kstatus  sigs.k8s.io/cli-utils' kstatus (status.Compute, what Flux and kpt use): JSON objects on stdin,
#            one verdict line per object on stdout (see cmd/kstatus/main.go).
#
#   1. If MEMGATE_KUBE_TOOLS names a folder holding both executables, use it.
#   2. Otherwise ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/kube-tools-v<KUBECTL_VERSION>/bin, built once from the Go
#      module next to this script (go.mod + go.sum pin every dependency; Go module proxy only; see README.md).
#      The cache is rebuilt when versions.env, go.mod, go.sum or a .go file changes.
#
# Versions are pinned in versions.env (and go.mod, which must agree). Logs go to stderr; the LAST line of stdout
# is the absolute path of the folder holding both binaries.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${script_dir}/versions.env"
# shellcheck source=../../scripts/lib/cached-build.sh
source "${script_dir}/../../scripts/lib/cached-build.sh"
: "${KUBECTL_VERSION:?versions.env must set KUBECTL_VERSION}"
: "${CLI_UTILS_VERSION:?versions.env must set CLI_UTILS_VERSION}"

if [[ -n "${MEMGATE_KUBE_TOOLS:-}" ]]; then
  for tool in kubectl kstatus; do
    [[ -x "${MEMGATE_KUBE_TOOLS}/${tool}" ]] || {
      echo "kube-tools/provide.sh: MEMGATE_KUBE_TOOLS=${MEMGATE_KUBE_TOOLS} holds no executable ${tool}" >&2
      exit 1
    }
  done
  (cd "${MEMGATE_KUBE_TOOLS}" && pwd)
  exit 0
fi
command -v go >/dev/null || { echo "kube-tools/provide.sh: go is not installed (scripts/lib/provision.sh installs it)" >&2; exit 1; }

kubectl_module_version="v0.${KUBECTL_VERSION#*.}"
for required in "k8s.io/kubectl ${kubectl_module_version}" "sigs.k8s.io/cli-utils v${CLI_UTILS_VERSION}"; do
  # A `require` line of go.mod, in a block or on its own: "<module> <version>".
  awk -v want="${required}" '$1 == "require" { $1 = ""; $0 = $0 } $1 " " $2 == want { found = 1 } END { exit !found }' \
    "${script_dir}/go.mod" || {
    echo "kube-tools/provide.sh: go.mod does not require ${required} (versions.env and go.mod disagree)" >&2
    exit 1
  }
done

# What is built: the pinned versions and every input file, so an edit rebuilds.
sources_hash="$(cd "${script_dir}" && { printf '%s\n' go.mod go.sum; find cmd -name '*.go'; } | LC_ALL=C sort |
  xargs sha256sum | sha256sum | cut -c1-16)"
stamp="kubectl=v${KUBECTL_VERSION} cli-utils=v${CLI_UTILS_VERSION} sources=${sources_hash}"

build_kube_tools() {
  local work="$1"
  # Build a copy: nothing is written into the source tree, and no VCS information is looked for.
  mkdir -p "${work}/src"
  cp -R "${script_dir}/go.mod" "${script_dir}/go.sum" "${script_dir}/cmd" "${work}/src/" || return 1
  cd "${work}/src" || return 1
  local ldflags="-s -w" major="${KUBECTL_VERSION%%.*}" minor build_date
  minor="$(cut -d. -f2 <<<"${KUBECTL_VERSION}")"
  build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # The variables Kubernetes' hack/lib/version.sh sets (gitCommit is unknown for a module build, left as is).
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X ${pkg}.gitVersion=v${KUBECTL_VERSION} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
    ldflags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=${build_date}"
  done
  # go.sum is complete, so the default -mod=readonly suffices (the modules come from the proxy or GOMODCACHE).
  echo "kube-tools/provide.sh: compiling kubectl and kstatus (one go build, shared packages compile once)" >&2
  # (cached_build runs this function as an `if` condition, where set -e does not apply: hence the `|| return 1`.)
  nice_go build -trimpath -ldflags "${ldflags}" -o "${work}/bin/" ./cmd/kubectl ./cmd/kstatus >&2 || return 1

  local reported
  reported="$("${work}/bin/kubectl" version --client -o json 2>&1)"
  grep -q "\"gitVersion\": \"v${KUBECTL_VERSION}\"" <<<"${reported}" || {
    echo "kube-tools/provide.sh: built kubectl reports '${reported}', expected gitVersion v${KUBECTL_VERSION}" >&2
    return 1
  }
  # kstatus on a custom resource whose controller has not seen generation 2 yet, and on a Ready one.
  local sample expected
  sample='{"items": [
    {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "ns", "generation": 2},
     "status": {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "True"}]}},
    {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "b", "namespace": "ns", "generation": 2},
     "status": {"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "True"}]}}]}'
  expected='{"name":"a","namespace":"ns","status":"InProgress","message":"Thing generation is 2, but latest observed generation is 1"}
{"name":"b","namespace":"ns","status":"Current","message":"Resource is Ready"}'
  reported="$("${work}/bin/kstatus" <<<"${sample}" 2>&1)"
  [[ "${reported}" == "${expected}" ]] || {
    echo "kube-tools/provide.sh: built kstatus printed '${reported}', expected '${expected}'" >&2
    return 1
  }
}

bin="$(cached_build "kube-tools-v${KUBECTL_VERSION}" "${stamp}" build_kube_tools)"
echo "${bin}"
