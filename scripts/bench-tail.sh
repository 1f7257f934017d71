#!/usr/bin/env bash
# Benchmark (not a test): read_text_file start_line=-200 max_lines=200 (a tail
# read) of a 1 GiB log, through the release server over HTTP, beside
# `tail -n 200` on the same file in the same run; medians of RUNS calls.
# The server's figure is curl's request time (connect to last byte); tail's
# is its wall time including process start. One forward read of the same
# 200 lines is shown for contrast (it has to count every line before them).
#
#   scripts/bench-tail.sh [SIZE_GIB]   (default 1; needs that much free disk
#   in ${TMPDIR:-/tmp}; the file is removed afterwards)
set -euo pipefail
cd "$(dirname "$0")/.."
size_gib=${1:-1}
runs=${RUNS:-9}
data=$(mktemp -d "${TMPDIR:-/tmp}/bench-tail.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$data"
}
trap cleanup EXIT

file=$data/big.log
line='2026-11-30T03:00:00Z INFO request served path=/api/v1/items status=200 bytes=5120 duration_ms=3'
total=$(( (1 << 30) / (${#line} + 1) * size_gib ))
echo "writing $total lines (${size_gib} GiB) to a temporary file"
yes "$line" | head -n "$total" >"$file" || true  # yes ends on SIGPIPE
echo "last line" >>"$file"  # so the tail is recognisable
total=$(( total + 1 ))

cargo build --locked --release -p serverfs-mcp >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/release/serverfs-mcp --workdir bench="$data" --listen "127.0.0.1:$port" 2>/dev/null &
pid=$!
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

# read START: the response on stdout, curl's total time (s) on fd 3.
read_call() {
  curl -sf "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
    -w '%{stderr}%{time_total}\n' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"read_text_file\",\"arguments\":{\"workdir\":\"bench\",\"path\":\"big.log\",\"start_line\":$1,\"max_lines\":200}}}"
}
server_ms() { read_call "$1" 2>&1 >/dev/null | awk '{printf "%.2f\n", $1 * 1000}'; }
tail_ms() {
  local s e
  s=$(date +%s%N); tail -n 200 "$file" >/dev/null; e=$(date +%s%N)
  awk -v d=$(( e - s )) 'BEGIN {printf "%.2f\n", d / 1e6}'
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

# Same 200 lines as tail -n 200, and positions -200 .. -1.
want=$(tail -n 200 "$file" | sha256sum | cut -d' ' -f1)
read_call -200 2>/dev/null | python3 -c '
import hashlib, json, sys
r = json.load(sys.stdin)["result"]["structuredContent"]
assert (r["start_line"], r["end_line"], r["has_more"]) == (-200, -1, False), r
assert hashlib.sha256(r["content"].encode()).hexdigest() == sys.argv[1], "differs from tail -n 200"
print("check: lines", r["start_line"], "..", r["end_line"], "bytes", r["bytes_returned"], "= tail -n 200")
' "$want"

ours=() theirs=()
for _ in $(seq "$runs"); do
  ours+=("$(server_ms -200)")
  theirs+=("$(tail_ms)")
done
echo "read_text_file start_line=-200 max_lines=200: median $(printf '%s\n' "${ours[@]}" | median) ms (runs: ${ours[*]})"
echo "tail -n 200:                                 median $(printf '%s\n' "${theirs[@]}" | median) ms (runs: ${theirs[*]})"
echo "for contrast, forward read of the same lines (start_line=$(( total - 199 ))): $(server_ms $(( total - 199 ))) ms"
echo "server RSS peak: $(awk '$1=="VmHWM:" {print $2}' /proc/$pid/status) KiB; file $(du -h "$file" | cut -f1)"
