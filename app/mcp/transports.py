"""How `holodesk mcp` is reached: stdio for a host that starts it, streamable HTTP on 127.0.0.1 behind the
bearer-token gate (app/mcp/http_auth.py), the token generated at each start and printed, or a connection
the tray app was handed on its single-instance socket (the same newline-delimited JSON-RPC as stdio)."""

from __future__ import annotations

import io
import json
import socket
import sys
from typing import TextIO

import anyio
from mcp.server.stdio import stdio_server

from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.http_auth import LoopbackBearerGate, new_token
from holodesk.app.mcp.server import DeskServer


async def serve_stdio(desk: Desk) -> None:
    """Serve one client on this process's stdin and stdout until it closes them."""
    server = DeskServer(desk).server
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_connection(desk: Desk, connection: socket.socket, already_read: bytes = b"") -> None:
    """Serve one client on a connected socket until it closes its end (or the socket is shut down);
    `already_read`: the first bytes of its stream, read before the connection was handed over."""
    server = DeskServer(desk).server
    incoming = io.TextIOWrapper(
        io.BufferedReader(_ReadAfter(already_read, connection)), encoding="utf-8", errors="replace"
    )
    outgoing = io.TextIOWrapper(connection.makefile("wb"), encoding="utf-8", write_through=True)
    async with stdio_server(anyio.wrap_file(incoming), anyio.wrap_file(outgoing)) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _ReadAfter(io.RawIOBase):
    """A socket's incoming bytes, after `first` (the bytes someone else read from it already)."""

    def __init__(self, first: bytes, connection: socket.socket) -> None:
        super().__init__()
        self._first = first
        self._connection = connection

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._first:
            count = min(len(buffer), len(self._first))
            buffer[:count] = self._first[:count]
            self._first = self._first[count:]
            return count
        try:
            return self._connection.recv_into(buffer)
        except OSError:  # the connection was shut down or broke: the end of the stream
            return 0


def bind_loopback(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0: any free port); OSError in words when it cannot be had."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from exc
    sock.listen(16)
    return sock


async def serve_http(desk: Desk, sock: socket.socket, token: str | None = None, err: TextIO = sys.stderr) -> None:
    """Serve streamable HTTP on `sock` (127.0.0.1), every request gated by a fresh bearer token it prints."""
    import uvicorn

    token = token or new_token()
    app = DeskServer(desk).server.streamable_http_app(host="127.0.0.1")
    gated = LoopbackBearerGate(app, token)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(gated, log_level="warning", lifespan="on")
    err.write(
        f"holodesk mcp: listening on http://{host}:{port}/mcp (this computer only)\n"
        f"holodesk mcp: bearer token: {token}\n"
        f"holodesk mcp: send it as the header: Authorization: Bearer <token>\n"
    )
    err.write(json.dumps({"url": f"http://{host}:{port}/mcp", "token": token}) + "\n")
    err.flush()
    await uvicorn.Server(config).serve(sockets=[sock])
