#!/usr/bin/env bash
# Latency (stat_file, 1,000 sequential calls) and load check (32 clients, 5,000 calls) of the
# release binary over HTTP loopback, with the interop venv's MCP Python SDK.
#   scripts/bench-latency.sh [--json results/bench-latency.json] [--calls N] [--load-calls N]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$repo/tests/interop/run.sh" --setup-only
export SERVERFS_BIN="${SERVERFS_BIN:-$repo/target/release/serverfs-mcp}"
exec "$repo/tests/interop/.venv/bin/python" "$repo/scripts/bench-latency.py" "$@"
