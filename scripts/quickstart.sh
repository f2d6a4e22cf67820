#!/usr/bin/env bash
# The quick start: installs redis-server if missing, builds weir (release), starts a
# private redis-server on a free port in a temp dir, enqueues 200,000 no-op jobs in bulk,
# drains them with the `weir work` consumer and prints both rates.
# Extra arguments go to `weir demo` (e.g. --jobs 1000000 --concurrency 512).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-deps.sh
cargo build --release --bin weir
exec ./target/release/weir demo "$@"
