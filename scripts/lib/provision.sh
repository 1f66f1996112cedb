#!/usr/bin/env bash
# Installs what memgate's tests need on this machine, and nothing else. Called by
# ./scripts/test.sh and .ci/run; safe to run again (it installs only what is missing).
#
# One list, one function per kind of package manager. To add a need, append one line to NEEDS:
#   "<kind>:<package>:<check>"   kind: apt (Debian packages), rustup (a Rust toolchain),
#                                      cargo (a tool from crates.io, `cargo install --locked`)
#                                package: what the kind installs (cargo: name@version)
#                                check: a shell command that succeeds when the need is met
# Nothing is installed when every check passes. When something is missing and this is not root
# or there is no apt-get / rustup / cargo, it says what to install and fails.
#
# The fuzz step (fuzz/run.sh) needs a nightly Rust toolchain and cargo-fuzz. Without nightly
# rustup installs it (`rustup toolchain install nightly --profile minimal`, from the Rust project's
# own servers); where that cannot work (no rustup, no network to them), provisioning fails and says
# so: install a nightly toolchain by hand, or run the test command with MEMGATE_FUZZ=0, which skips
# the fuzz step and its needs and prints that it did (never silently).
#
# MEMGATE_PROVISION=0 skips all of it (for machines provisioned otherwise).
# MEMGATE_PROVISION_SCOPE=build installs only the C compiler and make the release build needs.
set -euo pipefail

NEEDS=(
  "apt:redis-server:test -x /usr/bin/redis-server"             # ingest ledger tests start their own Redis
  "apt:python3-venv:python3 -m venv --help"                     # cached venvs of the Python test suites
  "apt:openssl:command -v openssl"                              # control-plane certificates
  "apt:curl:command -v curl"                                    # readiness checks of the test scripts
  "apt:iproute2:command -v ip"                                  # a private network namespace (destination guard test)
  "apt:util-linux:command -v unshare"                           # private mount/network namespaces of that test
  # Go >= 1.21 builds kube-apiserver and etcd once (it fetches the newer Go they need by itself);
  # Debian 12's golang-go is 1.19: there, install a newer Go first (the check then says so).
  "apt:golang-go:v=\$(go env GOVERSION 2>/dev/null) && [ \"\$(printf '%s\n' go1.21 \"\$v\" | sort -V | head -n 1)\" = go1.21 ]"
  # Node.js >= 20 (the MCP TypeScript SDK v2 needs it) runs the Qwen Code text-parity test and the
  # TypeScript SDK test; Debian 12's nodejs is 18: there, install a newer Node.js first (the check
  # then says so).
  "apt:nodejs:node -e 'process.exit(Number(process.versions.node.split(\".\")[0] < 20))'"
  "apt:npm:command -v npm"                                      # installs the pinned MCP TypeScript SDK (gateway/tests/typescript)
  "apt:gcc:command -v cc"                                       # Hydra's SQLite store is cgo (OIDC tests); jemalloc's C build
  "apt:make:command -v make"                                    # jemalloc's build (tikv-jemalloc-sys, the gateway's allocator)
)
# MEMGATE_PROVISION_SCOPE=build: only what building the binaries needs beyond Rust (the README's run
# command, scripts/quickstart.sh).
if [[ "${MEMGATE_PROVISION_SCOPE:-test}" == build ]]; then
  NEEDS=("apt:gcc:command -v cc" "apt:make:command -v make")
  MEMGATE_FUZZ=0
  MEMGATE_PROVISION_BENCH=0
fi
if [[ "${MEMGATE_FUZZ:-1}" != 0 ]]; then
  NEEDS+=(
    "apt:g++:command -v c++"                                    # libFuzzer (built by libfuzzer-sys)
    "rustup:nightly:rustup run nightly rustc --version"         # cargo fuzz instruments with nightly flags
    "cargo:cargo-fuzz@0.13.2:cargo fuzz --version"              # the fuzz step (fuzz/run.sh)
  )
fi

# The benchmark command (bench/run.sh) also needs the load generator.
if [[ "${MEMGATE_PROVISION_BENCH:-0}" == 1 ]]; then
  NEEDS+=("apt:wrk:command -v wrk")                             # HTTP load generator of bench/run.sh
  NEEDS+=("apt:nginx-light:test -x /usr/sbin/nginx")            # the plain reverse-proxy hop the gateway is read against
fi

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

# Rust toolchains, through rustup.
install_rustup() {
  local toolchain
  for toolchain in "$@"; do
    if ! command -v rustup >/dev/null; then
      log "missing: Rust toolchain ${toolchain} (no rustup here: install it, or set MEMGATE_FUZZ=0 to run the tests without the fuzz step)"
      return 1
    fi
    log "installing Rust toolchain ${toolchain} with rustup"
    rustup toolchain install "${toolchain}" --profile minimal >&2 || {
      log "could not install Rust toolchain ${toolchain}: install it by hand, or set MEMGATE_FUZZ=0 to run the tests without the fuzz step"
      return 1
    }
  done
}

# Tools from crates.io, pinned (name@version), built with their own lock files.
install_cargo() {
  local crate
  for crate in "$@"; do
    log "installing ${crate} with cargo install --locked"
    cargo install --locked "${crate}" >&2 || { log "could not install ${crate} from crates.io"; return 1; }
  done
}

provision() {
  if [[ "${MEMGATE_PROVISION:-1}" == 0 ]]; then
    log "skipped (MEMGATE_PROVISION=0)"
    return 0
  fi
  local apt=() toolchains=() crates=() need kind package check
  for need in "${NEEDS[@]}"; do
    IFS=: read -r kind package check <<<"$need"
    if bash -c "$check" >/dev/null 2>&1; then continue; fi
    case "$kind" in
      apt) apt+=("$package") ;;
      rustup) toolchains+=("$package") ;;
      cargo) crates+=("$package") ;;
      *) log "unknown kind '$kind' for $package"; return 1 ;;
    esac
  done
  install_apt "${apt[@]}"
  install_rustup "${toolchains[@]}"
  install_cargo "${crates[@]}"
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
