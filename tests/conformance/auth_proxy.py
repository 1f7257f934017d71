#!/usr/bin/env python3
"""A reverse proxy that adds `Authorization: Bearer <token>` to every request.

The conformance suite takes only a URL, and some of its scenarios send raw
requests built from the URL's host and path alone (the query dropped), so
the local token serverfs-dev requires cannot ride in `?token=` for them.
This proxy puts it in a header instead, and changes nothing else: each
request head is forwarded byte for byte (invalid headers the scenarios send
on purpose included) with the one line added before its end, its body as
framed by `Content-Length` or chunked encoding, and the server's bytes are
relayed back untouched (keep-alive and event streams work).

    auth_proxy.py LISTEN_PORT UPSTREAM_PORT TOKEN_FILE
"""

import asyncio
import sys


async def relay_requests(reader, writer, line: bytes) -> None:
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        writer.write(head[:-2] + line + b"\r\n")
        fields = [f.split(b":", 1) for f in head.split(b"\r\n")[1:] if b":" in f]
        named = {k.strip().lower(): v.strip() for k, v in fields}
        if named.get(b"transfer-encoding", b"").lower() == b"chunked":
            while True:
                size_line = await reader.readuntil(b"\r\n")
                writer.write(size_line)
                size = int(size_line.split(b";")[0], 16)
                if size == 0:  # then trailer lines up to an empty one
                    while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                        writer.write(trailer)
                    writer.write(b"\r\n")
                    break
                writer.write(await reader.readexactly(size + 2))
        elif b"content-length" in named:
            writer.write(await reader.readexactly(int(named[b"content-length"])))
        await writer.drain()
    writer.close()


async def relay_bytes(reader, writer) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    writer.close()


async def main() -> None:
    listen_port, upstream_port, token_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    line = b"Authorization: Bearer " + open(token_file, "rb").read().strip() + b"\r\n"

    async def serve(client_reader, client_writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(
            relay_requests(client_reader, up_writer, line),
            relay_bytes(up_reader, client_writer),
            return_exceptions=True,
        )

    server = await asyncio.start_server(serve, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
