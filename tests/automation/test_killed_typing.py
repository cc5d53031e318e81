"""A run killed (SIGKILL) while typing leaves Shift held and spare keycodes bound; the next start repairs both.

A child process types capitals after a character no US key has (so a spare keycode is bound and
Shift is down for a long while); it is killed the moment the X server reports Shift held. The
markers it left must name Shift's keycode and the bound keycode, and `release_leftover_input`
(what `holodesk run`, the tray app and `holodesk doctor` call first) must release Shift and clear
the binding, as the X server then reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from holodesk.automation.held_input import MARKER_PREFIX, REMAPPED_PREFIX, release_leftover_input
from holodesk.automation.virtual_display import XvfbServer
from tests.support import x11_probe

pytestmark = pytest.mark.display

CHILD = """
import sys
from holodesk.automation.actions import TypeText
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.performer import InputPerformer
InputPerformer(X11Input(type_interval_s=0.005)).execute(TypeText("\\u00c9" + "A" * 5000))
"""


def _keycode_of(keysym: int) -> int:
    from Xlib import display as xdisplay

    connection = xdisplay.Display()
    try:
        return int(connection.keysym_to_keycode(keysym))
    finally:
        connection.close()


def _bound_keycodes(keysym: int) -> list[int]:
    from Xlib import display as xdisplay

    connection = xdisplay.Display()
    try:
        first = connection.display.info.min_keycode
        rows = connection.get_keyboard_mapping(first, connection.display.info.max_keycode - first + 1)
        return [first + offset for offset, row in enumerate(rows) if row and row[0] == keysym]
    finally:
        connection.close()


def test_a_kill_while_typing_leaves_markers_that_the_next_start_repairs(xvfb: XvfbServer, tmp_path: Path) -> None:
    subprocess.run(["setxkbmap", "-layout", "us"], check=True, timeout=20)
    shift = _keycode_of(0xFFE1)
    e_acute = 0xC9
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-c", CHILD], env=env)
    try:
        deadline = time.monotonic() + 30
        while shift not in x11_probe.pressed_keycodes():
            assert child.poll() is None, "the typing process ended before Shift was held"
            assert time.monotonic() < deadline, "Shift was never held while typing capitals"
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    assert shift in x11_probe.pressed_keycodes()  # what a killed run leaves behind
    bound = _bound_keycodes(e_acute)
    assert len(bound) == 1
    (held,) = tmp_path.glob(f"{MARKER_PREFIX}*.json")
    assert shift in json.loads(held.read_text())["keycodes"]
    (remapped,) = tmp_path.glob(f"{REMAPPED_PREFIX}*.json")
    assert json.loads(remapped.read_text())["bound"] == {str(bound[0]): e_acute}

    result = release_leftover_input(tmp_path)

    assert x11_probe.pressed_keycodes() == []
    assert _bound_keycodes(e_acute) == []
    assert result.cleared_keycodes == (bound[0],)
    assert f"keycode {shift}" in result.keys
    assert "spare keycodes" in result.describe()
    assert list(tmp_path.iterdir()) == []
