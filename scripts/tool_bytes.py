#!/usr/bin/env python3
"""What a model reads on every turn: the bytes of each tool definition a server lists,
{name, description, inputSchema} as compact JSON (no spaces, UTF-8), per tool and in total.

    python3 scripts/tool_bytes.py [--server dev|mcp] [--bin BIN] [--compare FILE] [--save FILE]
    python3 scripts/tool_bytes.py --server fs-ref --bin .../server-filesystem/dist/index.js

dev starts serverfs-dev --stdio --root TMP, mcp starts serverfs-mcp --stdio --workdir w=TMP
(TMP a fresh temporary directory; BIN defaults to target/debug/<binary>, in $CARGO_TARGET_DIR if set); fs-ref starts the
official filesystem server (@modelcontextprotocol/server-filesystem) with node on TMP. Each is
spoken to over raw JSON-RPC on stdio: initialize (2025-06-18), notifications/initialized,
tools/list (every page). --compare FILE reads another server's tools/list output (the JSON-RPC
response, its result, or the tools array) and prints its figures beside; --save FILE writes the
measured tools/list result for a later --compare. Exit status 1 when a description (the tool's
or one in its inputSchema) contains a line break.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Where cargo builds (serverfs-dev refuses to start from below /tmp: a
# checkout there builds with CARGO_TARGET_DIR elsewhere).
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")


def list_tools(argv: list[str]) -> list[dict]:
    """Every tool the stdio server `argv` lists, in its order."""
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert p.stdin and p.stdout
    next_id = 0

    def send(msg: dict) -> None:
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()

    def request(method: str, params: dict) -> dict:
        nonlocal next_id
        next_id += 1
        send({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
        for line in p.stdout:
            msg = json.loads(line)
            if msg.get("id") == next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
        raise RuntimeError(f"{method}: the server closed stdout")

    try:
        request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "tool-bytes", "version": "1"}})
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict] = []
        params: dict = {}
        while True:
            result = request("tools/list", params)
            tools += result["tools"]
            if not result.get("nextCursor"):
                return tools
            params = {"cursor": result["nextCursor"]}
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def tools_of(doc: object) -> list[dict]:
    """The tools of a saved tools/list answer: a JSON-RPC response, its result, or the array."""
    if isinstance(doc, dict) and "result" in doc:
        doc = doc["result"]
    if isinstance(doc, dict) and "tools" in doc:
        doc = doc["tools"]
    if not isinstance(doc, list):
        raise SystemExit("--compare: no tools/list result in the file")
    return doc


def definition_bytes(tool: dict) -> int:
    """Bytes of {name, description, inputSchema} as compact JSON."""
    d = {k: tool[k] for k in ("name", "description", "inputSchema") if k in tool}
    return len(json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode())


def descriptions(value: object) -> list[str]:
    """Every `description` string in a tool definition (the tool's and its schema's)."""
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k == "description" and isinstance(v, str)]
        return found + [d for v in value.values() for d in descriptions(v)]
    if isinstance(value, list):
        return [d for v in value for d in descriptions(v)]
    return []


def measure(server: str, binary: str | None) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="tool-bytes-") as tmp:
        if server == "dev":
            argv = [binary or str(TARGET / "debug/serverfs-dev"), "--stdio", "--root", tmp]
        elif server == "mcp":
            argv = [binary or str(TARGET / "debug/serverfs-mcp"), "--stdio", "--workdir", f"w={tmp}"]
        elif binary:
            argv = ["node", binary, tmp]
        else:
            raise SystemExit("--server fs-ref needs --bin (its dist/index.js)")
        return list_tools(argv)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=("dev", "mcp", "fs-ref"), default="dev")
    ap.add_argument("--bin", help="the server's binary (fs-ref: its dist/index.js)")
    ap.add_argument("--compare", type=Path, help="another server's saved tools/list output")
    ap.add_argument("--save", type=Path, help="write the measured tools/list result here")
    a = ap.parse_args()
    ours = measure(a.server, a.bin)
    if a.save:
        a.save.write_text(json.dumps({"tools": ours}, indent=1) + "\n")
    theirs = tools_of(json.loads(a.compare.read_text())) if a.compare else None

    def cells(tools: list[dict], i: int) -> str:
        return f" {tools[i]['name']} | {definition_bytes(tools[i]):,} |" if i < len(tools) else " | |"

    def total(tools: list[dict]) -> str:
        t = sum(map(definition_bytes, tools))
        return f" total ({len(tools)} tools, {t // max(len(tools), 1):,} per tool) | {t:,} |"

    print(f"| # | {a.server} | bytes |" + (f" {a.compare.name} | bytes |" if theirs is not None else ""))
    print("|---|---|---:|" + ("---|---:|" if theirs is not None else ""))
    for i in range(max(len(ours), len(theirs or []))):
        print(f"| {i + 1} |" + cells(ours, i) + (cells(theirs, i) if theirs is not None else ""))
    print("| |" + total(ours) + (total(theirs) if theirs is not None else ""))

    broken = [t["name"] for t in ours if any("\n" in d or "\r" in d for d in descriptions(t))]
    for name in broken:
        print(f"LINE BREAK in a description of {name}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
