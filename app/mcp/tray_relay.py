"""`holodesk mcp` while the tray app runs: its stdio relayed, byte for byte, to the tray app.

The tray app is asked, on its single-instance socket, for the "mcp" command; once it answers ok the same
connection carries the MCP stream, and the tray serves it (app/mcp/tray_clients.py): one desktop, one
approval panel, one overlay, the tray's own settings and model. This process then needs no display and
loads no Qt. When the agent host closes stdin the connection is half-closed and the tray ends the session
(a step in progress stopped and recorded); when the tray ends it (it quit), this process says so and exits 1.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from dataclasses import dataclass
from typing import TextIO

from holodesk.app.common.instance_client import InstanceError, server_address
from holodesk.app.common.instance_protocol import (
    MAX_ANSWER_BYTES,
    MCP_COMMAND,
    PROTOCOL_VERSION,
    decode_answer,
    encode_request,
    version_in_words,
)

ANSWER_TIMEOUT_S = 3.0
CHUNK = 65536
HANDED_OVER = (
    "the Holodesk tray app is running on this display: every step goes to it, shown on its approval panel"
    " and recorded in its sessions folder"
)
TRAY_ENDED = "the Holodesk tray app ended this MCP session (it quit or was stopped)"


@dataclass(frozen=True)
class TrayStream:
    """A connection the tray app serves MCP on, and the stream's bytes that came with its answer."""

    connection: socket.socket
    already_read: bytes


def open_tray_stream() -> TrayStream | str | None:
    """The tray app's MCP stream; None when no tray app listens here; words when it refused (another
    install, or one from before it served MCP), for `holodesk mcp` to say before showing its own panel."""
    if sys.platform == "win32":  # pragma: no cover - the tray's socket is a named pipe there
        return None
    try:
        address = server_address()
    except InstanceError:  # the runtime folder cannot be made or trusted: no tray listens there either
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_TIMEOUT_S)
    try:
        connection.connect(address)
    except OSError:
        connection.close()
        return None
    try:
        connection.sendall(encode_request(MCP_COMMAND))
        line, rest = _answer_line(connection)
    except OSError as exc:
        connection.close()
        return f"the tray app did not answer ({exc})"
    answer = decode_answer(line)
    if answer.version != PROTOCOL_VERSION:
        connection.close()
        return f"the tray app speaks {version_in_words(answer.version)}, this holodesk {PROTOCOL_VERSION}"
    if not answer.ok:
        connection.close()
        return f"the tray app refused: {answer.reason}"
    connection.settimeout(None)
    return TrayStream(connection, rest)


def _answer_line(connection: socket.socket) -> tuple[str, bytes]:
    """The answer line, and whatever came after it (the MCP stream's first bytes, if any)."""
    received = b""
    while b"\n" not in received:
        if len(received) > MAX_ANSWER_BYTES:
            raise OSError(f"no answer line within {MAX_ANSWER_BYTES} bytes")
        chunk = connection.recv(MAX_ANSWER_BYTES)
        if not chunk:
            raise OSError("the connection closed before an answer")
        received += chunk
    line, rest = received.split(b"\n", 1)
    return line.decode("utf-8", errors="replace").strip(), rest


def relay(stream: TrayStream, err: TextIO, stdin_fd: int = 0, stdout_fd: int = 1) -> int:
    """Copy stdin to the tray and the tray to stdout until the host closes stdin (0) or the tray ends
    the session (1, said on `err`)."""
    connection = stream.connection
    host_closed = threading.Event()

    def upstream() -> None:
        try:
            while chunk := os.read(stdin_fd, CHUNK):
                connection.sendall(chunk)
        except OSError:  # the tray is gone: the downstream loop ends too, and says so
            pass
        finally:
            host_closed.set()
            with contextlib.suppress(OSError):  # already closed
                connection.shutdown(socket.SHUT_WR)  # the tray reads the end of the stream

    threading.Thread(target=upstream, name="holodesk-mcp-relay", daemon=True).start()
    try:
        if stream.already_read:
            _write_all(stdout_fd, stream.already_read)
        while chunk := connection.recv(CHUNK):
            _write_all(stdout_fd, chunk)
    except OSError as exc:
        err.write(f"holodesk mcp: the connection to the tray app broke: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        connection.close()
    if host_closed.is_set():
        return 0
    err.write(f"holodesk mcp: {TRAY_ENDED}\n")
    return 1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
