#!/usr/bin/env bash
# Interop check with the official MCP Python SDK (PyPI `mcp`, pinned in requirements.txt).
# Creates/refreshes tests/interop/.venv, then runs interop.py against the release binary.
#
#   tests/interop/run.sh                 # uses target/release/serverfs-mcp (and serverfs-dev)
#   SERVERFS_BIN=/path/to/bin tests/interop/run.sh
#   BUILD=1 tests/interop/run.sh         # cargo build --release --locked -p serverfs-mcp first
#   tests/interop/run.sh --setup-only    # only create/refresh the venv
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="$here/.venv"
python="${PYTHON:-python3}"

if [[ "${BUILD:-0}" == "1" ]]; then
  (cd "$repo" && cargo build --release --locked -p serverfs-mcp)
fi

# (Re)create the venv when it is missing or the pins changed.
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]] || [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
  echo "interop: setting up $venv"
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" > "$stamp"
fi

if [[ "${1:-}" == "--setup-only" ]]; then
  exit 0
fi

export SERVERFS_BIN="${SERVERFS_BIN:-$repo/target/release/serverfs-mcp}"
export SERVERFS_DEV_BIN="${SERVERFS_DEV_BIN:-$repo/target/release/serverfs-dev}"
"$venv/bin/python" "$here/interop.py" "$@"
# serverfs-dev, when it has been built (CI builds it).
if [[ -x "$SERVERFS_DEV_BIN" ]]; then
  "$venv/bin/python" "$here/interop_dev.py"
else
  echo "interop-dev: SKIPPED: $SERVERFS_DEV_BIN not built"
fi
