#!/usr/bin/env bash
# Provides the Jaeger binary that the gateway's OpenTelemetry export test sends spans to.
#
#   1. If MEMGATE_JAEGER names an executable, use it (its version is not checked).
#   2. Otherwise use the cache ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/jaeger-v<version>/bin/jaeger,
#      building it from Go modules (Go module proxy only) the first time.
#
# The version is pinned in versions.env next to this script. Logs go to stderr; the LAST line of stdout
# is the absolute path of the binary. The build happens in a temporary folder next to the cache and is
# renamed into place only when the binary runs, so an interrupted build never leaves a half-filled
# cache; a lock file makes a concurrent second run wait and reuse the result. The Go commands run under
# `nice -n ${MEMGATE_BUILD_NICE:-10}`; GOCACHE/GOMODCACHE keep their defaults.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${script_dir}/versions.env"
: "${JAEGER_VERSION:?versions.env must set JAEGER_VERSION}"

log() { printf 'trace-backend/provide.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
trap 'log "error: line ${LINENO}: \"${BASH_COMMAND}\" failed"' ERR

if [[ -n "${MEMGATE_JAEGER:-}" ]]; then
  [[ -x "${MEMGATE_JAEGER}" ]] || die "MEMGATE_JAEGER=${MEMGATE_JAEGER} is not an executable file"
  log "using MEMGATE_JAEGER=${MEMGATE_JAEGER} (its version is not checked against versions.env)"
  echo "${MEMGATE_JAEGER}"
  exit 0
fi

stamp="jaeger=v${JAEGER_VERSION}"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/memgate/jaeger-v${JAEGER_VERSION}"
bin_dir="${cache_root}/bin"
cache_ok() { [[ -x "${bin_dir}/jaeger" && "$(cat "${bin_dir}/VERSIONS" 2>/dev/null)" == "${stamp}" ]]; }

if cache_ok; then
  log "using cached ${stamp} in ${bin_dir}"
  echo "${bin_dir}/jaeger"
  exit 0
fi

command -v go >/dev/null || die "go is not installed; install Go 1.21 or later (it fetches the Go that Jaeger needs by itself), or set MEMGATE_JAEGER to a jaeger binary"

mkdir -p "${cache_root}"
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
  echo "${bin_dir}/jaeger"
  exit 0
fi

if ${locked}; then rm -rf "${cache_root}"/.build.*; fi
work="$(mktemp -d "${cache_root}/.build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "${work}/bin" "${work}/module"

nice_go() { nice -n "${MEMGATE_BUILD_NICE:-10}" env CGO_ENABLED=0 go "$@"; }

log "building ${stamp} from Go modules into ${bin_dir} (once per machine; a cold build takes several minutes)"
started=$(date +%s)
# A wrapper module that requires Jaeger as a tool (Jaeger's own replace directives do not apply here).
cat >"${work}/module/go.mod" <<GOMOD
module memgate.local/build-jaeger

go 1.24
GOMOD
(
  cd "${work}/module"
  log "resolving github.com/jaegertracing/jaeger/cmd/jaeger@v${JAEGER_VERSION}"
  nice_go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@v${JAEGER_VERSION}" >&2
  log "compiling"
  nice_go build -trimpath \
    -ldflags "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=v${JAEGER_VERSION}" \
    -o "${work}/bin/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger >&2
)
reported="$("${work}/bin/jaeger" version 2>/dev/null | tail -n 1)"
[[ "${reported}" == *"\"gitVersion\":\"v${JAEGER_VERSION}\""* ]] || die "the built jaeger reports '${reported}', expected gitVersion v${JAEGER_VERSION}"
echo "${stamp}" >"${work}/bin/VERSIONS"

if [[ -e "${bin_dir}" ]]; then
  mv -T "${bin_dir}" "${work}/outdated-bin"
fi
mv -T "${work}/bin" "${bin_dir}"
log "built ${stamp} in $(($(date +%s) - started)) s; cached in ${bin_dir}"
echo "${bin_dir}/jaeger"
