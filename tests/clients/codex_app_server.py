#!/usr/bin/env python3
"""Codex CLI's own MCP client against both servers, with no model.

Codex `app-server` (JSONL JSON-RPC on stdio, the interface its IDE extension
uses) is given a CODEX_HOME whose config.toml names serverfs-mcp and
serverfs-dev, over stdio and over Streamable HTTP. Through Codex's client we
then list every server's tools (`mcpServerStatus/list`), open a thread
(`thread/start`, no turn: no model is asked) and call every tool
(`mcpServer/tool/call`), checking each answer. Codex validates nothing for
us, so the checks here are ours: every tool listed, each call's result is
not an error (or is the error we provoked), structured content present.

    python3 codex_app_server.py --codex PATH --mcp BIN --dev BIN
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

READ_TOOLS = {"list_directory", "find_files", "search_text", "read_text_file", "stat_file"}
MCP_TOOLS = READ_TOOLS | {"list_workdirs"}
DEV_TOOLS = READ_TOOLS | {
    "read_file", "write_file", "apply_patch", "bash",
    "shell_open", "shell_write", "shell_read", "shell_close", "shell_list",
}
# file_link exists over HTTP only.
DEV_HTTP_TOOLS = DEV_TOOLS | {"file_link"}

passed = 0
failed = 0


def check(name: str, ok: bool, detail: str = "") -> None:
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail[:600]}")


class AppServer:
    """One `codex app-server` process: requests by id, notifications ignored."""

    def __init__(self, codex: str, home: Path, cwd: Path, env_extra: dict[str, str]):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
        env.update({"CODEX_HOME": str(home), "RUST_LOG": "warn"}, **env_extra)
        self.proc = subprocess.Popen(
            [codex, "app-server"], cwd=cwd, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(home / "stderr.log", "wb"),
        )
        self.next_id = 0
        self.responses: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "id" in msg and ("result" in msg or "error" in msg):
                self.responses.put(msg)
            elif "id" in msg and "method" in msg:
                # A server->client request (approval, elicitation): refuse it.
                self._send({"id": msg["id"], "error": {"code": -32601, "message": "not supported"}})

    def _send(self, msg: dict) -> None:
        assert self.proc.stdin
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict, timeout: float = 120) -> dict:
        self.next_id += 1
        rid = self.next_id
        self._send({"id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            msg = self.responses.get(timeout=max(0.1, deadline - time.monotonic()))
            if msg["id"] == rid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def notify(self, method: str) -> None:
        self._send({"method": method})

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("server never became healthy")


def toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def result_text(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


def call(app: AppServer, thread: str, server: str, tool: str, args: dict) -> dict:
    return app.request("mcpServer/tool/call", {
        "server": server, "threadId": thread, "tool": tool, "arguments": args,
    })


def expect_ok(app, thread, server, tool, args, label=None) -> dict:
    label = label or f"{server}: {tool}"
    try:
        res = call(app, thread, server, tool, args)
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        check(label, False, str(e))
        return {}
    ok = not res.get("isError") and res.get("structuredContent") is not None
    check(label, ok, json.dumps(res))
    return res


def expect_error(app, thread, server, tool, args, code) -> None:
    label = f"{server}: {tool} refused with {code}"
    try:
        res = call(app, thread, server, tool, args)
    except Exception as e:  # noqa: BLE001
        check(label, False, str(e))
        return
    check(label, bool(res.get("isError")) and result_text(res).startswith(code + ":"), json.dumps(res))


def exercise_read_tools(app, thread, server: str, scope: dict) -> None:
    expect_ok(app, thread, server, "list_directory", {**scope, "path": ""})
    expect_ok(app, thread, server, "find_files", {**scope, "pattern": "*.md"})
    expect_ok(app, thread, server, "search_text", {**scope, "query": "needle"})
    expect_ok(app, thread, server, "read_text_file", {**scope, "path": "README.md"})
    expect_ok(app, thread, server, "stat_file", {**scope, "path": "README.md"})
    expect_error(app, thread, server, "read_text_file", {**scope, "path": "../etc/passwd"},
                 "PATH_OUTSIDE_WORKDIR")


def exercise_dev_tools(app, thread, server: str, http: bool) -> None:
    exercise_read_tools(app, thread, server, {})
    name = f"from-codex-{server}.txt"
    expect_ok(app, thread, server, "write_file", {"path": name, "content": "one\n", "mode": "create"})
    expect_ok(app, thread, server, "read_file", {"path": name})
    patch = f"*** Begin Patch\n*** Update File: {name}\n@@\n-one\n+two\n*** End Patch\n"
    expect_ok(app, thread, server, "apply_patch", {"patch": patch})
    res = expect_ok(app, thread, server, "bash", {"command": f"cat {name}"})
    check(f"{server}: bash saw the patched file", (res.get("structuredContent") or {}).get("stdout") == "two\n",
          json.dumps(res))
    opened = expect_ok(app, thread, server, "shell_open", {})
    sid = (opened.get("structuredContent") or {}).get("session_id", "")
    expect_ok(app, thread, server, "shell_write", {"session_id": sid, "input": "echo hi\n"})
    expect_ok(app, thread, server, "shell_read", {"session_id": sid, "offset": 0, "wait_ms": 100})
    expect_ok(app, thread, server, "shell_list", {})
    expect_ok(app, thread, server, "shell_close", {"session_id": sid})
    if http:
        expect_ok(app, thread, server, "file_link", {"path": name, "method": "GET", "ttl_seconds": 60})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--codex", required=True)
    ap.add_argument("--mcp", required=True, help="serverfs-mcp binary")
    ap.add_argument("--dev", help="serverfs-dev binary (skipped when absent)")
    args = ap.parse_args()
    # Codex starts stdio servers from its own working directory.
    args.mcp = str(Path(args.mcp).resolve())
    args.dev = args.dev and str(Path(args.dev).resolve())

    # Not below /tmp: serverfs-dev refuses a state dir there (commands can write it).
    # (/var/tmp when the checkout itself lives below /tmp.)
    base = Path(__file__).resolve().parents[2] / "target"
    base = Path("/var/tmp") if base.is_relative_to("/tmp") else base
    base.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="serverfs-codex-", dir=base) as tmp:
        tmp = Path(tmp)
        work = tmp / "work"
        project = tmp / "project"
        for d in (work, project):
            d.mkdir()
            (d / "README.md").write_text("# demo\nneedle here\n")
        home = tmp / "codex-home"
        home.mkdir()

        token = secrets.token_hex(32)
        token_file = tmp / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        servers: list[subprocess.Popen] = []
        try:
            mcp_port = free_port()
            servers.append(subprocess.Popen(
                [args.mcp, "--workdir", f"work={work}", "--listen", f"127.0.0.1:{mcp_port}",
                 "--token-file", str(token_file)],
                stdout=subprocess.DEVNULL, stderr=open(tmp / "mcp-http.log", "wb")))
            wait_healthy(mcp_port, servers[-1])
            config = [
                "[mcp_servers.ro_stdio]",
                f"command = {toml_str(args.mcp)}",
                f"args = [\"--stdio\", \"--workdir\", {toml_str(f'work={work}')}]",
                "[mcp_servers.ro_http]",
                f"url = {toml_str(f'http://127.0.0.1:{mcp_port}/mcp')}",
                "bearer_token_env_var = \"SERVERFS_TEST_TOKEN\"",
            ]
            expected = {"ro_stdio": MCP_TOOLS, "ro_http": MCP_TOOLS}
            if args.dev:
                dev_port = free_port()
                servers.append(subprocess.Popen(
                    [args.dev, "--root", str(project), "--listen", f"127.0.0.1:{dev_port}",
                     "--token-file", str(token_file), "--state-dir", str(tmp / "state-http")],
                    stdout=subprocess.DEVNULL, stderr=open(tmp / "dev-http.log", "wb")))
                wait_healthy(dev_port, servers[-1])
                config += [
                    "[mcp_servers.dev_stdio]",
                    f"command = {toml_str(args.dev)}",
                    f"args = [\"--stdio\", \"--root\", {toml_str(str(project))}, \"--state-dir\", "
                    f"{toml_str(str(tmp / 'state-stdio'))}]",
                    "[mcp_servers.dev_http]",
                    f"url = {toml_str(f'http://127.0.0.1:{dev_port}/mcp')}",
                    "bearer_token_env_var = \"SERVERFS_TEST_TOKEN\"",
                ]
                expected |= {"dev_stdio": DEV_TOOLS, "dev_http": DEV_HTTP_TOOLS}
            (home / "config.toml").write_text("\n".join(config) + "\n")

            app = AppServer(args.codex, home, tmp, {"SERVERFS_TEST_TOKEN": token})
            try:
                init = app.request("initialize", {"clientInfo": {"name": "serverfs-ci", "version": "0"}})
                check("codex app-server initialize", bool(init), json.dumps(init))
                app.notify("initialized")
                status = app.request("mcpServerStatus/list", {})
                by_name = {s["name"]: s for s in status["data"]}
                for name, tools in expected.items():
                    s = by_name.get(name)
                    listed = set((s or {}).get("tools") or {})
                    check(f"{name}: every tool listed by Codex", listed == tools,
                          f"missing {sorted(tools - listed)} extra {sorted(listed - tools)} "
                          f"status {json.dumps(s)[:400]}")
                thread = app.request("thread/start", {"cwd": str(tmp), "ephemeral": True})["thread"]["id"]
                for name in ("ro_stdio", "ro_http"):
                    expect_ok(app, thread, name, "list_workdirs", {})
                    exercise_read_tools(app, thread, name, {"workdir": "work"})
                if args.dev:
                    exercise_dev_tools(app, thread, "dev_stdio", http=False)
                    exercise_dev_tools(app, thread, "dev_http", http=True)
            finally:
                app.close()
        finally:
            for p in servers:
                p.terminate()
                p.wait(timeout=30)
    print(f"codex app-server: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
