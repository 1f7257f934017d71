#!/usr/bin/env bash
# Robustness check of the release binary (floods, stalled HTTP connections, long reads,
# deny-glob fail-open); see scripts/robustness.py's docstring. Python 3.11+ stdlib only.
#   scripts/robustness.sh [--check] [--only 1,2,3,4,5] [--bin PATH] [--token T] [--json FILE]
# SERVERFS_BIN overrides the default binary (target/release/serverfs-mcp).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "robustness.sh: needs Python >= 3.11 ($py is $("$py" -V 2>&1))" >&2
    exit 2
fi
bin="${SERVERFS_BIN:-$repo/target/release/serverfs-mcp}"
if [[ ! -x "$bin" ]]; then
    echo "robustness.sh: no binary at $bin; build it: cargo build --release --locked -p serverfs-mcp" >&2
    exit 2
fi
exec "$py" "$repo/scripts/robustness.py" --bin "$bin" "$@"
