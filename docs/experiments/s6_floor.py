#!/usr/bin/env python3
"""S6's floor: what a tool call costs through rmcp's stateless /mcp when our
handler does nothing, beside a stateless `ping` and the real `stat_file`.

Build the experiment (two tools that exist only here) and run it:

    git worktree add /tmp/s6-floor HEAD && cd /tmp/s6-floor
    git apply docs/experiments/s6-floor.patch
    cargo build --release -p serverfs-mcp
    python3 docs/experiments/s6_floor.py target/release/serverfs-mcp --rounds 7

Without the patch, compare builds on the calls every server has:

    python3 docs/experiments/s6_floor.py OLD NEW --calls ping,stat_main.c,stat_Makefile

Calls, each `wrk -t2 -c64 -d3s` with the same headers as bench.py's S6,
interleaved round by round:

- `ping`: the stateless ping through /mcp (S6ping's anchor);
- `noop`: `tools/call` answered by `call_tool` before the tool router, an
  empty result (the patch);
- `stat_const`: `tools/call` of a tool with stat_file's schema whose handler
  returns stat_file's answer computed once (the patch): rmcp's dispatch,
  our argument check, a real-size answer, and none of our work;
- `stat_file` of `main.c` (MIME type from the name) and of `Makefile`
  (extensionless: the first bytes are read to tell text).

Prints each run (calls/s, the server's CPU per call from /proc, p99) and
the medians with their ratio to ping. Every answer is checked once first.
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from bench import post_lua, proc_cpu, wait_healthy, wrk_figures  # noqa: E402

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "Mcp-Protocol-Version": "2025-06-18"}


def tool(name: str, args: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": args}}


CALLS = {
    "ping": ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, lambda r: r.get("result") == {}),
    "noop": (tool("noop", {}), lambda r: r["result"]["content"] == []),
    "stat_const": (tool("stat_const", {"workdir": "w", "path": "Makefile"}),
                   lambda r: r["result"]["structuredContent"]["type"] == "file"),
    "stat_main.c": (tool("stat_file", {"workdir": "w", "path": "main.c"}),
                    lambda r: r["result"]["structuredContent"]["mime_type"] == "text/plain"),
    "stat_Makefile": (tool("stat_file", {"workdir": "w", "path": "Makefile"}),
                      lambda r: r["result"]["structuredContent"]["mime_type"].startswith("text/plain")),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", nargs="+", help="one server, or several to compare (each call runs on each in turn)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", default=",".join(CALLS),
                    help="which calls, comma-separated (without the patch: ping,stat_main.c,stat_Makefile)")
    a = ap.parse_args()
    calls = {name: CALLS[name] for name in a.calls.split(",")}
    work = Path(tempfile.mkdtemp(prefix="s6-floor-"))
    wd = work / "wd"
    wd.mkdir()
    text = Path(__file__).resolve().parents[2].joinpath("Cargo.toml").read_text()
    (wd / "Makefile").write_text(text)
    (wd / "main.c").write_text(text)
    servers = []
    try:
        for i, binary in enumerate(a.binary):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            log = open(work / f"server-{i}.log", "w")
            servers.append((binary, f"http://127.0.0.1:{port}", subprocess.Popen(
                [binary, "--workdir", f"w={wd}", "--listen", f"127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=log)))
        for binary, base, _ in servers:
            wait_healthy(base)
            for name, (body, ok) in calls.items():
                req = urllib.request.Request(f"{base}/mcp", data=json.dumps(body).encode(), headers=HEADERS)
                reply = json.loads(urllib.request.urlopen(req, timeout=10).read())
                if not ok(reply):
                    sys.exit(f"{binary} {name}: unexpected answer {reply} (is the patch applied?)")
        for name, (body, _) in calls.items():
            (work / f"{name}.lua").write_text(post_lua(json.dumps(body), HEADERS))
        runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        print(f"load average at the start: {os.getloadavg()[0]:.2f}")
        for _ in range(a.rounds):
            for name in calls:
                for binary, base, server in servers:
                    before = proc_cpu(server.pid)
                    out = subprocess.run(["wrk", "-t2", "-c64", "-d3s", "--latency", "-s", str(work / f"{name}.lua"),
                                          f"{base}/mcp"], capture_output=True, text=True, check=True).stdout
                    used = proc_cpu(server.pid) - before
                    if "Non-2xx" in out or "Socket errors" in out:
                        sys.exit(f"{binary} {name}: wrk saw errors:\n{out}")
                    count = int(re.search(r"(\d+) requests in", out).group(1))
                    rps, p99 = wrk_figures(out)
                    runs.setdefault((binary, name), []).append((rps, 1e6 * used / count, p99))
                    print(f"{binary}: {name:14s} {rps:9.0f}/s  server CPU {1e6 * used / count:6.1f} us/call  "
                          f"p99 {p99:.2f} ms", flush=True)
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
        for binary, _, _ in servers:
            print(f"\n{binary}: medians of {a.rounds} rounds")
            pings = runs.get((binary, "ping"))
            for name in calls:
                rps, cpu, p99 = (statistics.median(r[i] for r in runs[(binary, name)]) for i in range(3))
                against = ""
                if pings:
                    ping, ping_p99 = statistics.median(r[0] for r in pings), statistics.median(r[2] for r in pings)
                    against = f"  {rps / ping:4.2f} of ping, p99 {p99 - ping_p99:+.2f} ms"
                print(f"{name:14s} {rps:9.0f}/s  server CPU {cpu:6.1f} us/call  p99 {p99:.2f} ms{against}")
    finally:
        for _, _, server in servers:
            server.terminate()
            server.wait(timeout=10)
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
