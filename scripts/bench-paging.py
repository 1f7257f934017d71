#!/usr/bin/env python3
"""One page-through of search_text with next_cursor over the real binary, beside ripgrep.

    cargo build --release -p serverfs-mcp
    python3 scripts/bench-paging.py [--files 50000] [--limit 100] [--dir /tmp/serverfs-paging]

Generates a tree (once; reused when present) of --files files, 50 x 25 directories, ~1.4 KB
each, one file in ten with one or two lines holding `needle`. Starts the release binary on a
free loopback port with --max-search-results = --limit, then calls search_text page by page
(stateless Streamable HTTP, protocol 2026-07-28, stdlib only) until next_cursor is null, and
checks the concatenated pages against `rg -F --no-ignore --sort path -n needle` (same order:
depth-first, names in byte order; rg skips hidden files by default, as ServerFS does). Prints
pages, calls, wall time, and rg's time sorted (single-threaded, same order) and unsorted
(parallel). Not a test: nothing fails on a slow machine; it exits non-zero only if the
answers differ.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERSION = "2026-07-28"


def build_tree(root: Path, files: int) -> None:
    marker = root / ".complete"
    if marker.exists() and marker.read_text() == str(files):
        return
    shutil.rmtree(root, ignore_errors=True)
    per_dir = max(1, files // (50 * 25))
    n = 0
    for a in range(50):
        for b in range(25):
            d = root / f"pkg{a:02}" / f"mod-{b:02}"
            d.mkdir(parents=True)
            for c in range(per_dir):
                lines = [f"line {i} of file {n}: lorem ipsum dolor sit amet\n" for i in range(30)]
                if n % 10 == 0:
                    lines[3] = "here is a needle in the hay\n"
                    if n % 20 == 0:
                        lines[17] = "needle again, needle\n"
                (d / f"f{c:03}.txt").write_text("".join(lines))
                n += 1
    marker.write_text(str(files))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, i: int, args: dict) -> dict:
    body = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {
            "name": "search_text",
            "arguments": args,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "search_text",
        },
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        res = json.load(r)["result"]
    if res.get("isError"):
        raise RuntimeError(res["content"][0]["text"])
    return res["structuredContent"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/serverfs-paging"))
    ap.add_argument("--binary", default=str(REPO / "target/release/serverfs-mcp"))
    opts = ap.parse_args()
    tree = opts.dir / "tree"
    t0 = time.perf_counter()
    build_tree(tree, opts.files)
    print(f"tree: {opts.files} files under {tree} ({time.perf_counter() - t0:.1f} s to make or check)")

    port = free_port()
    server = subprocess.Popen(
        [opts.binary, "--workdir", f"t={tree}", "--listen", f"127.0.0.1:{port}",
         "--max-search-results", str(opts.limit)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.05)
        args = {"workdir": "t", "query": "needle", "limit": opts.limit}
        call(url, 0, args)  # warm the page cache and the server
        got, times, reasons, calls = [], [], set(), 0
        t0 = time.perf_counter()
        while True:
            t = time.perf_counter()
            page = call(url, calls + 1, args)
            times.append(time.perf_counter() - t)
            calls += 1
            got += [f"{m['path']}:{m['line']}" for m in page["matches"]]
            if page["next_cursor"] is None:
                break
            reasons.add(page["truncated_reason"])
            args["cursor"] = page["next_cursor"]
        total = time.perf_counter() - t0
    finally:
        server.kill()
        server.wait()

    def rg(*extra: str) -> tuple[float, list[str]]:
        t = time.perf_counter()
        out = subprocess.run(["rg", "-F", "--no-ignore", "-n", "--no-heading", *extra, "needle", "."],
                             cwd=tree, capture_output=True, text=True, check=True).stdout
        return time.perf_counter() - t, out.splitlines()

    rg(); rg_sorted_s, rg_lines = rg("--sort", "path")
    rg_par_s, _ = rg()
    want = [":".join(l.split(":")[:2]).removeprefix("./") for l in rg_lines]

    print(f"search_text 'needle', limit {opts.limit}: {len(got)} matches in {calls} calls "
          f"({calls} pages, stops: {sorted(reasons)}), {total:.2f} s in all, "
          f"median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms per call")
    print(f"rg -F --no-ignore --sort path (1 thread, same order): {len(want)} matches, {rg_sorted_s:.2f} s")
    print(f"rg -F --no-ignore (parallel, {os.cpu_count()} cpus): {rg_par_s:.2f} s")
    if got != want:
        print("MISMATCH between the pages and rg's answer", file=sys.stderr)
        return 1
    print("pages concatenated == rg --sort path: identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
