# Sourced by the scripts that provide tools the tests run (helm, …): build a tool once per machine into
# ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/<name>/bin and reuse it afterwards.
#
#   cached_build NAME STAMP BUILD_FUNCTION
#
# prints the cache's bin folder. When bin/VERSIONS already holds STAMP nothing is built. Otherwise
# BUILD_FUNCTION runs with one argument, a fresh empty work folder, and must leave the finished
# binaries in <work>/bin; that folder is then renamed into place, so an interrupted build never leaves
# a half-filled cache. Builds of one NAME are serialised with flock (a second caller waits, then reuses
# the result). Logs go to stderr.

cached_build() {
  local name="$1" stamp="$2" build_function="$3"
  local root="${XDG_CACHE_HOME:-$HOME/.cache}/memgate/${name}"
  local bin="${root}/bin"
  _cached_build_ok() { [[ "$(cat "${bin}/VERSIONS" 2>/dev/null)" == "${stamp}" ]]; }
  if _cached_build_ok; then
    printf 'cached-build: using cached %s in %s\n' "${stamp}" "${bin}" >&2
    echo "${bin}"
    return 0
  fi
  mkdir -p "${root}"
  local lock_fd
  exec {lock_fd}>"${root}/.lock"
  if command -v flock >/dev/null && ! flock -n "${lock_fd}"; then
    printf 'cached-build: another build of %s is running; waiting for it\n' "${stamp}" >&2
    flock "${lock_fd}"
  fi
  if _cached_build_ok; then
    exec {lock_fd}>&-
    echo "${bin}"
    return 0
  fi
  rm -rf "${root}"/.build.*
  local work started
  work="$(mktemp -d "${root}/.build.XXXXXX")"
  mkdir -p "${work}/bin"
  started=$(date +%s)
  printf 'cached-build: building %s into %s (once per machine)\n' "${stamp}" "${bin}" >&2
  if ! ( "${build_function}" "${work}" ); then
    rm -rf "${work}"
    exec {lock_fd}>&-
    printf 'cached-build: building %s failed\n' "${stamp}" >&2
    return 1
  fi
  echo "${stamp}" >"${work}/bin/VERSIONS"
  if [[ -e "${bin}" ]]; then mv -T "${bin}" "${work}/outdated-bin"; fi
  mv -T "${work}/bin" "${bin}"
  rm -rf "${work}"
  exec {lock_fd}>&-
  printf 'cached-build: built %s in %s s\n' "${stamp}" "$(($(date +%s) - started))" >&2
  echo "${bin}"
}

# `go` at low priority (MEMGATE_BUILD_NICE, default 10), static unless CGO_ENABLED is set.
nice_go() { nice -n "${MEMGATE_BUILD_NICE:-10}" env CGO_ENABLED="${CGO_ENABLED:-0}" go "$@"; }
