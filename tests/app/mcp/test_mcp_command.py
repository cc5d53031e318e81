"""`holodesk mcp` as a process: without a display it says why in words and exits 2, before serving anything."""

from __future__ import annotations

import os
import socket
import subprocess

from tests.support.holodesk_command import HOLODESK_COMMAND


def test_without_a_display_it_refuses_in_words(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    done = subprocess.run(
        [*HOLODESK_COMMAND, "mcp", "--sessions", str(tmp_path / "sessions")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no display: holodesk mcp shows each step on your screen for you to approve" in done.stderr
    assert done.stdout == ""  # nothing on the protocol's channel


def test_a_running_tray_that_cannot_take_the_steps_is_named_at_start(tmp_path):
    """A tray that listens but never answers the hand-over (hung), and the two ways the steps stay here
    (--sessions given, --http): each is said before the server goes on alone (here: no display)."""
    address = tmp_path / "tray.sock"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["HOLODESK_INSTANCE_NAME"] = str(address)

    def mcp(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*HOLODESK_COMMAND, "mcp", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
            env=env,
        )  # fmt: skip

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as tray:  # listens as the tray's instance does
        tray.bind(str(address))
        tray.listen(4)
        hung = mcp()
        own_folder = mcp("--sessions", str(tmp_path / "sessions"))
        over_http = mcp("--http", "--port", "0")
    assert "holodesk mcp: the tray app did not answer (timed out); this server shows its own approval" in hung.stderr
    assert "the Holodesk tray app is running, but it records in its own sessions and routines" in own_folder.stderr
    assert "holodesk mcp --http shows its own approval panel and does not hand steps" in over_http.stderr
    for done in (hung, own_folder, over_http):
        assert done.returncode == 2 and "no display" in done.stderr and done.stdout == "", done.stderr
    alone = mcp("--sessions", str(tmp_path / "sessions"))
    assert "tray app" not in alone.stderr  # nothing listens there now
