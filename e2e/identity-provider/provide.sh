#!/usr/bin/env bash
# Provides the Ory Hydra binary that the OIDC tests run as a real OpenID provider (in-memory store).
#
#   1. If MEMGATE_HYDRA names an executable, use it.
#   2. Otherwise use the cache folder ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/hydra-v<version>/bin,
#      building Hydra from Go modules (Go module proxy only) the first time.
#
# Hydra's `DSN=memory` needs its SQLite driver, which is cgo: the build needs a C compiler (cc) and the
# tags `sqlite,sqlite_omit_load_extension` (as Hydra's own Makefile builds it).
# The version is pinned in versions.env next to this script (the Rust tests read the same file).
# Logs go to stderr. The LAST line of stdout is the absolute path of the hydra binary.
# The build happens in a temporary folder next to the cache and is renamed into place only when the binary
# reports the pinned version, so an interrupted build never leaves a half-filled cache.
# The Go commands run under `nice -n ${MEMGATE_BUILD_NICE:-10}`.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${script_dir}/versions.env"
: "${HYDRA_VERSION:?versions.env must set HYDRA_VERSION}"
: "${HYDRA_CLIENT_GO_VERSION:?versions.env must set HYDRA_CLIENT_GO_VERSION}"
: "${HYDRA_POP_VERSION:?versions.env must set HYDRA_POP_VERSION}"

log() { printf 'identity-provider/provide.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
trap 'log "error: line ${LINENO}: \"${BASH_COMMAND}\" failed"' ERR

if [[ -n "${MEMGATE_HYDRA:-}" ]]; then
  [[ -x "${MEMGATE_HYDRA}" ]] || die "MEMGATE_HYDRA=${MEMGATE_HYDRA} is not an executable"
  log "using MEMGATE_HYDRA=${MEMGATE_HYDRA} (its version is not checked)"
  echo "${MEMGATE_HYDRA}"
  exit 0
fi

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/memgate/hydra-v${HYDRA_VERSION}"
bin_dir="${cache_root}/bin"
stamp="hydra=v${HYDRA_VERSION}"
cache_ok() { [[ -x "${bin_dir}/hydra" && "$(cat "${bin_dir}/VERSIONS" 2>/dev/null)" == "${stamp}" ]]; }

if cache_ok; then
  log "using cached ${stamp} in ${bin_dir}"
  echo "${bin_dir}/hydra"
  exit 0
fi

command -v go >/dev/null || die "go is not installed; install Go, or set MEMGATE_HYDRA to a hydra v${HYDRA_VERSION} binary"
# Hydra's in-memory SQLite store is cgo (scripts/lib/provision.sh installs gcc for the test command).
command -v cc >/dev/null || die "no C compiler (cc): Hydra's in-memory SQLite store is cgo; install gcc"

mkdir -p "${cache_root}"
locked=false
if command -v flock >/dev/null; then
  locked=true
  exec 9>"${cache_root}/.lock"
  if ! flock -n 9; then
    log "another build of ${stamp} is running; waiting for it"
    flock 9
  fi
fi
if cache_ok; then
  log "using cached ${stamp} in ${bin_dir} (built by a concurrent run)"
  echo "${bin_dir}/hydra"
  exit 0
fi
if ${locked}; then rm -rf "${cache_root}"/.build.*; fi
work="$(mktemp -d "${cache_root}/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "${work}/bin" "${work}/mod"

nice_go() { nice -n "${MEMGATE_BUILD_NICE:-10}" env CGO_ENABLED=1 go "$@"; }

# Hydra's go.mod replaces its API client with a folder inside its repository and pop with Ory's fork;
# a wrapper module must say the same with published versions.
cat >"${work}/mod/go.mod" <<MOD
module memgate.local/build-hydra

go 1.22

require github.com/ory/hydra/v2 v${HYDRA_VERSION}

replace github.com/ory/hydra-client-go/v2 => github.com/ory/hydra-client-go/v2 v${HYDRA_CLIENT_GO_VERSION}

replace github.com/gobuffalo/pop/v6 => github.com/ory/pop/v6 ${HYDRA_POP_VERSION}
MOD

log "building ${stamp} from Go modules into ${bin_dir} (once per machine; a cold build takes minutes)"
started=$(date +%s)
(
  cd "${work}/mod"
  nice_go get "github.com/ory/hydra/v2@v${HYDRA_VERSION}" >&2
  nice_go build -trimpath -tags sqlite,sqlite_omit_load_extension \
    -ldflags "-s -w -X github.com/ory/hydra/v2/driver/config.Version=v${HYDRA_VERSION}" \
    -o "${work}/bin/hydra" github.com/ory/hydra/v2 >&2
)
reported="$("${work}/bin/hydra" version 2>&1 | tr -s ' ' | head -n 5)"
grep -q "v${HYDRA_VERSION}" <<<"${reported}" || die "built hydra reports '${reported}', expected v${HYDRA_VERSION}"
echo "${stamp}" >"${work}/bin/VERSIONS"
if [[ -e "${bin_dir}" ]]; then mv -T "${bin_dir}" "${work}/outdated-bin"; fi
mv -T "${work}/bin" "${bin_dir}"
log "built ${stamp} in $(($(date +%s) - started)) s; cached in ${bin_dir}"
echo "${bin_dir}/hydra"
