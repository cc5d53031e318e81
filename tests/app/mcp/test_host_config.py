"""--print-config: each host's snippet carries this installation's command; an unknown host is named."""

from __future__ import annotations

import io
import json

from holodesk.app.mcp.command import print_config
from holodesk.app.mcp.host_config import HOSTS, server_command


def printed(host: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = print_config(host, out, err)
    return code, out.getvalue(), err.getvalue()


def test_every_host_gets_the_command_that_starts_holodesk_mcp():
    command = server_command()
    assert command[-1] == "mcp"
    for host in ("claude-desktop", "cursor"):
        code, out, err = printed(host)
        assert code == 0 and err.strip()  # where it goes, apart from the snippet
        entry = json.loads(out)["mcpServers"]["holodesk"]
        assert [entry["command"], *entry["args"]] == command
    code, out, _ = printed("stdio")
    assert json.loads(out) == {"command": command[0], "args": command[1:]}
    code, out, _ = printed("claude-code")
    assert out.startswith("claude mcp add holodesk -- ") and out.strip().endswith(" mcp")
    assert set(HOSTS) == {"claude-desktop", "claude-code", "cursor", "stdio"}


def test_an_unknown_host_is_refused_in_words_and_prints_nothing():
    code, out, err = printed("emacs")
    assert code == 2 and out == ""
    assert "no configuration for 'emacs': choose one of claude-desktop, claude-code, cursor, stdio" in err
