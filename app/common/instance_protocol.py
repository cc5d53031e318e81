"""The single-instance socket's protocol: one versioned JSON line each way, and what two versions say.

    client: {"protocol_version": 2, "command": "prompt"}      ("show", "stop")
    server: {"protocol_version": 2, "answer": "ok"}           or {"protocol_version": 2, "error": "<reason>"}

`PROTOCOL_VERSION` is the one place the version lives: raise it whenever a line changes meaning. What
never changes is the envelope, a JSON object with a whole-number "protocol_version", so any two versions
can tell that they differ (as qutebrowser's IPC does). A message from another version is refused and
nothing is acted on; both ends say so in words naming both versions.

One more command, "mcp", asks for the connection itself: after the ok answer the same connection carries
MCP's newline-delimited JSON-RPC both ways, served by the tray app (`holodesk mcp` relays its stdio to it,
app/mcp/tray_relay.py). It adds a line without changing another's meaning, so the version stays; a tray
app from before it answers "unknown command", and `holodesk mcp` then shows its own panel.

Version 1 had no version field: the client sent a bare word ("prompt\\n") and the server answered "ok\\n"
or "error <reason>\\n". A line without the field counts as that other version. Such a client is answered
in its own bare format, which it prints to its user; such a server answers our JSON line with its
"unknown command" error, which reads here as an answer without a version.

Where the socket is (`instance_client.server_address`) is not part of the lines: since the address
became per display ("holodesk-<uid>-x11-1.sock"), a `holodesk` of an install from before looks for
"holodesk-<uid>.sock" and says the tray app is not running; the lines, and so the version, are unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

PROTOCOL_VERSION = 2
VERSION_FIELD = "protocol_version"
COMMANDS = ("prompt", "show", "stop")
MCP_COMMAND = "mcp"  # the connection becomes an MCP stream served by the tray app (not a trigger command)
ANSWER_OK = "ok"
MAX_REQUEST_BYTES = 256  # a request is one short JSON object; anything longer is not ours
MAX_ANSWER_BYTES = 1024  # an answer may carry a sentence of reasons

# Where this copy of Holodesk is installed: two installs are what make two versions meet.
INSTALL_DIR = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class Request:
    """A command from a client of this protocol version: the server acts on it."""

    command: str


@dataclass(frozen=True)
class Refusal:
    """A message the server must not act on: the line it answers, and what the tray app tells its user."""

    answer: str
    words: str


@dataclass(frozen=True)
class Answer:
    """The server's answer as the client read it; `version` None when the line carried no version."""

    version: int | None
    ok: bool
    reason: str


def version_in_words(version: int | None) -> str:
    if version is None:
        return "no protocol version (an install from before versions were sent)"
    return f"protocol version {version}"


def encode_request(command: str) -> bytes:
    return (json.dumps({VERSION_FIELD: PROTOCOL_VERSION, "command": command}) + "\n").encode()


def encode_answer(*, error: str | None = None) -> str:
    """This version's answer line (without the newline): ok, or the error reason."""
    body: dict[str, int | str] = {VERSION_FIELD: PROTOCOL_VERSION}
    if error is None:
        body["answer"] = ANSWER_OK
    else:
        body["error"] = error
    return json.dumps(body)


def decode_request(line: str) -> Request | Refusal:
    """The server's reading of one request line: a command to act on, or a refusal to answer and report."""
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        if line in COMMANDS:
            return _legacy_refusal(line)
        shown = repr(line[:40])
        return Refusal(
            answer=f"error not a Holodesk instance message: {shown}",
            words=f"Something sent the instance socket {shown}, which is not a Holodesk message; nothing was done.",
        )
    command = message.get("command")
    shown_command = repr(command)[:40]
    if VERSION_FIELD not in message:
        return _mismatch_refusal(None, shown_command)
    version = message[VERSION_FIELD]
    if not _whole_number(version):
        reason = f"{VERSION_FIELD} must be a whole number, got {repr(version)[:40]}"
        return Refusal(answer=encode_answer(error=reason), words=f"A message was refused, {reason}; nothing was done.")
    if version != PROTOCOL_VERSION:
        return _mismatch_refusal(version, shown_command)
    if command not in (*COMMANDS, MCP_COMMAND):
        reason = f"unknown command {shown_command} (expected {', '.join((*COMMANDS, MCP_COMMAND))})"
        return Refusal(
            answer=encode_answer(error=reason), words=f"A `holodesk trigger` sent an {reason}; nothing was done."
        )
    return Request(command)


def _legacy_refusal(command: str) -> Refusal:
    # Said in version 1's own format: that client prints "refused 'prompt': <this line>". Under 256 bytes,
    # which is what it reads.
    answer = (
        f"error version mismatch: this holodesk sent no protocol version (an older install), the tray app"
        f" speaks version {PROTOCOL_VERSION}; nothing was done: run the command from the tray app's install,"
        " or restart the tray app from this one"
    )
    return Refusal(answer=answer, words=_server_words(None, repr(command)))


def _mismatch_refusal(version: int | None, shown_command: str) -> Refusal:
    reason = (
        f"version mismatch: the tray app speaks {version_in_words(PROTOCOL_VERSION)} (installed at {INSTALL_DIR}),"
        f" this command sent {version_in_words(version)}; nothing was done"
    )
    return Refusal(answer=encode_answer(error=reason), words=_server_words(version, shown_command))


def _server_words(version: int | None, shown_command: str) -> str:
    return (
        f"A `holodesk` command from another install asked for {shown_command} with {version_in_words(version)};"
        f" this tray app speaks {version_in_words(PROTOCOL_VERSION)} (installed at {INSTALL_DIR}), so nothing was"
        " done. Run the command from this install, or quit the tray app and start it from the command's install."
    )


def decode_answer(line: str) -> Answer:
    """The client's reading of the server's answer line. A line that is not our JSON has no version."""
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    if not isinstance(message, dict) or not _whole_number(message.get(VERSION_FIELD)):
        return Answer(version=None, ok=False, reason=line)
    if message.get("answer") == ANSWER_OK:
        return Answer(version=message[VERSION_FIELD], ok=True, reason="")
    return Answer(version=message[VERSION_FIELD], ok=False, reason=str(message.get("error", line)))


def _whole_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def client_mismatch_words(server_version: int | None, command: str) -> str:
    """What `holodesk trigger` (or a second start) says when the running tray app speaks another version."""
    return (
        f"the running Holodesk tray app speaks {version_in_words(server_version)}, this holodesk (installed at"
        f" {INSTALL_DIR}) speaks {version_in_words(PROTOCOL_VERSION)}: they come from different installs, and"
        f" {command!r} was not done. Quit the tray app and start `holodesk` again from this install, or run the"
        " command from the install the tray app came from"
    )
