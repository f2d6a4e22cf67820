#!/usr/bin/env bash
# Runs every check and the whole test suite. Installs what the tests need first.
# The tests start their own redis-servers on free ports; nothing else needs to run.
set -euo pipefail
cd "$(dirname "$0")/.."
export WEIR_EXTRA_PACKAGES="${WEIR_EXTRA_PACKAGES:-} prometheus fonts-dejavu-core"
bash scripts/ensure-deps.sh

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace

# Smoke runs of what people run for figures: the benchmarks (each once, --test mode) and
# the quick start on a small workload.
cargo bench --bench envelope -- --test
cargo bench --bench scripts -- --test
cargo run --quiet --bin weir -- demo --jobs 20000
