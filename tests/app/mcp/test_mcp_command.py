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


def test_a_running_tray_is_named_at_start(tmp_path):
    address = tmp_path / "tray.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as tray:  # listens as the tray's instance does
        tray.bind(str(address))
        tray.listen(1)
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env["HOLODESK_INSTANCE_NAME"] = str(address)
        done = subprocess.run(
            [*HOLODESK_COMMAND, "mcp", "--sessions", str(tmp_path / "sessions")],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip
    assert "the Holodesk tray app is running too; holodesk mcp shows its own approval panel" in done.stderr
    alone = subprocess.run(
        [*HOLODESK_COMMAND, "mcp", "--sessions", str(tmp_path / "sessions")],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert "tray app is running" not in alone.stderr  # nothing listens there now
