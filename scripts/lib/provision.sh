#!/usr/bin/env bash
# Installs what memgate's tests need on this machine, and nothing else. Called by
# ./scripts/test.sh and .ci/run; safe to run again (it installs only what is missing).
#
# One list, one function per kind of package manager. To add a need, append one line to NEEDS:
#   "<kind>:<package>:<check>"   kind: apt (Debian packages; more kinds get their own function)
#                                package: what the kind installs
#                                check: a shell command that succeeds when the need is met
# Nothing is installed when every check passes. When something is missing and this is not root
# or there is no apt-get, it says what to install and fails.
#
# MEMGATE_PROVISION=0 skips all of it (for machines provisioned otherwise).
set -euo pipefail

NEEDS=(
  "apt:redis-server:test -x /usr/bin/redis-server"             # ingest ledger tests start their own Redis
  "apt:python3-venv:python3 -m venv --help"                     # cached venvs of the Python test suites
  "apt:openssl:command -v openssl"                              # control-plane certificates
  "apt:curl:command -v curl"                                    # readiness checks of the test scripts
  # Go >= 1.21 builds kube-apiserver and etcd once (it fetches the newer Go they need by itself);
  # Debian 12's golang-go is 1.19: there, install a newer Go first (the check then says so).
  "apt:golang-go:v=\$(go env GOVERSION 2>/dev/null) && [ \"\$(printf '%s\n' go1.21 \"\$v\" | sort -V | head -n 1)\" = go1.21 ]"
  "apt:nodejs:command -v node"                                  # the Qwen Code text-parity test
  "apt:gcc:command -v cc"                                       # Hydra's SQLite store is cgo (OIDC tests)
)

log() { printf 'provision: %s\n' "$*" >&2; }

# Debian packages: one apt-get run for everything missing.
install_apt() {
  if [[ $# -eq 0 ]]; then return 0; fi
  if ! command -v apt-get >/dev/null; then
    log "missing: $* (no apt-get here: install them with your package manager)"
    return 1
  fi
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      log "missing: $* (not root and no password-less sudo: run 'apt-get install $*' as root)"
      return 1
    fi
  fi
  log "installing with apt-get: $*"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$@" >&2
}

provision() {
  if [[ "${MEMGATE_PROVISION:-1}" == 0 ]]; then
    log "skipped (MEMGATE_PROVISION=0)"
    return 0
  fi
  local apt=() need kind package check
  for need in "${NEEDS[@]}"; do
    IFS=: read -r kind package check <<<"$need"
    if bash -c "$check" >/dev/null 2>&1; then continue; fi
    case "$kind" in
      apt) apt+=("$package") ;;
      *) log "unknown kind '$kind' for $package"; return 1 ;;
    esac
  done
  install_apt "${apt[@]}"
  # Verify: every check must pass now.
  local failed=0
  for need in "${NEEDS[@]}"; do
    IFS=: read -r kind package check <<<"$need"
    if ! bash -c "$check" >/dev/null 2>&1; then
      log "still missing after install: $package ($check)"
      failed=1
    fi
  done
  return "$failed"
}

provision
