#!/usr/bin/env bash
# The release build of both binaries, exactly as the Dockerfile's build stage runs it (the test command
# runs it too, so the image's binaries are built and checked on every CI run; see
# e2e/tests/container_image.rs). Output: target/release/memgate-gateway and target/release/memgate-operator.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p memgate-gateway -p memgate-operator --bin memgate-gateway --bin memgate-operator
