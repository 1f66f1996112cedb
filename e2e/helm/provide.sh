#!/usr/bin/env bash
# Provides the `helm` binary that the chart checks run.
#
#   1. If MEMGATE_HELM names an executable, use it.
#   2. Otherwise ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/helm-v<version>/bin/helm, built once from the Go
#      module helm.sh/helm/v4 (Go module proxy only; about 5 minutes of CPU on 2 cores).
#
# The version is pinned in versions.env next to this script. Logs go to stderr; the LAST line of
# stdout is the absolute path of the helm binary.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${script_dir}/versions.env"
# shellcheck source=../../scripts/lib/cached-build.sh
source "${script_dir}/../../scripts/lib/cached-build.sh"
: "${HELM_VERSION:?versions.env must set HELM_VERSION}"

if [[ -n "${MEMGATE_HELM:-}" ]]; then
  [[ -x "${MEMGATE_HELM}" ]] || { echo "helm/provide.sh: MEMGATE_HELM=${MEMGATE_HELM} is not executable" >&2; exit 1; }
  echo "${MEMGATE_HELM}"
  exit 0
fi
command -v go >/dev/null || { echo "helm/provide.sh: go is not installed (scripts/lib/provision.sh installs it)" >&2; exit 1; }

build_helm() {
  local work="$1"
  mkdir -p "${work}/mod"
  cd "${work}/mod"
  printf 'module memgate.local/build-helm\n\ngo 1.26\n' >go.mod
  nice_go get -tool "helm.sh/helm/v4/cmd/helm@v${HELM_VERSION}" >&2
  nice_go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=v${HELM_VERSION}" \
    -o "${work}/bin/helm" helm.sh/helm/v4/cmd/helm >&2
  local reported
  reported="$("${work}/bin/helm" version --template '{{.Version}}' 2>&1)"
  [[ "${reported}" == "v${HELM_VERSION}" ]] || {
    echo "helm/provide.sh: built helm reports '${reported}', expected v${HELM_VERSION}" >&2
    return 1
  }
}

bin="$(cached_build "helm-v${HELM_VERSION}" "helm=v${HELM_VERSION}" build_helm)"
echo "${bin}/helm"
