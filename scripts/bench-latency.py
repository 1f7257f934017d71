#!/usr/bin/env python3
"""Latency and load check for serverfs-mcp over Streamable HTTP on loopback.

Run it with the interop venv (scripts/bench-latency.sh sets it up):

    tests/interop/.venv/bin/python scripts/bench-latency.py [--calls 1000] [--load-calls 5000]
        [--clients 32] [--json results/bench-latency.json]

Phases (all against one release binary on a free loopback port, temp fixture tree):
  1. latency: N sequential stat_file calls, each timed, for
       - the MCP Python SDK client at 2026-07-28 (stateless, server/discover)
       - the MCP Python SDK client in legacy mode (initialize handshake, 2025-11-25)
       - raw httpx2 POSTs of the JSON-RPC body, 2025-06-18 stateless flow
       - raw httpx2 POSTs of the JSON-RPC body, 2026-07-28 (Mcp-Method/Mcp-Name, _meta)
     median and p99 for each (the raw rows show how much of the SDK figure is client overhead).
  2. load: C concurrent SDK clients (half 2026-07-28, half legacy) make M calls in total,
     a mix of list_directory / read_text_file / stat_file; zero failed calls required.
     Open fds of the server (/proc/PID/fd) before and after (must return to the start
     count), idle RSS, peak RSS (VmHWM) and the highest sampled VmRSS.
Not a timed test: the figures are printed; the exit code is non-zero only if a call failed,
the fd count did not return, or the server died.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client

REPO = Path(__file__).resolve().parents[1]
ALIAS = "bench"


# ---------------------------------------------------------------- fixture and server
def build_fixture(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "README.md").write_text("# bench fixture\n" + "line\n" * 20)
    src = root / "src"
    src.mkdir()
    for i in range(120):
        (src / f"module_{i:03}.py").write_text(f"# module {i}\n" + "x = 1\n" * 50)
    logs = root / "logs"
    logs.mkdir()
    with open(logs / "app.log", "w") as f:
        for i in range(20000):
            f.write(f"2026-11-30T00:00:{i % 60:02}Z INFO request id={i} path=/api/v1/items status=200\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(binary: str, root: Path, log_path: Path) -> tuple[subprocess.Popen, int]:
    for _ in range(5):
        port = free_port()
        log = open(log_path, "ab")
        # INFO logs one JSON line per call to stderr; that is part of the real cost, keep it.
        proc = subprocess.Popen(
            [binary, "--workdir", f"{ALIAS}={root}", "--listen", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return proc, port
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raise RuntimeError(f"server did not start; see {log_path}")


# ---------------------------------------------------------------- /proc helpers
def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "Threads"):
                out[k] = int(v.split()[0])  # kB for Vm*, count for Threads
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of the server process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak_kb, self.max_fds = pid, interval, 0, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.peak_kb = max(self.peak_kb, proc_status(self.pid)["VmRSS"])
                self.max_fds = max(self.max_fds, fd_count(self.pid))
            except (OSError, KeyError):
                return
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


# ---------------------------------------------------------------- statistics
def summarize(samples_s: list[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples_s)
    n = len(ms)

    def pct(p: float) -> float:  # nearest-rank
        return ms[min(n - 1, max(0, int(-(-p * n // 100)) - 1))]

    return {
        "n": n,
        "median_ms": round(statistics.median(ms), 3),
        "p90_ms": round(pct(90), 3),
        "p99_ms": round(pct(99), 3),
        "min_ms": round(ms[0], 3),
        "max_ms": round(ms[-1], 3),
        "mean_ms": round(statistics.fmean(ms), 3),
    }


# ---------------------------------------------------------------- latency phase
STAT_ARGS = {"workdir": ALIAS, "path": "README.md"}


async def sdk_latency(url: str, mode: str, calls: int, warmup: int = 50) -> dict[str, Any]:
    async with Client(url, mode=mode, cache=None) as c:
        for _ in range(warmup):
            r = await c.call_tool("stat_file", STAT_ARGS)
            assert not r.is_error, r
        samples = []
        for _ in range(calls):
            t0 = time.perf_counter()
            r = await c.call_tool("stat_file", STAT_ARGS)
            samples.append(time.perf_counter() - t0)
            if r.is_error or (r.structured_content or {}).get("type") != "file":
                raise RuntimeError(f"stat_file failed: {r}")
        return {"protocol": c.protocol_version, **summarize(samples)}


def raw_latency(url: str, version: str, calls: int, warmup: int = 50) -> dict[str, Any]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": version,
    }
    params: dict[str, Any] = {"name": "stat_file", "arguments": STAT_ARGS}
    if version >= "2026-07-28":
        headers |= {"Mcp-Method": "tools/call", "Mcp-Name": "stat_file"}
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    with httpx2.Client(timeout=30) as http:
        if version < "2026-07-28":
            # the legacy flow the tunnel-client probe uses: initialize, initialized, then calls
            init = {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "bench-raw", "version": "0"},
                },
            }
            h0 = {k: v for k, v in headers.items() if k != "MCP-Protocol-Version"}
            r = http.post(url, json=init, headers=h0)
            r.raise_for_status()
            assert r.json()["result"]["protocolVersion"] == version, r.text
            r = http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
            assert r.status_code == 202, (r.status_code, r.text)
        samples = []
        for i in range(warmup + calls):
            body = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": params}
            t0 = time.perf_counter()
            r = http.post(url, json=body, headers=headers)
            dt = time.perf_counter() - t0
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:500]}")
            msg = r.json()
            res = msg.get("result") or {}
            if res.get("isError") or (res.get("structuredContent") or {}).get("type") != "file":
                raise RuntimeError(f"unexpected reply: {r.text[:500]}")
            if i >= warmup:
                samples.append(dt)
        return {"protocol": version, "content_type": r.headers.get("content-type"), **summarize(samples)}


# ---------------------------------------------------------------- load phase
async def load(url: str, clients: int, total: int, seed: int = 7) -> dict[str, Any]:
    rnd = random.Random(seed)
    ops = []
    for i in range(total):
        k = i % 3
        if k == 0:
            ops.append(("list_directory", {"workdir": ALIAS, "path": "src", "offset": rnd.randrange(0, 100), "limit": 20}))
        elif k == 1:
            ops.append(
                (
                    "read_text_file",
                    {"workdir": ALIAS, "path": "logs/app.log", "start_line": rnd.randrange(1, 19000), "max_lines": 200},
                )
            )
        else:
            ops.append(("stat_file", {"workdir": ALIAS, "path": f"src/module_{rnd.randrange(120):03}.py"}))
    queue: asyncio.Queue = asyncio.Queue()
    for op in ops:
        queue.put_nowait(op)
    ok = 0
    failures: list[str] = []
    per_op: dict[str, list[float]] = {"list_directory": [], "read_text_file": [], "stat_file": []}
    start_gate = asyncio.Event()

    async def worker(idx: int) -> None:
        nonlocal ok
        mode = "auto" if idx % 2 == 0 else "legacy"
        try:
            async with Client(url, mode=mode, cache=None) as c:
                await start_gate.wait()
                while True:
                    try:
                        name, args = queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    t0 = time.perf_counter()
                    try:
                        r = await c.call_tool(name, args)
                    except Exception as e:  # noqa: BLE001 - any exception is a failed call
                        failures.append(f"{name}: {type(e).__name__}: {e}")
                        continue
                    per_op[name].append(time.perf_counter() - t0)
                    if r.is_error:
                        failures.append(f"{name}: isError: {r.content[0].text if r.content else r}")
                    else:
                        ok += 1
        except Exception as e:  # noqa: BLE001
            failures.append(f"client {idx} ({mode}): {type(e).__name__}: {e}")

    tasks = [asyncio.create_task(worker(i)) for i in range(clients)]
    await asyncio.sleep(0)
    # wait until every client has connected (discover/initialize done), then release them together
    await asyncio.sleep(0.5)
    t0 = time.perf_counter()
    start_gate.set()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    return {
        "clients": clients,
        "calls": total,
        "ok": ok,
        "failed": len(failures),
        "failures_sample": failures[:10],
        "wall_s": round(wall, 3),
        "calls_per_s": round(total / wall, 1),
        "latency_by_tool": {k: summarize(v) for k, v in per_op.items() if v},
    }


# ---------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000, help="sequential stat_file calls per latency row")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--load-calls", type=int, default=5000)
    ap.add_argument("--json", help="write all figures to this JSON file")
    ap.add_argument("--skip-latency", action="store_true")
    a = ap.parse_args()

    binary = os.environ.get("SERVERFS_BIN", str(REPO / "target/release/serverfs-mcp"))
    if not os.access(binary, os.X_OK):
        print(f"bench: binary not found: {binary}", file=sys.stderr)
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="serverfs-bench-"))
    root = tmp / "root"
    build_fixture(root)
    proc, port = start_server(binary, root, tmp / "server.log")
    url = f"http://127.0.0.1:{port}/mcp"
    pid = proc.pid
    out: dict[str, Any] = {"binary": binary, "pid": pid}
    problems: list[str] = []
    try:
        time.sleep(0.3)
        out["idle_after_start"] = {**proc_status(pid), "fds": fd_count(pid)}
        print(f"server pid {pid} on {url}")
        print(
            f"idle after start: VmRSS {out['idle_after_start']['VmRSS']} kB, "
            f"fds {out['idle_after_start']['fds']}, threads {out['idle_after_start']['Threads']}"
        )

        if not a.skip_latency:
            lat: dict[str, Any] = {}
            lat["sdk_2026-07-28"] = asyncio.run(sdk_latency(url, "auto", a.calls))
            lat["sdk_legacy"] = asyncio.run(sdk_latency(url, "legacy", a.calls))
            lat["raw_httpx_2025-06-18"] = raw_latency(url, "2025-06-18", a.calls)
            lat["raw_httpx_2026-07-28"] = raw_latency(url, "2026-07-28", a.calls)
            out["latency_stat_file"] = lat
            print(f"\nstat_file latency over HTTP loopback, {a.calls} sequential calls each:")
            print(f"  {'client':<24} {'protocol':<11} {'median ms':>10} {'p99 ms':>9} {'p90 ms':>9} {'max ms':>9}")
            for k, v in lat.items():
                print(
                    f"  {k:<24} {v['protocol']:<11} {v['median_ms']:>10.3f} {v['p99_ms']:>9.3f} "
                    f"{v['p90_ms']:>9.3f} {v['max_ms']:>9.3f}"
                )

        # settle: closed latency connections must be gone before the fd baseline
        time.sleep(0.5)
        fds_before = fd_count(pid)
        st_before = proc_status(pid)
        out["idle_before_load"] = {**st_before, "fds": fds_before}
        sampler = RssSampler(pid)
        cpu0 = cpu_seconds(pid)
        sampler.start()
        res = asyncio.run(load(url, a.clients, a.load_calls))
        sampler.stop()
        server_cpu = cpu_seconds(pid) - cpu0
        fds_after = fd_count(pid)
        deadline = time.monotonic() + 10
        while fds_after != fds_before and time.monotonic() < deadline:
            time.sleep(0.1)
            fds_after = fd_count(pid)
        st_after = proc_status(pid)
        res.update(
            fds_before=fds_before,
            fds_max_during=sampler.max_fds,
            fds_after=fds_after,
            idle_rss_kb=st_before["VmRSS"],
            peak_rss_sampled_kb=sampler.peak_kb,
            peak_rss_hwm_kb=st_after["VmHWM"],
            peak_rss_kb=max(st_after["VmHWM"], sampler.peak_kb),
            server_cpu_s=round(server_cpu, 2),
            rss_after_kb=st_after["VmRSS"],
            threads_after=st_after["Threads"],
        )
        out["load"] = res
        print(f"\nload: {a.clients} concurrent SDK clients (half 2026-07-28, half legacy), {a.load_calls} calls")
        print(f"  ok {res['ok']}, failed {res['failed']}, wall {res['wall_s']} s, {res['calls_per_s']} calls/s")
        print(
            f"  server CPU time during load: {res['server_cpu_s']} s over {res['wall_s']} s wall "
            f"({100 * res['server_cpu_s'] / res['wall_s']:.0f}% of one core; the Python clients use the rest)"
        )
        for k, v in res["latency_by_tool"].items():
            print(f"  {k:<15} n={v['n']:<5} median {v['median_ms']:.3f} ms  p99 {v['p99_ms']:.3f} ms")
        print(f"  server fds: before {fds_before}, max during {sampler.max_fds}, after {fds_after}")
        print(
            f"  server RSS: idle {st_before['VmRSS']} kB, peak {res['peak_rss_kb']} kB "
            f"(VmHWM {st_after['VmHWM']} kB, highest sampled VmRSS {sampler.peak_kb} kB), after {st_after['VmRSS']} kB"
        )
        for f in res["failures_sample"]:
            print(f"  failure: {f}")
        if res["failed"] or res["ok"] != a.load_calls:
            problems.append(f"{res['failed']} failed calls")
        if fds_after != fds_before:
            problems.append(f"fd count did not return ({fds_before} -> {fds_after})")
        if proc.poll() is not None:
            problems.append(f"server exited with {proc.returncode}")
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if problems:
            log = (tmp / "server.log").read_text(errors="replace").splitlines()
            print("--- last server log lines ---")
            print("\n".join(log[-15:]))
        shutil.rmtree(tmp, ignore_errors=True)

    out["problems"] = problems
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nbench: {'OK' if not problems else 'FAILED: ' + '; '.join(problems)}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
