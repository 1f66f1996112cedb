#!/usr/bin/env bash
# Builds every fuzz target once and runs each for a short budget (the test command's fuzz step).
#
#   fuzz/run.sh                        every target, MEMGATE_FUZZ_SECONDS (default 20) seconds each
#   fuzz/run.sh request_url 600        one target for 10 minutes (a longer run; see README.md)
#
# Needs a nightly toolchain and cargo-fuzz (scripts/lib/provision.sh installs both). Each run starts
# from the committed seeds (fuzz/seeds/<target>, read only) plus a scratch corpus outside the
# repository (MEMGATE_FUZZ_CORPUS, default: a temporary folder, removed afterwards). A failing
# property or crash stops the run with the input saved under fuzz/artifacts/<target>/ and exits
# non-zero; reproduce it with `fuzz/run.sh <target>` after copying the file into fuzz/seeds/<target>/, or
# `cargo +nightly fuzz run -s none -a <target> fuzz/artifacts/<target>/<file>`.
# Builds without a sanitizer (the code under test forbids `unsafe`), with debug assertions, into
# MEMGATE_FUZZ_TARGET_DIR (default ~/.cache/memgate/fuzz-target).
set -euo pipefail
cd "$(dirname "$0")"

seconds="${2:-${MEMGATE_FUZZ_SECONDS:-20}}"
toolchain="${MEMGATE_FUZZ_TOOLCHAIN:-nightly}"
log() { printf 'fuzz: %s\n' "$*" >&2; }

if ! rustup run "${toolchain}" rustc --version >/dev/null 2>&1; then
  log "no ${toolchain} Rust toolchain: install one (rustup toolchain install nightly), or run the test command with MEMGATE_FUZZ=0"
  exit 1
fi
command -v cargo-fuzz >/dev/null || { log "cargo-fuzz is not installed: cargo install --locked cargo-fuzz@0.13.2"; exit 1; }

mapfile -t all < <(cargo "+${toolchain}" fuzz list)
targets=("${all[@]}")
if [[ $# -ge 1 ]]; then targets=("$1"); fi

# The build lives outside the repository (like the Go-built test binaries), so a fresh clone on the
# same machine (CI) reuses the compiled dependencies instead of rebuilding them all with nightly.
target_dir="${MEMGATE_FUZZ_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memgate/fuzz-target}"
flags=(--sanitizer none --debug-assertions --target-dir "${target_dir}")
log "building ${#all[@]} targets with $(rustup run "${toolchain}" rustc --version)"
nice -n "${MEMGATE_BUILD_NICE:-10}" cargo "+${toolchain}" fuzz build "${flags[@]}" >&2

scratch="${MEMGATE_FUZZ_CORPUS:-}"
if [[ -z "${scratch}" ]]; then
  scratch="$(mktemp -d)"
  trap 'rm -rf "${scratch}"' EXIT
fi
passed=0
for target in "${targets[@]}"; do
  mkdir -p "${scratch}/${target}" "seeds/${target}"
  log "${target}: ${seconds} s"
  output="$(cargo "+${toolchain}" fuzz run "${flags[@]}" "${target}" "${scratch}/${target}" "seeds/${target}" -- \
    -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 2>&1)" || {
    printf '%s\n' "${output}" | grep -A4 -m1 'panicked at' >&2 || true
    printf '%s\n' "${output}" | tail -n 25 >&2
    log "${target}: FAILED (input saved under fuzz/artifacts/${target}/)"
    printf 'fuzz: %d passed, 1 failed\n' "${passed}"
    exit 1
  }
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' <<<"${output}" | tail -n 1)"
  coverage="$(sed -n 's/^#[0-9]*.*DONE *cov: \([0-9]*\).*/\1/p' <<<"${output}" | tail -n 1)"
  log "${target}: ok, ${runs:-?} inputs, coverage ${coverage:-?}"
  passed=$((passed + 1))
done
printf 'fuzz: %d passed, 0 failed\n' "${passed}"
