#!/usr/bin/env bash
# Runs every check and the whole test suite. Installs what the tests need first.
# The tests start their own redis-servers on free ports; nothing else needs to run.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's start, with the seconds since this script began, on stderr: where CI spends
# its time.
step() { echo "== ${SECONDS}s: $*" >&2; }
step "dependencies"
export WEIR_EXTRA_PACKAGES="${WEIR_EXTRA_PACKAGES:-} prometheus fonts-dejavu-core chromium"
export WEIR_CARGO_TOOLS="${WEIR_CARGO_TOOLS:-} cargo-deny"
bash scripts/ensure-deps.sh
export PATH="$PWD/target/tools/venv/bin:$PATH"

step "format"
cargo fmt --all -- --check
# Licenses, banned crates and sources of every dependency (deny.toml). Advisories need the
# RustSec database, which a release fetches (docs/security.md).
step "cargo deny"
cargo fetch --locked --quiet
cargo deny --offline check licenses bans sources

# Dashboards: generated from dashboards/generate.py, type-checked against Grafana's
# schema. (tests/observability.rs checks their queries against a real Prometheus.)
step "dashboards"
python3 dashboards/generate.py >/dev/null
git diff --exit-code -- dashboards/*.json || { echo "dashboards/*.json differ from generate.py's output" >&2; exit 1; }
(cd dashboards/schema-check && npm ci --silent --no-audit --no-fund && npm run --silent check)
step "clippy"
cargo clippy --workspace --all-targets -- -D warnings
# The library without its default features: it and every target that needs no feature
# (unit tests, the limiter simulation, the examples) compile and lint clean, and it pulls
# none of the crates of the CLI, the HTTP handler, the exporter, the embedded server or
# simd-json.
step "without default features"
cargo clippy --no-default-features --all-targets -- -D warnings
lib_deps=$(cargo tree -p weir --no-default-features -e normal --prefix none)
for crate in clap indicatif tracing-subscriber reqwest metrics-exporter-prometheus tempfile simd-json; do
  if grep -q "^$crate v" <<<"$lib_deps"; then
    echo "weir without default features depends on $crate" >&2
    exit 1
  fi
done
step "rustdoc"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps

# The oldest Rust weir promises (Cargo.toml's rust-version) type-checks the library and the
# binary, what a user builds (check, not build, and no dev-dependencies: a cold build of
# every target at 1.88 took 13 minutes here). Its own target directory keeps the two
# toolchains from rebuilding each other's artifacts.
step "msrv check"
msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "Cargo.toml declares no rust-version" >&2; exit 1; }
rustup run "$msrv" rustc --version >/dev/null 2>&1 || rustup toolchain install "$msrv" --profile minimal
CARGO_TARGET_DIR=target/msrv cargo +"$msrv" check --workspace --lib --bins --locked

# The producer packages in clients/ (a venv under target/clients, `npm ci`), for
# tests/clients.rs, which drains what they enqueue with a real `weir work`.
step "client packages"
bash scripts/ensure-clients.sh
step "cargo test"
cargo test --workspace --no-fail-fast

# The web UI in a real browser: Debian's chromium (/usr/bin/chromium) driven by
# playwright-core (no browser download), against a real redis-server, `weir work` and
# `weir ui` (tests/ui/browser/ui.test.mjs; WEIR_UI_SCREENSHOTS=docs/ui rewrites the
# screenshots of docs/ui).
step "doc blocks and browser"
cargo build --quiet --bin weir
# Every sh, python, js and rust block of the README, docs/ and clients/*/README.md, run
# against a private redis-server with this weir binary and the client packages; a block
# that cannot run here carries a marker saying why (scripts/doc-blocks.py).
python3 scripts/doc-blocks.py
(cd tests/ui/browser && npm ci --silent --no-audit --no-fund && WEIR_BIN="$PWD/../../../target/debug/weir" npm test --silent)

# Smoke runs of what people run for figures: the benchmarks, each once (criterion's test
# mode, built like the tests, with the workspace's features, so the tests' build serves:
# `cargo bench` builds everything optimized, minutes more here) and the quick start on a
# small workload.
step "benchmark smoke runs"
cargo test --workspace --bench envelope --bench scripts --bench limiter --bench producer
step "demo"
cargo run --quiet --bin weir -- demo --jobs 20000
# The mixed soak, small: two adaptive per-key consumers, 429s and 500s, two kill -9s and
# limit changes; every job acked, none dead, nothing left (scripts/soak.sh runs the long one).
step "soak"
WEIR_BIN=target/debug/weir SOAK_JOBS=2000 SOAK_CAP=300 bash scripts/soak.sh
# weir against the bare reliable queue, small (about 10 s in a debug build).
step "loadtest drain"
cargo run --quiet -p weir-loadtest -- drain --compare-bare --jobs 20000 --reps 1 --quiet >/dev/null
# One limiter scenario, a fifth as long (about 10 s in a debug build): 429s with
# Retry-After for 2 s, every job acked (`make scenarios` runs the suite).
step "loadtest scenario"
cargo run --quiet -p weir-loadtest -- scenarios --quick --only retry-after-storm --quiet >/dev/null
step "done"
