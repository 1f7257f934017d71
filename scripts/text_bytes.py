#!/usr/bin/env python3
"""What a model reads: bytes of the text content each server hands a client, per task,
serverfs beside the official filesystem server (fs-ref) and Desktop Commander (DC), in one run.

    python3 scripts/text_bytes.py --dir DIR --file FILE [--serverfs BIN] [--peers NODE_PREFIX]

DIR is listed, the first 200 lines of FILE (inside DIR) are read, and FILE is stat'ed, by each
server over raw JSON-RPC on stdio (initialize 2025-06-18). The peers are installed with npm
into NODE_PREFIX (default bench-data/peers) at pinned versions, install scripts off. "raw" is
the 200 lines themselves. Every answer is checked: the listing names every entry of DIR, the
read returns exactly the 200 lines (DC: the lines after its one-line header), the stat names
the size.
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
PEERS = {"@modelcontextprotocol/server-filesystem": "2026.8.31", "@wonderwhy-er/desktop-commander": "0.2.52"}


class Stdio:
    def __init__(self, argv: list[str], env: dict | None = None, cwd: Path | None = None) -> None:
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "text-bytes", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: dict) -> None:
        assert self.p.stdin
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.p.stdout
        for line in self.p.stdout:
            msg = json.loads(line)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
        raise RuntimeError(f"{method}: the server closed stdout")

    def text(self, tool: str, args: dict) -> str:
        r = self.request("tools/call", {"name": tool, "arguments": args})
        if r.get("isError"):
            raise RuntimeError(f"{tool}: {r}")
        return "".join(c["text"] for c in r["content"] if c.get("type") == "text")

    def close(self) -> None:
        assert self.p.stdin
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()


def ensure_peers(prefix: Path) -> dict[str, Path]:
    entries = {
        "fs-ref": prefix / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
        "DC": prefix / "node_modules/@wonderwhy-er/desktop-commander/dist/index.js",
    }
    if not all(e.exists() for e in entries.values()):
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--ignore-scripts",
                        "--no-save", *[f"{p}@{v}" for p, v in PEERS.items()]], check=True, stdout=subprocess.DEVNULL)
    return entries


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--file", required=True, type=Path, help="a text file inside --dir")
    ap.add_argument("--serverfs", default=str(REPO / "target/release/serverfs-mcp"))
    ap.add_argument("--peers", type=Path, default=REPO / "bench-data/peers")
    a = ap.parse_args()
    d, f = a.dir.resolve(), a.file.resolve()
    rel = f.relative_to(d).as_posix()
    raw = "".join(f.read_text().splitlines(keepends=True)[:200])
    names = sorted(os.listdir(d))
    size = str(f.stat().st_size)
    entries = ensure_peers(a.peers)
    problems: list[str] = []
    rows: dict[str, dict[str, int]] = {}

    def check(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    ours = Stdio([a.serverfs, "--stdio", "--workdir", f"w={d}"])
    listing = ours.text("list_directory", {"workdir": "w", "path": ""})
    read = ours.text("read_text_file", {"workdir": "w", "path": rel, "max_lines": 200})
    stat = ours.text("stat_file", {"workdir": "w", "path": rel})
    ours.close()
    check(all(n in listing for n in names), "serverfs listing")
    check(read.split("\n", 1)[1] == raw, "serverfs read")
    check(size in stat, "serverfs stat")
    rows["serverfs"] = {"list": len(listing.encode()), "read": len(read.encode()), "stat": len(stat.encode())}

    ref = Stdio(["node", str(entries["fs-ref"]), str(d)])
    listing = ref.text("list_directory", {"path": str(d)})
    read = ref.text("read_text_file", {"path": str(f), "head": 200})
    stat = ref.text("get_file_info", {"path": str(f)})
    ref.close()
    check(all(n in listing for n in names), "fs-ref listing")
    check(read.rstrip("\n") == raw.rstrip("\n"), "fs-ref read")
    check(size in stat, "fs-ref stat")
    rows["fs-ref"] = {"list": len(listing.encode()), "read": len(read.encode()), "stat": len(stat.encode())}

    with tempfile.TemporaryDirectory(prefix="text-bytes-dc-") as home:
        conf = Path(home) / ".claude-server-commander"
        conf.mkdir()
        (conf / "config.json").write_text(json.dumps({
            "telemetryEnabled": False, "allowedDirectories": [str(d)], "defaultShell": "/bin/bash",
            "pendingWelcomeOnboarding": False, "welcomeOnboardingEligible": False}))
        dead = "http://127.0.0.1:9"
        env = {**os.environ, "HOME": home, "DC_FLAG_URL": f"{dead}/flags.json", "HTTP_PROXY": dead,
               "HTTPS_PROXY": dead, "http_proxy": dead, "https_proxy": dead}
        dc = Stdio(["node", str(entries["DC"]), "--no-onboarding"], env=env)
        listing = dc.text("list_directory", {"path": str(d), "depth": 1})
        read = dc.text("read_file", {"path": str(f), "offset": 0, "length": 200})
        stat = dc.text("get_file_info", {"path": str(f)})
        dc.close()
    check(all(n in listing for n in names), "DC listing")
    check(raw.rstrip("\n") in read, "DC read")
    check(size in stat, "DC stat")
    rows["DC"] = {"list": len(listing.encode()), "read": len(read.encode()), "stat": len(stat.encode())}

    print(f"text bytes: list {d.name}/ ({len(names)} entries), read 200 lines of {rel} (raw {len(raw.encode())} B), stat")
    print("| task | serverfs | fs-ref | DC | raw |")
    print("|---|---|---|---|---|")
    for task, label in (("list", f"list ({len(names)} entries)"), ("read", "read 200 lines"), ("stat", "stat")):
        raw_col = f"{len(raw.encode()):,} B" if task == "read" else "—"
        print(f"| {label} | " + " | ".join(f"{rows[s][task]:,} B" for s in ("serverfs", "fs-ref", "DC"))
              + f" | {raw_col} |")
    best_list = min(rows["fs-ref"]["list"], rows["DC"]["list"])
    best_stat = min(rows["fs-ref"]["stat"], rows["DC"]["stat"])
    print(f"listing / best peer: {rows['serverfs']['list'] / best_list:.2f} (target <= 1.3); "
          f"read / raw: {rows['serverfs']['read'] / len(raw.encode()):.3f} (target <= 1.05); "
          f"stat / best peer: {rows['serverfs']['stat'] / best_stat:.2f} (target <= 1.0)")
    for p in problems:
        print(f"MISMATCH: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
