"""`holodesk mcp --print-config HOST`: the configuration snippet a host needs to start `holodesk mcp`.

Printed only: Holodesk never edits another program's files. The snippet goes to stdout (so it can be
redirected into a file as it is), where it goes to stderr. The command is this installation's own
(`holodesk` next to this Python, or this Python with `-m holodesk.app.cli`), so the snippet starts the
server as written.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

HOSTS = ("claude-desktop", "claude-code", "cursor", "stdio")
SERVER_KEY = "holodesk"


def server_command() -> list[str]:
    """The argv that starts `holodesk mcp` with this installation."""
    script = Path(sys.executable).parent / "holodesk"
    if script.is_file():
        return [str(script), "mcp"]
    return [sys.executable, "-m", "holodesk.app.cli", "mcp"]


def config_text(host: str, command: list[str] | None = None) -> tuple[str, str]:
    """Where the snippet goes, in words, and the snippet for `host` (one of HOSTS); ValueError for another."""
    argv = command or server_command()
    entry = {"command": argv[0], "args": argv[1:]}
    servers = json.dumps({"mcpServers": {SERVER_KEY: entry}}, indent=2)
    if host == "claude-desktop":
        return (
            "Claude Desktop: add this to claude_desktop_config.json (Settings > Developer > Edit Config),"
            " merging mcpServers with any servers already there, then restart Claude Desktop.",
            f"{servers}\n",
        )
    if host == "claude-code":
        return (
            "Claude Code: run this once (add --scope project to share it through the project's .mcp.json).",
            f"claude mcp add {SERVER_KEY} -- {shlex.join(argv)}\n",
        )
    if host == "cursor":
        return (
            "Cursor: add this to ~/.cursor/mcp.json (or .cursor/mcp.json in a project),"
            " merging mcpServers with any servers already there.",
            f"{servers}\n",
        )
    if host == "stdio":
        return (
            "Any MCP host that starts a server over stdio: this command and arguments.",
            f"{json.dumps(entry, indent=2)}\n",
        )
    raise ValueError(f"no configuration for {host!r}: choose one of {', '.join(HOSTS)}")
