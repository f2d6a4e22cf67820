#!/usr/bin/env bash
# Installs the client packages for tests/clients.rs and tests/python_worker.rs, if missing
# or changed: clients/python into a venv under target/clients/venv (`pip install
# clients/python`, as a user would: maturin builds its native part, here with the dev
# profile into weir's own target/, which reuses weir's compiled crates), and clients/node's
# dependencies (`npm ci`). Quiet and quick when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/clients/venv
# The native part builds weir itself: its sources count too.
stamp=$(cat clients/python/pyproject.toml clients/python/weir_producer/*.py clients/python/weir/*.py \
  clients/python/native/Cargo.toml Cargo.toml Cargo.lock \
  $(find clients/python/native/src src -type f | sort) | sha1sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.weir-stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "installing clients/python into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  MATURIN_PEP517_ARGS="--profile dev" \
    "$venv/bin/pip" install --quiet --disable-pip-version-check clients/python
  echo "$stamp" >"$venv/.weir-stamp"
fi

# npm ci writes node_modules/.package-lock.json; reinstall when the lock file is newer.
lock=clients/node/package-lock.json
if [ ! -f clients/node/node_modules/.package-lock.json ] || [ "$lock" -nt clients/node/node_modules/.package-lock.json ]; then
  echo "installing clients/node's dependencies" >&2
  (cd clients/node && npm ci --silent --no-audit --no-fund)
fi
