#!/usr/bin/env bash
# Installs the producer packages for tests/clients.rs, if missing or changed:
# clients/python into a venv under target/clients/venv (`pip install clients/python`, as a
# user would), and clients/node's dependencies (`npm ci`). Quiet and quick when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/clients/venv
stamp=$(cat clients/python/pyproject.toml clients/python/weir_producer/*.py | sha1sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.weir-stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "installing clients/python into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check clients/python
  echo "$stamp" >"$venv/.weir-stamp"
fi

# npm ci writes node_modules/.package-lock.json; reinstall when the lock file is newer.
lock=clients/node/package-lock.json
if [ ! -f clients/node/node_modules/.package-lock.json ] || [ "$lock" -nt clients/node/node_modules/.package-lock.json ]; then
  echo "installing clients/node's dependencies" >&2
  (cd clients/node && npm ci --silent --no-audit --no-fund)
fi
