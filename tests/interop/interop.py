#!/usr/bin/env python3
"""Interop check: drive the real serverfs-mcp binary with the official MCP Python SDK.

Runs the same checks over four connections:
  * Streamable HTTP, mode "auto"   (server/discover -> 2026-07-28 stateless flow)
  * Streamable HTTP, mode "legacy" (initialize handshake, 2025-era)
  * stdio, mode "auto"
  * stdio, mode "legacy"

Every check is counted; any failure makes the script exit 1. The last line printed is
`interop: N passed, M failed`.

Environment:
  SERVERFS_BIN  path of the binary (default: target/release/serverfs-mcp, relative to the
                repository root)
  INTEROP_VERBOSE=1  print every passing check too
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

REPO = Path(__file__).resolve().parents[2]
ALIAS = "fixture"
EXPECTED_TOOLS = {
    "list_workdirs",
    "list_directory",
    "find_files",
    "search_text",
    "read_text_file",
    "stat_file",
}
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
VERBOSE = os.environ.get("INTEROP_VERBOSE") == "1"

README = "# Fixture\n\nHello from the ServerFS interop fixture.\nSecond paragraph line.\n"
MAIN_PY = (
    "import os\n"
    "\n"
    "\n"
    "def main():\n"
    '    url = os.environ["DATABASE_URL"]\n'
    "    print(url)\n"
)
COMPOSE = "services:\n  app:\n    image: example/app:1.0\n    environment:\n      - DATABASE_URL\n"
CHINESE_NAME = "中文说明.txt"
CHINESE = "你好，世界\n第二行：只读访问\n"
DOTENV = "DATABASE_URL=postgres://secret@db/prod\n"


class Results:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0
        self.failures: list[str] = []

    def check(self, label: str, cond: bool, detail: Any = None) -> bool:
        if cond:
            self.passed += 1
            if VERBOSE:
                print(f"  ok   {label}")
        else:
            self.failed += 1
            msg = f"{label}" + (f" -- got: {detail!r}"[:2000] if detail is not None else "")
            self.failures.append(msg)
            print(f"  FAIL {msg}")
        return cond


def build_fixture(root: Path) -> None:
    (root / "project").mkdir(parents=True)
    (root / "README.md").write_text(README, encoding="utf-8")
    (root / "project" / "main.py").write_text(MAIN_PY, encoding="utf-8")
    (root / "project" / "docker-compose.yml").write_text(COMPOSE, encoding="utf-8")
    (root / CHINESE_NAME).write_text(CHINESE, encoding="utf-8")
    (root / ".env").write_text(DOTENV, encoding="utf-8")
    os.symlink("/etc", root / "etc_link")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http_server(binary: str, root: Path, log_path: Path) -> tuple[subprocess.Popen, int]:
    """Start the binary on a free port; retry a few times in case the port was taken."""
    last_err = ""
    for _ in range(5):
        port = free_port()
        log = open(log_path, "ab")
        proc = subprocess.Popen(
            [binary, "--workdir", f"{ALIAS}={root}", "--listen", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                    if r.status == 200:
                        return proc, port
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.1)
        last_err = f"exit code {proc.poll()}"
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raise RuntimeError(f"serverfs-mcp did not become healthy ({last_err}); log: {log_path}")


def text_of(result: Any) -> str:
    parts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return "".join(parts)


async def run_checks(client: Client, res: Results, tag: str, root: Path, modern_expected: bool | None) -> None:
    def chk(label: str, cond: bool, detail: Any = None) -> bool:
        return res.check(f"[{tag}] {label}", cond, detail)

    seen_json: list[str] = []

    def record(obj: Any) -> Any:
        try:
            seen_json.append(obj.model_dump_json(by_alias=True))
        except AttributeError:
            seen_json.append(json.dumps(obj, default=str))
        return obj

    async def call(name: str, args: dict[str, Any]) -> Any:
        try:
            return record(await client.call_tool(name, args))
        except MCPError as e:  # a JSON-RPC error instead of a tool result: let the checks fail
            chk(f"tools/call {name} answered with a result", False, {"code": e.code, "message": e.message})
            return RpcErrorResult(e)

    # ---- negotiated protocol and instructions ---------------------------------------
    version = client.protocol_version
    print(f"[{tag}] negotiated protocol version {version}")
    if modern_expected is True:
        chk("negotiates 2026-07-28", version == "2026-07-28", version)
    elif modern_expected is False:
        chk(
            "negotiates a handshake-era version",
            version in {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"},
            version,
        )
    instr = client.instructions or ""
    chk("instructions mention list_workdirs", "list_workdirs" in instr, instr)

    # ---- tools/list -----------------------------------------------------------------
    listing = record(await client.list_tools())
    tools = {t.name: t for t in listing.tools}
    chk("tools/list has exactly the six tools", set(tools) == EXPECTED_TOOLS, sorted(tools))
    for name in sorted(EXPECTED_TOOLS & set(tools)):
        t = tools[name]
        a = t.annotations
        chk(
            f"{name}: readOnlyHint true, openWorldHint false",
            a is not None and a.read_only_hint is True and a.open_world_hint is False,
            a,
        )
        chk(
            f"{name}: destructiveHint false, idempotentHint true",
            a is not None and a.destructive_hint is False and a.idempotent_hint is True,
            a,
        )
        chk(
            f"{name}: outputSchema is an object schema",
            isinstance(t.output_schema, dict) and t.output_schema.get("type") == "object",
            t.output_schema,
        )
        chk(f"{name}: inputSchema is an object schema", t.input_schema.get("type") == "object", t.input_schema)

    # ---- list_workdirs --------------------------------------------------------------
    r = await call("list_workdirs", {})
    sc = r.structured_content
    chk("list_workdirs succeeds", not r.is_error, text_of(r))
    chk(
        "list_workdirs returns the one alias",
        isinstance(sc, dict) and [w.get("alias") for w in sc.get("workdirs", [])] == [ALIAS],
        sc,
    )
    chk(
        "list_workdirs text content is compact: one alias per line, not the JSON",
        text_of(r).splitlines()[:1] == [ALIAS] and _json_or_none(text_of(r)) is None,
        text_of(r),
    )

    # ---- list_directory -------------------------------------------------------------
    r = await call("list_directory", {"workdir": ALIAS})
    sc = r.structured_content or {}
    entries = sc.get("entries", [])
    names = [e.get("name") for e in entries]
    want = sorted(["README.md", "project", CHINESE_NAME, "etc_link"], key=lambda s: s.encode())
    chk("list_directory root: names in byte order, .env hidden", names == want, names)
    by_name = {e.get("name"): e for e in entries}
    chk(
        "list_directory: types",
        [by_name.get(n, {}).get("type") for n in ["README.md", "project", CHINESE_NAME, "etc_link"]]
        == ["file", "directory", "file", "symlink"],
        entries,
    )
    chk(
        "list_directory: size only on files",
        by_name.get("README.md", {}).get("size") == len(README.encode())
        and by_name.get(CHINESE_NAME, {}).get("size") == len(CHINESE.encode())
        and by_name.get("project", {}).get("size") is None
        and by_name.get("etc_link", {}).get("size") is None,
        entries,
    )
    chk(
        "list_directory: modified_at RFC 3339 UTC",
        all(RFC3339_Z.match(str(e.get("modified_at", ""))) for e in entries),
        [e.get("modified_at") for e in entries],
    )
    chk(
        "list_directory: counters",
        sc.get("returned") == 4 and sc.get("has_more") is False and sc.get("offset") == 0 and sc.get("omitted") == 0,
        {k: v for k, v in sc.items() if k != "entries"},
    )
    r = await call("list_directory", {"workdir": ALIAS, "path": "", "offset": 1, "limit": 2})
    sc = r.structured_content or {}
    chk(
        "list_directory paging offset=1 limit=2",
        [e.get("name") for e in sc.get("entries", [])] == want[1:3]
        and sc.get("has_more") is True
        and sc.get("returned") == 2,
        sc,
    )
    r = await call("list_directory", {"workdir": ALIAS, "path": "project"})
    sc = r.structured_content or {}
    chk(
        "list_directory project/: paths relative to the workdir",
        [(e.get("name"), e.get("path")) for e in sc.get("entries", [])]
        == [("docker-compose.yml", "project/docker-compose.yml"), ("main.py", "project/main.py")],
        sc,
    )

    # ---- find_files -----------------------------------------------------------------
    r = await call("find_files", {"workdir": ALIAS, "pattern": "*.py"})
    sc = r.structured_content or {}
    chk(
        "find_files *.py",
        sc.get("matches") == [{"path": "project/main.py", "type": "file"}]
        and sc.get("returned") == 1
        and sc.get("truncated") is False,
        sc,
    )
    r = await call("find_files", {"workdir": ALIAS, "pattern": "*.{yml,md}"})
    sc = r.structured_content or {}
    chk(
        "find_files *.{yml,md} in walk order",
        [m.get("path") for m in sc.get("matches", [])] == ["README.md", "project/docker-compose.yml"],
        sc,
    )
    r = await call("find_files", {"workdir": ALIAS, "pattern": "*", "limit": 2})
    sc = r.structured_content or {}
    chk(
        "find_files limit=2 truncated with SEARCH_LIMIT_REACHED",
        sc.get("returned") == 2
        and sc.get("truncated") is True
        and sc.get("truncated_reason") == "SEARCH_LIMIT_REACHED",
        sc,
    )
    r = await call("find_files", {"workdir": ALIAS, "pattern": "*env*"})
    sc = r.structured_content or {}
    chk("find_files never reports .env", sc.get("matches") == [] and sc.get("truncated") is False, sc)

    # ---- search_text ----------------------------------------------------------------
    main_lines = MAIN_PY.splitlines()
    db_line = next(i for i, line in enumerate(main_lines, 1) if "DATABASE_URL" in line)
    compose_lines = COMPOSE.splitlines()
    compose_line = next(i for i, line in enumerate(compose_lines, 1) if "DATABASE_URL" in line)
    r = await call("search_text", {"workdir": ALIAS, "query": "DATABASE_URL"})
    sc = r.structured_content or {}
    got = [(m.get("path"), m.get("line"), m.get("text")) for m in sc.get("matches", [])]
    chk(
        "search_text DATABASE_URL: walk order, .env skipped",
        got
        == [
            ("project/docker-compose.yml", compose_line, compose_lines[compose_line - 1]),
            ("project/main.py", db_line, main_lines[db_line - 1]),
        ],
        got,
    )
    chk("search_text counters", sc.get("returned") == 2 and sc.get("truncated") is False, sc)
    r = await call(
        "search_text",
        {"workdir": ALIAS, "path": "project", "query": "database_url", "glob": "*.py", "case_sensitive": False},
    )
    sc = r.structured_content or {}
    chk(
        "search_text case-insensitive with glob",
        [(m.get("path"), m.get("line")) for m in sc.get("matches", [])] == [("project/main.py", db_line)],
        sc,
    )
    r = await call("search_text", {"workdir": ALIAS, "query": "只读"})
    sc = r.structured_content or {}
    chk(
        "search_text finds UTF-8 text",
        [(m.get("path"), m.get("line")) for m in sc.get("matches", [])] == [(CHINESE_NAME, 2)],
        sc,
    )

    # ---- read_text_file -------------------------------------------------------------
    r = await call("read_text_file", {"workdir": ALIAS, "path": "README.md"})
    sc = r.structured_content or {}
    n_lines = len(README.splitlines())
    chk(
        "read_text_file README.md whole",
        sc.get("content") == README
        and sc.get("start_line") == 1
        and sc.get("end_line") == n_lines
        and sc.get("has_more") is False
        and sc.get("next_start_line") is None
        and sc.get("bytes_returned") == len(README.encode())
        and sc.get("workdir") == ALIAS
        and sc.get("path") == "README.md",
        sc,
    )
    r = await call("read_text_file", {"workdir": ALIAS, "path": "README.md", "start_line": 2, "max_lines": 2})
    sc = r.structured_content or {}
    lines = README.splitlines(keepends=True)
    chk(
        "read_text_file window start_line=2 max_lines=2",
        sc.get("content") == "".join(lines[1:3])
        and sc.get("end_line") == 3
        and sc.get("has_more") is True
        and sc.get("next_start_line") == 4,
        sc,
    )
    r = await call("read_text_file", {"workdir": ALIAS, "path": CHINESE_NAME})
    sc = r.structured_content or {}
    chk(
        "read_text_file 中文 name and content",
        sc.get("content") == CHINESE and sc.get("bytes_returned") == len(CHINESE.encode("utf-8")),
        sc,
    )

    # ---- stat_file ------------------------------------------------------------------
    r = await call("stat_file", {"workdir": ALIAS, "path": "README.md"})
    sc = r.structured_content or {}
    chk(
        "stat_file README.md",
        sc.get("type") == "file"
        and sc.get("size") == len(README.encode())
        and sc.get("mime_type") == "text/markdown"
        and RFC3339_Z.match(str(sc.get("modified_at", ""))) is not None
        and sc.get("workdir") == ALIAS
        and sc.get("path") == "README.md",
        sc,
    )
    r = await call("stat_file", {"workdir": ALIAS, "path": "project/docker-compose.yml"})
    sc = r.structured_content or {}
    chk("stat_file .yml is application/yaml", sc.get("mime_type") == "application/yaml", sc)
    r = await call("stat_file", {"workdir": ALIAS, "path": "project"})
    sc = r.structured_content or {}
    chk(
        "stat_file directory: no size, mime null",
        sc.get("type") == "directory" and sc.get("size") is None and sc.get("mime_type") is None,
        sc,
    )
    r = await call("stat_file", {"workdir": ALIAS, "path": "etc_link"})
    sc = r.structured_content or {}
    chk(
        "stat_file symlink reports the link, no target",
        sc.get("type") == "symlink" and "/etc" not in json.dumps(sc),
        sc,
    )

    # ---- tool errors ----------------------------------------------------------------
    error_cases = [
        ("read_text_file", {"workdir": ALIAS, "path": "../../etc/passwd"}, "PATH_OUTSIDE_WORKDIR:"),
        ("read_text_file", {"workdir": ALIAS, "path": "etc_link/passwd"}, "SYMLINK_NOT_ALLOWED:"),
        ("read_text_file", {"workdir": ALIAS, "path": ".env"}, "DENIED_PATH:"),
        ("stat_file", {"workdir": ALIAS, "path": "nope.txt"}, "PATH_NOT_FOUND:"),
        ("list_directory", {"workdir": "no-such-alias"}, "WORKDIR_NOT_FOUND:"),
    ]
    for name, args, prefix in error_cases:
        r = await call(name, args)
        txt = text_of(r)
        chk(
            f"{name}({args['workdir']}:{args.get('path', '')}) -> isError, {prefix}",
            r.is_error is True and len(r.content) == 1 and txt.startswith(prefix),
            {"is_error": r.is_error, "text": txt},
        )
    r = await call("read_text_file", {"workdir": ALIAS, "path": "../../etc/passwd"})
    chk("error text never shows /etc content", "root:" not in text_of(r), text_of(r))

    # ---- resources ------------------------------------------------------------------
    tl = record(await client.list_resource_templates())
    templates = [t.uri_template for t in tl.resource_templates]
    chk("resources/templates/list has serverfs://{workdir}/{path}", "serverfs://{workdir}/{path}" in templates, templates)

    async def read_ok(uri: str, label: str) -> Any:
        try:
            return record(await client.read_resource(uri))
        except MCPError as e:
            chk(label, False, {"code": e.code, "message": e.message, "data": e.data})
            return None

    readme_uri = f"serverfs://{ALIAS}/README.md"
    rr = await read_ok(readme_uri, "resources/read README.md")
    if rr is not None:
        chk(
            "resources/read README.md text matches the file",
            len(rr.contents) == 1 and getattr(rr.contents[0], "text", None) == README,
            rr,
        )
        chk("resources/read uri echoed", len(rr.contents) == 1 and str(rr.contents[0].uri) == readme_uri, rr)
    enc = "".join(f"%{b:02X}" for b in CHINESE_NAME.encode("utf-8"))
    rr = await read_ok(f"serverfs://{ALIAS}/{enc}", "resources/read percent-encoded 中文 name")
    if rr is not None:
        chk(
            "resources/read percent-encoded 中文 name",
            len(rr.contents) == 1 and getattr(rr.contents[0], "text", None) == CHINESE,
            rr,
        )
    rr = await read_ok(f"serverfs://{ALIAS}/project/main.py", "resources/read nested path")
    if rr is not None:
        chk(
            "resources/read nested path",
            len(rr.contents) == 1 and getattr(rr.contents[0], "text", None) == MAIN_PY,
            rr,
        )

    # resource errors are JSON-RPC errors: "CODE: message", data.code
    not_found_codes = {-32602} if version == "2026-07-28" else {-32002}
    if version == "2026-07-28":
        not_found_codes.add(-32002)  # rmcp may keep -32002; SEP-2164 prefers -32602
    for uri, code_name, codes in [
        (f"serverfs://{ALIAS}/missing.md", "PATH_NOT_FOUND", not_found_codes),
        ("serverfs://no-such-alias/README.md", "WORKDIR_NOT_FOUND", not_found_codes),
        (f"serverfs://{ALIAS}/.env", "DENIED_PATH", {-32602}),
        (f"serverfs://{ALIAS}/%2E%2E/%2E%2E/etc/passwd", "PATH_OUTSIDE_WORKDIR", {-32602}),
    ]:
        try:
            got_rr = await client.read_resource(uri)
            chk(f"resources/read {uri} -> JSON-RPC error {code_name}", False, got_rr)
        except MCPError as e:
            seen_json.append(json.dumps({"message": e.message, "data": e.data}, default=str))
            data = e.data if isinstance(e.data, dict) else {}
            chk(
                f"resources/read {uri} -> JSON-RPC error {code_name}",
                e.message.startswith(f"{code_name}:") and data.get("code") == code_name and e.code in codes,
                {"code": e.code, "message": e.message, "data": e.data},
            )

    # ---- no host path anywhere ------------------------------------------------------
    blob = "\n".join(seen_json)
    chk("no response contains the fixture's host path", str(root) not in blob, str(root))
    chk("no response contains /workdirs/", "/workdirs/" not in blob, None)


class RpcErrorResult:
    """Stands in for a CallToolResult when the server answered with a JSON-RPC error."""

    def __init__(self, e: MCPError) -> None:
        self.is_error = None
        self.structured_content = None
        self.content: list[Any] = []
        self.error = e

    def model_dump_json(self, **_: Any) -> str:
        return json.dumps({"code": self.error.code, "message": self.error.message, "data": self.error.data}, default=str)


def _json_or_none(s: str) -> Any:
    try:
        return json.loads(s)
    except ValueError:
        return None


async def run_mode(res: Results, tag: str, make_client, root: Path, modern_expected: bool | None) -> None:
    before = res.failed
    try:
        async with make_client() as client:
            await run_checks(client, res, tag, root, modern_expected)
    except Exception as e:  # a crash in one mode is a failure, the other modes still run
        traceback.print_exc()
        res.check(f"[{tag}] session completed without exception", False, f"{type(e).__name__}: {e}")
    print(f"[{tag}] done: {res.failed - before} failure(s)")


def check_stdio_eof(binary: str, root: Path, res: Results, errlog) -> None:
    """when stdin closes, the stdio server exits 0 within a few seconds."""
    p = subprocess.Popen(
        [binary, "--stdio", "--workdir", f"{ALIAS}={root}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
    )
    time.sleep(0.3)
    t0 = time.monotonic()
    p.stdin.close()
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    res.check(
        "[stdio] closing stdin makes the server exit 0 within 5 s",
        rc == 0,
        {"exit": rc, "seconds": round(time.monotonic() - t0, 2)},
    )


async def main() -> int:
    binary = os.environ.get("SERVERFS_BIN", str(REPO / "target" / "release" / "serverfs-mcp"))
    if not os.path.isabs(binary):
        binary = str(REPO / binary)
    if not os.access(binary, os.X_OK):
        print(f"interop: binary not found or not executable: {binary}")
        print("interop: 0 passed, 1 failed")
        return 1

    res = Results()
    tmp = Path(tempfile.mkdtemp(prefix="serverfs-interop-"))
    root = tmp / "root"
    build_fixture(root)
    log_path = tmp / "server-http.log"
    stdio_log = open(tmp / "server-stdio.log", "w")
    proc = None
    try:
        proc, port = start_http_server(binary, root, log_path)
        url = f"http://127.0.0.1:{port}/mcp"
        print(f"serverfs-mcp pid {proc.pid} listening on {url}")

        await run_mode(res, "http/auto", lambda: Client(url, mode="auto", cache=None), root, True)
        await run_mode(res, "http/legacy", lambda: Client(url, mode="legacy", cache=None), root, False)

        params = StdioServerParameters(command=binary, args=["--stdio", "--workdir", f"{ALIAS}={root}"])
        await run_mode(
            res,
            "stdio/auto",
            lambda: Client(stdio_client(params, errlog=stdio_log), mode="auto", cache=None),
            root,
            None,
        )
        await run_mode(
            res,
            "stdio/legacy",
            lambda: Client(stdio_client(params, errlog=stdio_log), mode="legacy", cache=None),
            root,
            False,
        )
        res.check("HTTP server still running after all sessions", proc.poll() is None, proc.poll())
        check_stdio_eof(binary, root, res, stdio_log)
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        stdio_log.close()
        if res.failed:
            for name in ("server-http.log", "server-stdio.log"):
                p = tmp / name
                if p.exists():
                    tail = p.read_text(errors="replace").splitlines()[-20:]
                    print(f"--- last lines of {name} ---")
                    print("\n".join(tail))
        shutil.rmtree(tmp, ignore_errors=True)

    if res.failures:
        print("failures:")
        for f in res.failures:
            print(f"  - {f}")
    print(f"interop: {res.passed} passed, {res.failed} failed")
    return 0 if res.failed == 0 and res.passed > 0 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
