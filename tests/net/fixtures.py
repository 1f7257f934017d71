#!/usr/bin/env python3
"""Local network fixtures for serverfs-dev's network allowlist (issue 35): no internet needed.

    python3 tests/net/fixtures.py DIR [--big-mb N]

Makes DIR (world-readable, so commands run as `nobody` can read the CA) and fills it with a
test CA, a server certificate for 127.0.0.1, ::1 and localhost, and a web root, `DIR/www/`:

  hello.txt            one line, HELLO below
  big.bin              N MiB (only with --big-mb N; the download benchmark)
  repo.git/            a bare git repository with one commit (file README, text GIT_README),
                       served the "dumb" way (`git update-server-info`, static files)
  simple/              a PEP 503 simple index with one pure-Python wheel (PIP_NAME, PIP_VERSION),
  packages/            `pip download --no-deps --index-url URL/simple/ PIP_NAME`
  index/, crates/      a cargo sparse registry (config.json, the index file of CRATE_NAME,
                       CRATE_VERSION and its .crate): `sparse+URL/index/`

then serves, on random ports, until killed (SIGTERM or SIGINT; it exits when its stdin is
closed too, if stdin is a pipe):

  http, https                   the web root, plain and with TLS (both list every path above)
  http_unlisted, https_unlisted  the same web root on two more ports, for a test to leave out of
                                an allowlist (a refused host)
  http6                         plain HTTP of the web root on [::1] (null without IPv6)
  udp_echo                      UDP on 127.0.0.1: every datagram is sent back
  dns                           DNS over UDP on 127.0.0.1: every A query answered 127.0.0.1

and prints one JSON line on stdout with these ports and the paths (`ca`, `www`, the package
names and versions), then nothing more. Every server counts what reached it: GET /_hits on
any HTTP port answers {"http": ["/hello.txt", ...], "https": [...], ..., "udp_echo": [payloads],
"dns": [query names]} (the /_hits requests themselves are not counted), so a test can check on
the host side that a refused or direct connection never arrived.

Python 3.11 standard library, plus the `openssl` and `git` programs (for the CA and the
repository). Logs go to DIR/fixtures.log.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import http.server
import io
import json
import os
import select
import signal
import socket
import socketserver
import ssl
import stat
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

HELLO = "hello from the serverfs network fixture\n"
GIT_README = "fixture repository\n"
PIP_NAME = "serverfs-fixture-wheel"
PIP_VERSION = "0.1.0"
CRATE_NAME = "serverfs-fixture-crate"
CRATE_VERSION = "0.1.0"

HITS: dict[str, list[str]] = {}
HITS_LOCK = threading.Lock()


def hit(server: str, what: str) -> None:
    with HITS_LOCK:
        HITS.setdefault(server, []).append(what)


def run(cmd: list[str], cwd: Path | None = None) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "fixture", "GIT_AUTHOR_EMAIL": "fixture@example.invalid",
           "GIT_COMMITTER_NAME": "fixture", "GIT_COMMITTER_EMAIL": "fixture@example.invalid"}
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(d: Path) -> None:
    """ca.pem/ca.key (a CA), server.pem/server.key (127.0.0.1, ::1, localhost), EC P-256."""
    ossl = ["openssl"]
    run(ossl + ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "3650", "-subj", "/CN=serverfs test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        cwd=d)
    run(ossl + ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"], cwd=d)
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n")
    run(ossl + ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", "server.pem", "-days", "3650", "-extfile", "server.ext"], cwd=d)


def make_git(www: Path) -> None:
    work = www.parent / "repo-work"
    work.mkdir()
    (work / "README").write_text(GIT_README)
    run(["git", "init", "-q", "-b", "main", str(work)])
    run(["git", "add", "README"], cwd=work)
    run(["git", "commit", "-q", "-m", "fixture"], cwd=work)
    run(["git", "clone", "-q", "--bare", str(work), str(www / "repo.git")])
    run(["git", "update-server-info"], cwd=www / "repo.git")


def make_wheel(www: Path) -> None:
    """A pure-Python wheel by hand (a zip: the module, METADATA, WHEEL, RECORD) and its PEP 503 pages."""
    dist = PIP_NAME.replace("-", "_")
    name = f"{dist}-{PIP_VERSION}-py3-none-any.whl"
    info = f"{dist}-{PIP_VERSION}.dist-info"
    files = {
        f"{dist}/__init__.py": b"VALUE = 1\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PIP_NAME}\nVersion: {PIP_VERSION}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: serverfs-fixtures\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    record += f"{info}/RECORD,,\n"
    files[f"{info}/RECORD"] = record.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    wheel = buf.getvalue()
    (www / "packages").mkdir()
    (www / "packages" / name).write_bytes(wheel)
    sha = hashlib.sha256(wheel).hexdigest()
    (www / "simple" / PIP_NAME).mkdir(parents=True)
    (www / "simple" / "index.html").write_text(
        f'<!DOCTYPE html>\n<html><body><a href="{PIP_NAME}/">{PIP_NAME}</a></body></html>\n')
    (www / "simple" / PIP_NAME / "index.html").write_text(
        f'<!DOCTYPE html>\n<html><body><a href="../../packages/{name}#sha256={sha}">{name}</a></body></html>\n')


def sparse_path(name: str) -> str:
    """The index file of a crate, as cargo lays it out (1/, 2/, 3/a/, ab/cd/)."""
    n = name.lower()
    if len(n) <= 2:
        return f"{len(n)}/{n}"
    if len(n) == 3:
        return f"3/{n[0]}/{n}"
    return f"{n[:2]}/{n[2:4]}/{n}"


def make_crate(www: Path) -> None:
    """A one-file library crate as a .crate (a gzipped tar under name-version/) and its sparse index."""
    prefix = f"{CRATE_NAME}-{CRATE_VERSION}"
    members = {
        "Cargo.toml": f'[package]\nname = "{CRATE_NAME}"\nversion = "{CRATE_VERSION}"\nedition = "2021"\n'
                      'description = "serverfs network fixture"\nlicense = "MIT"\n',
        "src/lib.rs": "pub const VALUE: u32 = 1;\n",
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as t:
        for path, text in members.items():
            data = text.encode()
            ti = tarfile.TarInfo(f"{prefix}/{path}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
    crate = gzip.compress(raw.getvalue(), mtime=0)
    d = www / "crates" / CRATE_NAME / CRATE_VERSION
    d.mkdir(parents=True)
    (d / "download").write_bytes(crate)
    index = www / "index"
    entry = {"name": CRATE_NAME, "vers": CRATE_VERSION, "deps": [], "cksum": hashlib.sha256(crate).hexdigest(),
             "features": {}, "yanked": False}
    path = index / sparse_path(CRATE_NAME)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(entry) + "\n")
    # dl with no {markers}: cargo appends /{crate}/{version}/download. Relative to the host the
    # index was fetched from is not allowed, so the URL is set per server (see Handler).
    (index / "config.json").write_text(json.dumps({"dl": "{SERVER}/crates"}) + "\n")


def make_tree(d: Path, big_mb: int) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    make_ca(d)
    www = d / "www"
    www.mkdir()
    (www / "hello.txt").write_text(HELLO)
    if big_mb:
        with open(www / "big.bin", "wb") as f:
            chunk = os.urandom(1 << 20)
            for i in range(big_mb):
                f.write(chunk[i:] + chunk[:i])
    make_git(www)
    make_wheel(www)
    make_crate(www)
    # Readable by every user (commands may run as nobody); the keys too: this is a test CA.
    for root, dirs, files in os.walk(d):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            p = os.path.join(root, name)
            os.chmod(p, os.stat(p).st_mode & ~0o777 | 0o644)
    os.chmod(d, 0o755)
    return www


class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files of the web root; counts what it served; files go out with sendfile."""

    server_name_: str = "http"
    base_url: str = ""

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        LOG.write(f"{self.server_name_} {self.address_string()} {format % args}\n")
        LOG.flush()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/_hits":
            with HITS_LOCK:
                body = json.dumps(HITS).encode()
            return self.reply(200, body, "application/json")
        hit(self.server_name_, self.path)
        if path == "/index/config.json":
            # the download URL on the server the index was fetched from
            return self.reply(200, json.dumps({"dl": f"{self.base_url}/crates"}).encode(), "application/json")
        return super().do_GET()

    def do_HEAD(self) -> None:
        hit(self.server_name_, "HEAD " + self.path)
        return super().do_HEAD()

    def reply(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def copyfile(self, source, outputfile) -> None:
        self.wfile.flush()
        try:
            self.connection.sendfile(source)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address) -> None:
        """A client that hangs up early (a probe, a refused tunnel) is no error; others go to the log."""
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError)):
            return
        import traceback
        LOG.write(f"error serving {client_address}:\n{traceback.format_exc()}")
        LOG.flush()


def http_server(name: str, www: Path, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None) -> Server:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    scheme = "https" if tls else "http"

    class H(Handler):
        server_name_ = name

        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(www), **kw)

    cls = type("S", (Server,), {"address_family": family})
    srv = cls((host, 0), H)
    bracketed = f"[{host}]" if family == socket.AF_INET6 else host
    H.base_url = f"{scheme}://{bracketed}:{srv.server_address[1]}"
    if tls:
        srv.socket = tls.wrap_socket(srv.socket, server_side=True)
    return srv


def udp_echo(sock: socket.socket) -> None:
    while True:
        data, peer = sock.recvfrom(65535)
        hit("udp_echo", data.decode(errors="replace"))
        sock.sendto(data, peer)


def dns_name(msg: bytes, i: int) -> tuple[str, int]:
    labels = []
    while msg[i]:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode(errors="replace"))
        i += 1 + n
    return ".".join(labels), i + 1


def dns_server(sock: socket.socket) -> None:
    """Answers every query (one question) with A 127.0.0.1 (AAAA and others: no answer)."""
    while True:
        msg, peer = sock.recvfrom(512)
        try:
            name, end = dns_name(msg, 12)
            qtype = int.from_bytes(msg[end:end + 2], "big")
            question = msg[12:end + 4]
        except (IndexError, ValueError):
            continue
        hit("dns", name)
        answers = b""
        count = 0
        if qtype == 1:
            answers = b"\xc0\x0c" + (1).to_bytes(2, "big") + (1).to_bytes(2, "big") + (60).to_bytes(4, "big") \
                + (4).to_bytes(2, "big") + bytes([127, 0, 0, 1])
            count = 1
        header = msg[:2] + b"\x81\x80" + (1).to_bytes(2, "big") + count.to_bytes(2, "big") + b"\x00\x00\x00\x00"
        sock.sendto(header + question + answers, peer)


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


LOG = sys.stderr


def main() -> int:
    global LOG
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path, help="made (or emptied of nothing: it must not hold a previous run)")
    ap.add_argument("--big-mb", type=int, default=0, help="also www/big.bin of this many MiB")
    a = ap.parse_args()
    d = a.dir.resolve()
    www = make_tree(d, a.big_mb)
    LOG = open(d / "fixtures.log", "a")

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(d / "server.pem", d / "server.key")
    servers = {
        "http": http_server("http", www),
        "https": http_server("https", www, tls=tls),
        "http_unlisted": http_server("http_unlisted", www),
        "https_unlisted": http_server("https_unlisted", www, tls=tls),
    }
    if ipv6_loopback():
        servers["http6"] = http_server("http6", www, host="::1")
    for srv in servers.values():
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    dns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dns.bind(("127.0.0.1", 0))
    threading.Thread(target=udp_echo, args=(udp,), daemon=True).start()
    threading.Thread(target=dns_server, args=(dns,), daemon=True).start()

    info = {name: srv.server_address[1] for name, srv in servers.items()}
    info.setdefault("http6", None)
    info.update({
        "udp_echo": udp.getsockname()[1], "dns": dns.getsockname()[1],
        "dir": str(d), "www": str(www), "ca": str(d / "ca.pem"),
        "hello": "/hello.txt", "hello_text": HELLO, "big": "/big.bin" if a.big_mb else None,
        "git": "/repo.git", "git_readme": GIT_README,
        "pip_index": "/simple/", "pip_name": PIP_NAME, "pip_version": PIP_VERSION,
        "cargo_index": "/index/", "crate_name": CRATE_NAME, "crate_version": CRATE_VERSION,
    })
    print(json.dumps(info), flush=True)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    mode = os.fstat(0).st_mode if not sys.stdin.closed else 0
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        # the parent's end of our stdin closes when it dies: so do we (no process left behind)
        def watch() -> None:
            while not done.is_set():
                r, _, _ = select.select([0], [], [], 1.0)
                if r and not os.read(0, 4096):
                    done.set()
        threading.Thread(target=watch, daemon=True).start()
    done.wait()
    for srv in servers.values():
        srv.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
