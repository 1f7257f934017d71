#!/usr/bin/env bash
# Benchmark (not a test): read_text_file 200 lines deep inside a multi-GB
# file, through the release server over HTTP, beside `sed -n` on the same
# file in the same run; and the server's peak RSS before and after, to show
# the file is streamed, never loaded.
#
#   scripts/bench-read.sh [SIZE_GIB]   (default 2; needs that much free disk)
set -euo pipefail
cd "$(dirname "$0")/.."
size_gib=${1:-2}
data=bench-data/read
mkdir -p "$data"
file=$data/big.log
line='2026-11-30T03:00:00Z INFO request served path=/api/v1/items status=200 bytes=5120 duration_ms=3'
lines_per_gib=$(( (1 << 30) / (${#line} + 1) ))
total=$(( lines_per_gib * size_gib ))
if [ ! -f "$file" ] || [ "$(wc -l <"$file")" != "$total" ]; then
  echo "writing $total lines (${size_gib} GiB) to $file"
  yes "$line" | head -n "$total" >"$file" || true  # yes ends on SIGPIPE
fi
deep=$(( total - 1000 ))

cargo build --locked --release -p serverfs-mcp >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/release/serverfs-mcp --workdir bench="$PWD/$data" --listen "127.0.0.1:$port" 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
rss() { awk -v k="$1" '$1==k":" {print $2}' /proc/$pid/status; }
echo "server RSS before: $(rss VmRSS) KiB (peak $(rss VmHWM) KiB)"

call() {
  curl -sf "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
    -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"read_text_file\",\"arguments\":{\"workdir\":\"bench\",\"path\":\"big.log\",\"start_line\":$1,\"max_lines\":200}}}"
}
time_ms() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }

call "$deep" | python3 -c 'import json,sys; r=json.load(sys.stdin)["result"]["structuredContent"]; assert r["end_line"]=='"$((deep + 199))"', r["end_line"]; print("check: lines", r["start_line"], "-", r["end_line"], "bytes", r["bytes_returned"])'
for run in 1 2 3; do
  ours=$(time_ms call "$deep")
  sed_ms=$(time_ms sed -n "${deep},$((deep + 199))p;$((deep + 200))q" "$file")
  echo "run $run: read_text_file at line $deep: ${ours} ms | sed -n: ${sed_ms} ms"
done
first=$(time_ms call 1)
echo "read_text_file at line 1: ${first} ms"
echo "server RSS after: $(rss VmRSS) KiB (peak $(rss VmHWM) KiB); file size $(du -h "$file" | cut -f1)"
