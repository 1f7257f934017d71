#!/usr/bin/env python3
"""Interop check of serverfs-dev with the official MCP Python SDK.

The real binary over Streamable HTTP (auto = 2026-07-28 stateless, legacy =
initialize) and stdio (auto, legacy): lists every tool, then read -> patch ->
read back, write_file, bash, a shell session, the refusals, and a
cancelled bash call (nothing of it may be left); then, over raw stdio with a pty as the
server's controlling terminal, that no command can type into that terminal (TIOCSTI). The last line
printed is `interop-dev: N passed, M failed`.

Environment: SERVERFS_DEV_BIN (default target/release/serverfs-dev).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from interop import REPO, Results, free_port, text_of

EXPECTED_TOOLS = {
    "list_directory", "find_files", "search_text", "read_text_file", "stat_file",
    "read_file", "write_file", "apply_patch",
    "bash", "shell_open", "shell_write", "shell_read", "shell_close", "shell_list",
}
SOURCE = "def greet(name):\n    return 'hello ' + name\n\n\ndef main():\n    print(greet('world'))\n"
PATCH = (
    "*** Begin Patch\n*** Update File: app/main.py\n@@ def greet(name):\n"
    "-    return 'hello ' + name\n+    return 'hi ' + name\n*** End Patch\n"
)


def fresh_project(base: Path, tag: str) -> Path:
    root = base / tag.replace("/", "-")
    (root / "app").mkdir(parents=True)
    (root / "app" / "main.py").write_text(SOURCE, encoding="utf-8")
    (root / ".env").write_text("SECRET=1\n", encoding="utf-8")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    return root


async def run_checks(client: Client, res: Results, tag: str, root: Path, base: str | None) -> None:
    """`base` is the server's http://host:port over HTTP (file_link exists there only)."""

    def chk(label: str, cond: bool, detail: Any = None) -> bool:
        return res.check(f"[{tag}] {label}", cond, detail)

    async def call(name: str, args: dict[str, Any]) -> Any:
        return await client.call_tool(name, args)

    tools = {t.name: t for t in (await client.list_tools()).tools}
    expected = EXPECTED_TOOLS | ({"file_link"} if base else set())
    chk("tools/list has every tool", set(tools) == expected, sorted(tools))
    if base:
        r = await call("file_link", {"path": "app/main.py", "method": "GET", "ttl_seconds": 60})
        url = (r.structured_content or {}).get("url", "")
        try:
            with urllib.request.urlopen(base + url, timeout=10) as got:
                body = got.read().decode()
        except (urllib.error.URLError, OSError) as e:
            body = f"{type(e).__name__}: {e}"
        chk("file_link GET downloads the file", body == SOURCE, body[:200])
    for name, tool in tools.items():
        chk(f"{name} has an output schema", tool.output_schema is not None)

    r = await call("read_file", {"path": "app/main.py", "start_line": 2, "end_line": 2})
    chk("read_file returns the line", (r.structured_content or {}).get("content") == "    return 'hello ' + name\n", r.structured_content)
    r = await call("apply_patch", {"patch": PATCH, "dry_run": True})
    chk("apply_patch dry run writes nothing", (root / "app" / "main.py").read_text() == SOURCE, text_of(r))
    r = await call("apply_patch", {"patch": PATCH})
    chk("apply_patch applies", not r.is_error and (r.structured_content or {}).get("applied") is True, text_of(r))
    r = await call("read_file", {"path": "app/main.py"})
    chk("read back shows the patch", "'hi ' + name" in (r.structured_content or {}).get("content", ""), r.structured_content)
    r = await call("apply_patch", {"patch": PATCH})
    chk("re-applying is PATCH_CONTEXT_NOT_FOUND", r.is_error and text_of(r).startswith("PATCH_CONTEXT_NOT_FOUND"), text_of(r))
    r = await call("write_file", {"path": "docs/new.md", "content": "# New\n"})
    chk("write_file creates with parents", (root / "docs" / "new.md").read_text() == "# New\n", text_of(r))
    r = await call("write_file", {"path": "docs/new.md", "content": "x"})
    chk("write_file create onto a file is ALREADY_EXISTS", r.is_error and text_of(r).startswith("ALREADY_EXISTS"), text_of(r))
    for path, code in [(".env", "DENIED_PATH"), (".git/config", "DENIED_PATH"), ("../x", "PATH_OUTSIDE_WORKDIR")]:
        r = await call("read_file", {"path": path})
        chk(f"read_file {path} is {code}", r.is_error and text_of(r).startswith(code), text_of(r))
    r = await call("bash", {"command": "echo out; exit 3", "workdir": "app"})
    sc = r.structured_content or {}
    chk("bash runs and reports the exit code", not r.is_error and sc.get("exit_code") == 3 and sc.get("stdout") == "out\n", sc)
    r = await call("shell_open", {})
    sid = (r.structured_content or {}).get("session_id", "")
    chk("shell_open gives a 32-hex id", len(sid) == 32, r.structured_content)
    await call("shell_write", {"session_id": sid, "input": "echo from-the-shell\n"})
    out, offset = "", 0
    for _ in range(20):
        r = await call("shell_read", {"session_id": sid, "offset": offset, "wait_ms": 2000})
        sc = r.structured_content or {}
        out += sc.get("output", "")
        offset = sc.get("next_offset", offset)
        if "from-the-shell" in out:
            break
    chk("shell_read returns the output", "from-the-shell" in out, out)
    r = await call("shell_close", {"session_id": sid})
    chk("shell_close closes", not r.is_error, text_of(r))
    r = await call("list_directory", {"path": ""})
    names = {e["name"] for e in (r.structured_content or {}).get("entries", [])}
    chk("listing hides .git and .env", "app" in names and ".git" not in names and ".env" not in names, names)

    # Cancel: the SDK abandons the call (a task cancelled mid-call) and sends
    # notifications/cancelled; the command's whole tree must go.
    arg = f"300.{os.getpid()}{time.monotonic_ns() % 10**9}"
    call_task = asyncio.create_task(
        call("bash", {"command": f"sleep {arg} & sleep {arg}", "timeout_seconds": 600})
    )
    started = await wait_for(lambda: bool(pids_with(arg)))
    chk("the command to cancel started", started)
    cancelled_at = time.monotonic()
    call_task.cancel()
    try:
        await call_task
    except asyncio.CancelledError:
        pass
    gone = await wait_for(lambda: not pids_with(arg))
    ms = (time.monotonic() - cancelled_at) * 1000
    print(f"interop-dev: [{tag}] cancel to no process left: {ms:.0f} ms")
    chk("a cancelled bash call leaves nothing running", gone, pids_with(arg))


def pids_with(needle: str) -> list[int]:
    """Live processes whose command line contains `needle`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if needle.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


async def wait_for(condition, seconds: float = 30.0) -> bool:
    """Polls `condition` until it holds (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


INJECT = (
    "python3 -c 'import fcntl, os, sys, termios\n"
    "for path in sys.argv[1:]:\n"
    "    try:\n"
    "        fcntl.ioctl(os.open(path, os.O_RDWR), termios.TIOCSTI, b\"X\")\n"
    "        print(path, \"injected\")\n"
    "    except OSError as e:\n"
    "        print(path, e.strerror)' /dev/tty {pts}"
)


def typed_before_sentinel(master: int, slave: int) -> str:
    """Types a sentinel on the terminal and reads the terminal's input up to it: what a
    command pushed into it (TIOCSTI) comes first."""
    import select
    os.write(master, b"S")
    seen = b""
    deadline = time.monotonic() + 30
    while not seen.endswith(b"S") and time.monotonic() < deadline:
        if select.select([slave], [], [], 1)[0]:
            seen += os.read(slave, 64)
    return seen[:-1].decode(errors="replace")


def check_terminal_injection(res: Results, binary: str, base: Path) -> None:
    """A command cannot type into the terminal the server runs under (TIOCSTI): the server
    is started as the leader of a session whose controlling terminal is a fresh pty, MCP
    going over pipes. The negative control, a plain child in that session, can."""
    import fcntl
    import termios
    import tty

    def chk(label: str, cond: bool, detail: Any = None) -> bool:
        return res.check(f"[stdio/pty] {label}", cond, detail)

    master, slave = os.openpty()
    tty.setraw(slave)
    pts = os.ttyname(slave)

    def own_session_with_the_pty() -> None:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    control = subprocess.run(
        ["bash", "-c", INJECT.format(pts=pts)], preexec_fn=own_session_with_the_pty,
        pass_fds=(slave,), capture_output=True, text=True, timeout=60,
    )
    chk("control: a plain process in the session types into its terminal",
        typed_before_sentinel(master, slave) == "XX", control.stdout)

    root = fresh_project(base, "pty")
    proc = subprocess.Popen(
        [binary, "--stdio", "--root", str(root), "--state-dir", str(base / "state-pty")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        preexec_fn=own_session_with_the_pty, pass_fds=(slave,), text=True,
    )
    try:
        def send(message: dict[str, Any]) -> None:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()

        def answer(id_: int) -> dict[str, Any]:
            while True:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("serverfs-dev closed stdout")
                message = json.loads(line)
                if message.get("id") == id_:
                    return message

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pty-check", "version": "1"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "bash", "arguments": {"command": INJECT.format(pts=pts)}}})
        out = (answer(2).get("result") or {}).get("structuredContent") or {}
        chk("the command ran its attempts", "/dev/tty" in out.get("stdout", ""), out)
        chk("nothing a command does reaches the server's terminal",
            typed_before_sentinel(master, slave) == "", out.get("stdout"))
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        os.close(master)
        os.close(slave)


async def run_mode(res: Results, tag: str, make_client, root: Path, base: str | None = None) -> None:
    try:
        async with make_client() as client:
            await run_checks(client, res, tag, root, base)
    except Exception as e:  # one mode's crash is a failure; the others still run
        # A task group's errors are what says what happened: name them.
        inner = [f"{type(x).__name__}: {x}" for x in getattr(e, "exceptions", [])]
        res.check(f"[{tag}] session completed without exception", False,
                  f"{type(e).__name__}: {e} {inner}")


def start_http(binary: str, root: Path, state: Path, log) -> tuple[subprocess.Popen, int]:
    for _ in range(5):
        port = free_port()
        proc = subprocess.Popen(
            [binary, "--root", str(root), "--state-dir", str(state), "--listen", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return proc, port
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raise RuntimeError("serverfs-dev did not become healthy")


async def main() -> int:
    binary = os.environ.get("SERVERFS_DEV_BIN", str(REPO / "target" / "release" / "serverfs-dev"))
    res = Results()
    # Not below /tmp: serverfs-dev refuses a state dir there (commands can write it).
    # (/var/tmp when the checkout itself lives below /tmp.)
    base = Path(__file__).resolve().parents[2] / "target"
    base = Path("/var/tmp") if base.is_relative_to("/tmp") else base
    base.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="serverfs-interop-dev-", dir=base))
    log = open(tmp / "server.log", "ab")
    procs = []
    try:
        for tag, mode in [("http/auto", "auto"), ("http/legacy", "legacy")]:
            root = fresh_project(tmp, tag)
            proc, port = start_http(binary, root, tmp / f"state-{mode}", log)
            procs.append(proc)
            base = f"http://127.0.0.1:{port}"
            # No credential configured: /mcp admits the token the server drew
            # for this start, from its file in the state dir (in the query).
            token = (tmp / f"state-{mode}" / f"local-token.{port}").read_text()
            mcp = f"{base}/mcp?token={token}"
            await run_mode(res, tag, lambda: Client(mcp, mode=mode, cache=None), root, base)
        for tag, mode in [("stdio/auto", "auto"), ("stdio/legacy", "legacy")]:
            root = fresh_project(tmp, tag)
            params = StdioServerParameters(
                command=binary, args=["--stdio", "--root", str(root), "--state-dir", str(tmp / f"state-s{mode}")]
            )
            await run_mode(res, tag, lambda: Client(stdio_client(params, errlog=log), mode=mode, cache=None), root)
        check_terminal_injection(res, binary, tmp)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
        log.close()
        if res.failed:
            print((tmp / "server.log").read_text(errors="replace")[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"interop-dev: {res.passed} passed, {res.failed} failed")
    return 0 if res.failed == 0 and res.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
