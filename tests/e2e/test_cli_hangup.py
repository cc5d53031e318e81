"""Closing the terminal of `holodesk run` in the middle of a drag: a stop, with the button released.

`holodesk run` runs on a pty that is its controlling terminal, as in a terminal window. Closing the
pty's master side is what closing the window does: the kernel sends SIGHUP, and the terminal is gone
for every later read and write. The X server is then asked (not pyautogui) whether a button is held.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import termios
import time

import pytest

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.e2e.scripting import holotron, model_point
from tests.support import x11_probe
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = pytest.mark.display


def _take_the_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # after setsid: the pty becomes this session's terminal


def test_closing_the_terminal_mid_drag_stops_the_run_and_releases_the_button(xvfb, tmp_path):
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    start, end = model_point(Point(100, 500), screen), model_point(Point(1800, 500), screen)
    drag = holotron("drag_to_desktop", start_x=start.x, start_y=start.y, x=end.x, y=end.y)
    script = tmp_path / "answers.jsonl"
    script.write_text((json.dumps(drag) + "\n") * 4, encoding="utf-8")
    sessions = tmp_path / "sessions"
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [*HOLODESK_COMMAND, "run", "Drag", "--backend", "scripted", "--script", str(script),
         "--sessions", str(sessions)],
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True, preexec_fn=_take_the_terminal,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)},
    )  # fmt: skip
    os.close(slave)
    try:
        shown = b""
        deadline = time.monotonic() + 60
        while b"[a]pprove" not in shown:
            assert time.monotonic() < deadline and process.poll() is None, shown.decode(errors="replace")
            shown += os.read(master, 65536)
        os.write(master, b"a\n")
        deadline = time.monotonic() + 20
        while not x11_probe.pointer()[2]:  # the drag has the button down
            assert time.monotonic() < deadline, "the drag never pressed the button"
        os.close(master)  # the terminal window closes
        master = -1
        returncode = process.wait(20)
    finally:
        if master >= 0:
            os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert x11_probe.pointer()[2] == [], "a button is still held"
    (folder,) = iter_session_folders(sessions)
    session = read_session(folder)
    assert session.outcome == "stopped", session.end
    assert session.end is not None and "terminal was closed" in session.end["detail"]
    assert returncode == 3
