#!/usr/bin/env bash
# Real MCP clients, no model: Codex CLI's `app-server` lists and calls every
# tool of both servers (stdio and Streamable HTTP, codex_app_server.py), the
# TypeScript client cancels a running bash of serverfs-dev over HTTP in both
# protocol eras (ts_cancel.mjs), and Claude Code's `claude mcp list`
# health-checks both servers over stdio and HTTP; the MCP Inspector CLI calls bash over stdio
# in both eras (a task only where the era has them).
# The clients are pinned in package.json / package-lock.json and installed
# from the npm registry into tests/clients/node_modules.
#
#   tests/clients/run.sh       # uses target/release/serverfs-{mcp,dev}
#   SERVERFS_BIN=… SERVERFS_DEV_BIN=… tests/clients/run.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
mcp_bin="$(realpath "${SERVERFS_BIN:-$repo/target/release/serverfs-mcp}")"
dev_bin="$(realpath "${SERVERFS_DEV_BIN:-$repo/target/release/serverfs-dev}")"

(cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
codex="$here/node_modules/.bin/codex"
claude="$here/node_modules/.bin/claude"
echo "clients: $("$codex" --version), Claude Code $("$claude" --version)"

python3 "$here/codex_app_server.py" --codex "$codex" --mcp "$mcp_bin" --dev "$dev_bin"

# Claude Code: a throw-away HOME holds its user config.
# Not below /tmp: serverfs-dev refuses a state dir there (commands can write it).
# (/var/tmp when the checkout itself lives below /tmp.)
private="$repo/target"; case "$private" in /tmp/*) private=/var/tmp ;; esac
mkdir -p "$private"
tmp="$(mktemp -d -p "$private")"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
mkdir -p "$tmp/home" "$tmp/project"
echo "# demo" > "$tmp/project/README.md"
token="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
install -m 600 /dev/null "$tmp/token"; printf '%s' "$token" > "$tmp/token"

port_of() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_healthy() {
  for _ in $(seq 600); do
    curl -fsS "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server on port $1 never became healthy"; return 1
}
mcp_port="$(port_of)"; dev_port="$(port_of)"
"$mcp_bin" --workdir "work=$tmp/project" --listen "127.0.0.1:$mcp_port" --token-file "$tmp/token" 2>"$tmp/mcp.log" & pids+=($!)
"$dev_bin" --root "$tmp/project" --listen "127.0.0.1:$dev_port" --token-file "$tmp/token" --state-dir "$tmp/state-http" 2>"$tmp/dev.log" & pids+=($!)
wait_healthy "$mcp_port"; wait_healthy "$dev_port"

# The TypeScript client cancels a running bash over HTTP, in both eras (ts_cancel.mjs).
node "$here/ts_cancel.mjs" --url "http://127.0.0.1:$dev_port/mcp" --token-file "$tmp/token"

claude_home() { HOME="$tmp/home" "$claude" "$@"; }
claude_home mcp add -s user ro-stdio "$mcp_bin" -- --stdio --workdir "work=$tmp/project" >/dev/null
claude_home mcp add -s user dev-stdio "$dev_bin" -- --stdio --root "$tmp/project" --state-dir "$tmp/state-stdio" >/dev/null
claude_home mcp add -s user --transport http ro-http "http://127.0.0.1:$mcp_port/mcp" --header "Authorization: Bearer $token" >/dev/null
claude_home mcp add -s user --transport http dev-http "http://127.0.0.1:$dev_port/mcp" --header "Authorization: Bearer $token" >/dev/null
# Negative control: a wrong token must not show as connected.
claude_home mcp add -s user --transport http wrong-token "http://127.0.0.1:$mcp_port/mcp" --header "Authorization: Bearer not-the-token" >/dev/null
list="$(claude_home mcp list 2>&1)"
printf '%s\n' "$list" | sed 's/Bearer [0-9a-f]*/Bearer …/'

pass=0; fail=0
for name in ro-stdio dev-stdio ro-http dev-http; do
  if printf '%s\n' "$list" | grep -E "^$name: .*Connected" >/dev/null; then pass=$((pass+1)); echo "ok   claude: $name connected"
  else fail=$((fail+1)); echo "FAIL claude: $name not connected"; fi
done
if printf '%s\n' "$list" | grep -E "^wrong-token: .*Connected" >/dev/null; then
  fail=$((fail+1)); echo "FAIL claude: a wrong token showed as connected"
else pass=$((pass+1)); echo "ok   claude: a wrong token is not connected"; fi
echo "claude mcp list: $pass passed, $fail failed"
[[ $fail -eq 0 ]]

# The MCP Inspector CLI (pinned: 2.12.0; it needs Node >= 22.19, fetched by npx) calls bash
# over stdio in both eras. It declares the Tasks extension even at a legacy `initialize`: the
# legacy era must get the plain answer, the 2026-07-28 era a task it polls to the result.
inspector() {
  MCP_INSPECTOR_SECRET_STORE=memory npx -y -p node@22.23.3 -p @modelcontextprotocol/inspector@2.12.0 \
    -c "mcp-inspector --cli $*" 2>"$tmp/inspector.log"
}
stdout_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["structuredContent"]["stdout"], end="")'; }
printf '{"mcpServers":{"dev":{"type":"stdio","command":"%s","args":["--stdio","--root","%s","--state-dir","%s"],"protocolEra":"modern"}}}\n' \
  "$dev_bin" "$tmp/project" "$tmp/state-inspector" > "$tmp/inspector.json"
legacy="$(inspector "$dev_bin" --stdio --root "$tmp/project" --state-dir "$tmp/state-inspector" -- \
  --method tools/call --tool-name bash --tool-arg command=\"echo legacy\" --format json | stdout_of)" \
  || { cat "$tmp/inspector.log"; exit 1; }
modern="$(inspector --config "$tmp/inspector.json" --server dev \
  --method tools/call --tool-name bash --tool-arg command=\"echo modern\" --format json | stdout_of)" \
  || { cat "$tmp/inspector.log"; exit 1; }
[[ "$legacy" == legacy && "$modern" == modern ]] || { echo "FAIL inspector: bash answered '$legacy' / '$modern'"; exit 1; }
echo "ok   inspector 2.12.0 over stdio: bash answers in the legacy era and as a task in 2026-07-28"
# Its --strict tools/list reports tool-schema portability problems and exits 6 on an error.
inspector "$dev_bin" --stdio --root "$tmp/project" --state-dir "$tmp/state-inspector" -- \
  --method tools/list --strict >/dev/null || { cat "$tmp/inspector.log"; echo "FAIL inspector --strict: serverfs-dev"; exit 1; }
inspector "$mcp_bin" --stdio --workdir "work=$tmp/project" -- \
  --method tools/list --strict >/dev/null || { cat "$tmp/inspector.log"; echo "FAIL inspector --strict: serverfs-mcp"; exit 1; }
echo "ok   inspector --strict: both servers' tool schemas have no portability problem"
