"""Input left held by a killed run is released by the next start, and only what the marker names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from Xlib import XK, X
from Xlib import display as xdisplay
from Xlib.ext import xtest

from holodesk.app.cli.doctor_desktop import check_held_input
from holodesk.app.cli.doctor_report import Status
from holodesk.automation.held_input import MARKER_PREFIX, HeldInputMarker, leftover_markers, release_leftover_input
from tests.support import x11_probe


def _press(button: int | None = None, keys: tuple[str, ...] = ()) -> list[int]:
    """Press through XTEST from a connection that then goes away, as a killed process leaves things."""
    connection = xdisplay.Display(os.environ["DISPLAY"])
    codes = [connection.keysym_to_keycode(XK.string_to_keysym(name)) for name in keys]
    if button is not None:
        xtest.fake_input(connection, X.ButtonPress, button)
    for code in codes:
        xtest.fake_input(connection, X.KeyPress, code)
    connection.sync()
    connection.close()
    return codes


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _marker(folder: Path, pid: int, buttons: list[int], keys: list[str]) -> Path:
    path = folder / f"{MARKER_PREFIX}{os.environ['DISPLAY'].replace(':', '_')}-{pid}.json"
    record = {"pid": pid, "display": os.environ["DISPLAY"], "buttons": buttons, "keys": keys}
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


@pytest.mark.display
def test_a_dead_runs_marker_releases_what_it_names_and_nothing_else(xvfb, tmp_path):
    _press(button=1, keys=("Shift_L", "a", "b"))
    assert x11_probe.pointer()[2] == ["left"]
    marker = _marker(tmp_path, _dead_pid(), [1], ["shift", "a"])

    released = release_leftover_input(tmp_path)

    assert released.buttons == (1,) and released.keys == ("a", "shift")
    assert x11_probe.pointer()[2] == []
    b_code = xdisplay.Display(os.environ["DISPLAY"]).keysym_to_keycode(XK.string_to_keysym("b"))
    assert x11_probe.pressed_keycodes() == [b_code]  # not named by the marker: not ours to release
    assert not marker.exists()
    connection = xdisplay.Display(os.environ["DISPLAY"])
    xtest.fake_input(connection, X.KeyRelease, b_code)
    connection.sync()
    connection.close()
    assert x11_probe.pressed_keycodes() == []


@pytest.mark.display
def test_a_live_runs_marker_is_left_alone(xvfb, tmp_path):
    _press(button=1)
    try:
        marker = _marker(tmp_path, os.getppid(), [1], [])  # a process that is alive
        assert leftover_markers(tmp_path) == []
        assert release_leftover_input(tmp_path).markers == 0
        assert marker.exists() and x11_probe.pointer()[2] == ["left"]
    finally:
        connection = xdisplay.Display(os.environ["DISPLAY"])
        xtest.fake_input(connection, X.ButtonRelease, 1)
        connection.sync()
        connection.close()


def test_the_marker_exists_only_while_the_action_runs(tmp_path):
    marker = HeldInputMarker(tmp_path, display=":99")
    with marker.holding([1], ["shift"]):
        (path,) = tmp_path.iterdir()
        assert json.loads(path.read_text()) | {"time": 0} == {
            "pid": os.getpid(), "display": ":99", "buttons": [1], "keys": ["shift"], "keycodes": [], "time": 0,
        }  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    with marker.holding():  # nothing held: no file at all
        assert list(tmp_path.iterdir()) == []


@pytest.mark.display
def test_holodesk_doctor_releases_a_button_a_killed_run_left_held(xvfb, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    _press(button=1)
    _marker(tmp_path, _dead_pid(), [1], [])
    result = check_held_input()
    assert result.status is Status.WARN and "mouse button 1" in result.detail
    assert x11_probe.pointer()[2] == []
    assert check_held_input().status is Status.OK
