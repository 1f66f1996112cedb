#!/usr/bin/env bash
# Provides the kube-apiserver and etcd binaries that the memgate-e2e test control plane runs.
#
#   1. If KUBEBUILDER_ASSETS names a folder holding both (the envtest convention), use it.
#   2. Otherwise use the cache folder ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/k8s-v<version>/bin,
#      building both from Go modules (Go module proxy only) the first time.
#
# Versions are pinned in versions.env next to this script (the Rust crate reads the same file).
# Logs go to stderr. The LAST line of stdout is the absolute folder holding both binaries.
# A build happens in a temporary folder next to the cache and is renamed into place only when both binaries
# work, so an interrupted build never leaves a half-filled cache. GOCACHE/GOMODCACHE keep their defaults.
# The Go commands run under `nice -n ${MEMGATE_BUILD_NICE:-10}`.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${script_dir}/versions.env"
: "${KUBERNETES_VERSION:?versions.env must set KUBERNETES_VERSION}"
: "${ETCD_VERSION:?versions.env must set ETCD_VERSION}"

log() { printf 'provide.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
trap 'log "error: line ${LINENO}: \"${BASH_COMMAND}\" failed"' ERR

has_both() { [[ -x "$1/kube-apiserver" && -x "$1/etcd" ]]; }

stamp="kubernetes=v${KUBERNETES_VERSION} etcd=v${ETCD_VERSION}"

# 1. envtest convention.
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if has_both "${KUBEBUILDER_ASSETS}"; then
    assets="$(cd "${KUBEBUILDER_ASSETS}" && pwd)"
    log "using KUBEBUILDER_ASSETS=${assets} (versions there are not checked against versions.env)"
    echo "${assets}"
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS} does not hold both kube-apiserver and etcd; using the cache instead"
fi

# 2. The cache folder for the pinned version.
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/memgate/k8s-v${KUBERNETES_VERSION}"
bin_dir="${cache_root}/bin"

cache_ok() { has_both "${bin_dir}" && [[ "$(cat "${bin_dir}/VERSIONS" 2>/dev/null)" == "${stamp}" ]]; }

if cache_ok; then
  log "using cached ${stamp} in ${bin_dir}"
  echo "${bin_dir}"
  exit 0
fi

command -v go >/dev/null || die "go is not installed; install Go (1.21 or later fetches the Go that Kubernetes needs by itself), or set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd"

mkdir -p "${cache_root}"
# One build at a time per version; a second caller waits and then reuses the result.
locked=false
if command -v flock >/dev/null; then
  locked=true
  exec 9>"${cache_root}/.lock"
  if ! flock -n 9; then
    log "another build of ${stamp} is running; waiting for it"
    flock 9
  fi
else
  log "flock not found: not guarding against a concurrent build"
fi
if cache_ok; then
  log "using cached ${stamp} in ${bin_dir} (built by a concurrent run)"
  echo "${bin_dir}"
  exit 0
fi

# Holding the lock, any build folder left here is from an interrupted run.
if ${locked}; then rm -rf "${cache_root}"/.build.*; fi
work="$(mktemp -d "${cache_root}/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "${work}/bin"

nice_go() { nice -n "${MEMGATE_BUILD_NICE:-10}" env CGO_ENABLED=0 go "$@"; }

log "building ${stamp} from Go modules into ${bin_dir} (once per machine; a cold build takes many minutes)"
started=$(date +%s)

# --- etcd: a wrapper module that requires the server module (its own replaces are relative and ignored).
etcd_started=$(date +%s)
mkdir -p "${work}/etcd"
cat >"${work}/etcd/go.mod" <<EOF
module memgate.local/build-etcd

go 1.26
EOF
(
  cd "${work}/etcd"
  log "etcd: resolving go.etcd.io/etcd/server/v3@v${ETCD_VERSION}"
  nice_go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2
  log "etcd: compiling"
  nice_go build -trimpath \
    -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v${ETCD_VERSION}" \
    -o "${work}/bin/etcd" go.etcd.io/etcd/server/v3 >&2
)
log "etcd: built in $(($(date +%s) - etcd_started)) s"

# --- kube-apiserver: k8s.io/kubernetes requires its staging modules at v0.0.0 with relative replaces,
# so a wrapper module replaces every one of them with its published tag v0.<minor>.<patch>.
kube_started=$(date +%s)
kube_tag="v${KUBERNETES_VERSION}"
staging_tag="v0.${KUBERNETES_VERSION#*.}"
mkdir -p "${work}/kube"
kube_gomod="$(cd "${work}/kube" && go mod download -json "k8s.io/kubernetes@${kube_tag}" |
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[[ -f "${kube_gomod}" ]] || die "could not download k8s.io/kubernetes@${kube_tag} from the Go module proxy"
staging_modules="$(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "${kube_gomod}")"
[[ -n "${staging_modules}" ]] || die "found no staging replaces in ${kube_gomod}"
{
  echo "module memgate.local/build-kube-apiserver"
  echo
  grep -E '^(go|godebug) ' "${kube_gomod}"
  echo
  echo "require k8s.io/kubernetes ${kube_tag}"
  echo
  echo "replace ("
  for m in ${staging_modules}; do echo "	${m} => ${m} ${staging_tag}"; done
  echo ")"
} >"${work}/kube/go.mod"
log "kube-apiserver: wrapper module replaces $(wc -w <<<"${staging_modules}") staging modules with ${staging_tag}"
ldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X ${pkg}.gitVersion=${kube_tag}"
  ldflags+=" -X ${pkg}.gitMajor=${KUBERNETES_VERSION%%.*}"
  ldflags+=" -X ${pkg}.gitMinor=$(cut -d. -f2 <<<"${KUBERNETES_VERSION}")"
  ldflags+=" -X ${pkg}.gitTreeState=clean"
  ldflags+=" -X ${pkg}.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done
(
  cd "${work}/kube"
  log "kube-apiserver: resolving k8s.io/kubernetes/cmd/kube-apiserver@${kube_tag}"
  nice_go get "k8s.io/kubernetes/cmd/kube-apiserver@${kube_tag}" >&2
  log "kube-apiserver: compiling"
  nice_go build -trimpath -ldflags "${ldflags}" -o "${work}/bin/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
)
log "kube-apiserver: built in $(($(date +%s) - kube_started)) s"

# --- Check what was built before it enters the cache.
kube_reported="$("${work}/bin/kube-apiserver" --version 2>&1)"
etcd_reported="$("${work}/bin/etcd" --version 2>&1)"
etcd_reported="${etcd_reported%%$'\n'*}"
[[ "${kube_reported}" == "Kubernetes ${kube_tag}" ]] || die "built kube-apiserver reports '${kube_reported}', expected 'Kubernetes ${kube_tag}'"
[[ "${etcd_reported}" == "etcd Version: ${ETCD_VERSION}" ]] || die "built etcd reports '${etcd_reported}', expected 'etcd Version: ${ETCD_VERSION}'"
echo "${stamp}" >"${work}/bin/VERSIONS"

# --- Atomic install: rename the finished folder into place (an outdated one is moved aside first).
if [[ -e "${bin_dir}" ]]; then
  mv -T "${bin_dir}" "${work}/outdated-bin"
fi
mv -T "${work}/bin" "${bin_dir}"
log "built ${stamp} in $(($(date +%s) - started)) s total; cached in ${bin_dir}"
echo "${bin_dir}"
