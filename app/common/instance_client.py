"""Talk to the running Holodesk instance: where it listens, and the client side of its protocol.

The running tray app listens on a local socket per user and display (see
`app.gui.single_instance.InstanceServer`): a second display (another X server, another Wayland
session) gets its own tray app, and `holodesk trigger` reaches the one on its own display.
`holodesk trigger` and a second `holodesk` start send it one command line and read one answer line,
each carrying the protocol version (`holodesk.app.common.instance_protocol`, where the lines and the
version are defined). A tray app of another version is refused here in words naming both versions.

This module has no Qt on Linux and macOS: the server's socket is a plain Unix socket at a path both
sides compute, so `holodesk trigger` (bound to a desktop shortcut) answers in milliseconds without
loading PySide6. On Windows QLocalServer uses a named pipe, which only QLocalSocket speaks.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
from pathlib import Path
from typing import TextIO

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.instance_protocol import (
    ANSWER_OK,
    COMMANDS,
    MAX_ANSWER_BYTES,
    PROTOCOL_VERSION,
    client_mismatch_words,
    decode_answer,
    encode_request,
)
from holodesk.automation.private_dir import UnsafeRuntimeDirError, user_runtime_dir

INSTANCE_NAME_ENV = "HOLODESK_INSTANCE_NAME"  # tests (and a second profile) use their own name
DEFAULT_TIMEOUT_MS = 3000

EXIT_OK = 0
EXIT_FAILED = 1

NOT_RUNNING_HINT = "start `holodesk` first (or enable its autostart entry)"


class InstanceError(HolodeskAppError):
    """Talking to the running instance failed (timeout, a refused command, a garbled answer)."""


class NoInstanceError(InstanceError):
    """No Holodesk instance is listening for this user; the message says to start `holodesk` first."""


class ProtocolMismatchError(InstanceError):
    """The running tray app speaks another protocol version (another install); the message names both."""


def instance_name() -> str:
    """The server name per user and display: $HOLODESK_INSTANCE_NAME (as it is, for every display), else
    "holodesk-<uid>-<display key>" ("holodesk-<user>" on Windows; no key where no display is named)."""
    override = os.environ.get(INSTANCE_NAME_ENV, "").strip()
    if override:
        return override
    key = display_key(os.environ.get("DISPLAY", ""), os.environ.get("WAYLAND_DISPLAY", ""))
    suffix = f"-{key}" if key else ""
    if hasattr(os, "getuid"):
        return f"holodesk-{os.getuid()}{suffix}"
    # Windows pipe names are machine-wide: the user name keeps two users' instances apart.
    user = re.sub(r"[^A-Za-z0-9_.-]", "_", getpass.getuser())
    return f"holodesk-{user}{suffix}"


# "[host]:number[.screen]", the X11 display name; a host of "", "unix" or "localhost" is this machine.
_X11_DISPLAY = re.compile(r"^(?P<host>[^:]*):(?P<number>\d+)(?:\.\d+)?$")
_LOCAL_HOSTS = ("", "unix", "localhost", "127.0.0.1")


def display_key(x11_display: str, wayland_display: str) -> str:
    """A file-name-safe key for the display the tray app shows on; "" when neither variable names one.

    X11's DISPLAY comes first: Holodesk's windows run on X11 (XWayland in a Wayland session), so it is
    the display they appear on. ":1", ":1.0", "unix:1" and "localhost:1" are one display ("x11-1"); a
    screen number does not make another display. WAYLAND_DISPLAY ("wayland-0" or a socket path) keys a
    session without X11.
    """
    x11_display = x11_display.strip()
    if x11_display:
        match = _X11_DISPLAY.match(x11_display)
        if match is None:
            return "x11-" + _file_safe(x11_display)
        host = match["host"]
        if host in _LOCAL_HOSTS:
            return f"x11-{int(match['number'])}"
        return f"x11-{_file_safe(host)}-{int(match['number'])}"
    wayland_display = wayland_display.strip()
    if wayland_display:
        return "wl-" + _file_safe(wayland_display.rstrip("/"))
    return ""


def display_in_words() -> str:
    """The display this command runs on, as a person would name it ("display :1")."""
    x11_display = os.environ.get("DISPLAY", "").strip()
    if x11_display:
        return f"display {x11_display}"
    wayland_display = os.environ.get("WAYLAND_DISPLAY", "").strip()
    if wayland_display:
        return f"Wayland display {wayland_display}"
    return "this computer (no display is named)"


def not_running_words(address: str) -> str:
    """Why nothing answered: no tray app on this display (each display has its own)."""
    return f"Holodesk is not running on {display_in_words()}: {NOT_RUNNING_HINT} (nothing listens on {address})"


def _file_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[-48:]  # a socket path must stay under ~100 bytes


def runtime_dir() -> Path:
    """Where the socket and its lock live: $XDG_RUNTIME_DIR, else a private `<temp>/holodesk-<uid>` (0700).

    Never the shared temp folder itself, where another user could create the socket first and read
    the prompts sent to it. InstanceError when the private folder is unsafe (someone else's, a link).
    """
    try:
        return user_runtime_dir()
    except UnsafeRuntimeDirError as exc:
        raise InstanceError(str(exc)) from None
    except OSError as exc:
        raise InstanceError(f"cannot create Holodesk's runtime folder: {exc}") from None


def server_address(name: str | None = None) -> str:
    """What QLocalServer listens on: an absolute socket path on Unix (a plain socket reaches it), else the name.

    A name that is already an absolute path is used as it is.
    """
    name = name or instance_name()
    if sys.platform == "win32" or os.path.isabs(name):
        return name
    return str(runtime_dir() / f"{name}.sock")


def send_to_running_instance(message: str, timeout_ms: int = DEFAULT_TIMEOUT_MS, name: str | None = None) -> str:
    """Send one command to the running instance and return its answer ("ok").

    Raises NoInstanceError when none is listening (including a stale socket left by a crash),
    ProtocolMismatchError when it speaks another protocol version (it then did nothing), and
    InstanceError for a refused command, a timeout or no answer. Needs no QCoreApplication.
    """
    if message not in COMMANDS:
        raise ValueError(f"unknown instance command {message!r}; expected one of: {', '.join(COMMANDS)}")
    address = server_address(name)
    request = encode_request(message)
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        line = _exchange_qt(address, message, request, timeout_ms)
    else:
        line = _exchange_unix(address, message, request, timeout_ms)
    if not line:
        raise InstanceError(f"the running Holodesk closed the connection without answering {message!r}")
    answer = decode_answer(line)
    if answer.version != PROTOCOL_VERSION:
        raise ProtocolMismatchError(client_mismatch_words(answer.version, message))
    if not answer.ok:
        raise InstanceError(f"the running Holodesk refused {message!r}: {answer.reason}")
    return ANSWER_OK


def _exchange_unix(address: str, message: str, request: bytes, timeout_ms: int) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout_ms / 1000)
        try:
            connection.connect(address)
        except (FileNotFoundError, ConnectionRefusedError):
            # No socket file, or a file left by an instance that crashed: nobody is listening.
            raise NoInstanceError(not_running_words(address)) from None
        except TimeoutError:
            raise InstanceError(f"the running Holodesk did not accept a connection within {timeout_ms} ms") from None
        except OSError as exc:
            raise InstanceError(f"could not reach the running Holodesk at {address}: {exc}") from None
        try:
            connection.sendall(request)
            return _read_line(connection)
        except TimeoutError:
            raise InstanceError(f"the running Holodesk did not answer {message!r} within {timeout_ms} ms") from None
        except OSError as exc:
            raise InstanceError(f"the connection to the running Holodesk broke: {exc}") from None


def _read_line(connection: socket.socket) -> str:
    received = b""
    while b"\n" not in received and len(received) <= MAX_ANSWER_BYTES:
        chunk = connection.recv(MAX_ANSWER_BYTES)
        if not chunk:
            break
        received += chunk
    return received.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()


def _exchange_qt(address: str, message: str, request: bytes, timeout_ms: int) -> str:  # pragma: no cover - Windows
    from holodesk.app.gui.qt import QtNetwork

    connection = QtNetwork.QLocalSocket()
    connection.connectToServer(address)
    if not connection.waitForConnected(timeout_ms):
        error = connection.error()
        if error in (
            QtNetwork.QLocalSocket.LocalSocketError.ServerNotFoundError,
            QtNetwork.QLocalSocket.LocalSocketError.ConnectionRefusedError,
        ):
            raise NoInstanceError(not_running_words(address))
        raise InstanceError(f"could not reach the running Holodesk at {address}: {connection.errorString()}")
    connection.write(request)
    if not connection.waitForBytesWritten(timeout_ms):
        raise InstanceError(f"could not send {message!r} to the running Holodesk: {connection.errorString()}")
    received = b""
    while b"\n" not in received and len(received) <= MAX_ANSWER_BYTES:
        if not connection.bytesAvailable() and not connection.waitForReadyRead(timeout_ms):
            break
        received += bytes(connection.readAll().data())
    connection.disconnectFromServer()
    if not received:
        raise InstanceError(f"the running Holodesk did not answer {message!r} within {timeout_ms} ms")
    return received.split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()


def run_trigger(message: str, err: TextIO, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> int:
    """`holodesk trigger`: ask the running instance to act; exit status 0 when it answered ok, else 1."""
    try:
        send_to_running_instance(message, timeout_ms)
    except InstanceError as exc:
        err.write(f"holodesk trigger: {exc}\n")
        return EXIT_FAILED
    return EXIT_OK
