"""The tray under a real X server with a real tray host (trayer), and the control window without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.line_process import LineProcess
from tests.support.waiting import wait_until
from tests.support.x11_probe import selection_owned

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack


class TrayProcess(LineProcess):
    """The tray probe on the module's display; a silent probe fails the test."""

    def __init__(self) -> None:
        super().__init__("tests.support.tray_probe", env={**os.environ, "QT_QPA_PLATFORM": "xcb"})

    def next(self, timeout: float = 60) -> str:  # generous: Qt starts slowly on a loaded machine
        line = super().next(timeout)
        if line is None:
            raise AssertionError("the tray process said nothing")
        return line


@pytest.fixture
def tray_host(xvfb) -> Iterator[subprocess.Popen]:
    if shutil.which("trayer") is None:
        pytest.fail("Debian's trayer is missing: install it (tests/run.sh does)", pytrace=False)
    host = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--width", "10"])
    wait_until(lambda: selection_owned("_NET_SYSTEM_TRAY_S0"), 60, "trayer owning the tray selection")
    yield host
    host.kill()
    host.wait()


def click(x: int, y: int) -> None:
    subprocess.run(["xdotool", "mousemove", str(x), str(y), "click", "1"], check=True, timeout=10)


def test_with_a_tray_host_the_icon_shows_and_a_click_opens_the_prompt(tray_host):
    tray = TrayProcess()
    try:
        assert tray.next() == "kind tray"
        _, x, y, w, h = tray.next().split()
        assert int(w) > 0 and int(h) > 0  # embedded in trayer, so it has a real place on screen
        click(int(x) + int(w) // 2, int(y) + int(h) // 2)
        assert tray.next() == "new_task"
        tray.send("state waiting step 3: click at (10, 20)")
        assert tray.next() == "tooltip Holodesk: waiting for your approval | step 3: click at (10, 20)"
        tray.send("menu")
        assert tray.next() == "menu New task,Stop,Pause,Routines,History,Choose a model…,Settings,Quit"
        tray.send("state paused")
        tray.next()
        tray.send("menu")
        assert "Resume" in tray.next()  # the menu follows the state
    finally:
        tray.close()


def test_without_a_tray_host_a_control_window_takes_its_place(xvfb):
    tray = TrayProcess()
    try:
        assert tray.next() == "kind window"
        _, x, y = tray.next().split()
        click(int(x), int(y))
        assert tray.next() == "new_task"
        tray.send("state loading 40%")
        assert tray.next() == "tooltip Holodesk: loading the model | 40%"
    finally:
        tray.close()


def test_a_balloon_given_at_start_points_at_the_tray_icon(xvfb):
    """The app's "running" balloon comes before the tray has placed the icon; Qt would then draw it at
    the screen's top-left corner, far from the icon. It waits (at most a second) for the icon's place.
    The tray sizes itself to its icons (`--widthtype request`), as panels do: the icon moves once docked."""
    host = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24"])
    try:
        wait_until(lambda: selection_owned("_NET_SYSTEM_TRAY_S0"), 60, "trayer owning the tray selection")
        result = subprocess.run(
            [sys.executable, "-m", "tests.support.tray_balloon_probe"],
            env={**os.environ, "QT_QPA_PLATFORM": "xcb"}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        host.kill()
        host.wait()
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert "icon" in lines and "balloon" in lines, result.stdout + result.stderr
    assert lines["balloon"] != "none", "the balloon was not shown"
    ix, iy, iw, ih = map(int, lines["icon"].split())
    bx, by, bw, bh = map(int, lines["balloon"].split())
    assert iw > 0 and (ix, iy) != (0, 0), lines  # trayer embedded the icon
    # The balloon's box reaches to within a few pixels of the icon (its arrow points at the icon's centre).
    centre_x, centre_y = ix + iw // 2, iy + ih // 2
    dx = max(bx - centre_x, 0, centre_x - (bx + bw))
    dy = max(by - centre_y, 0, centre_y - (by + bh))
    assert dx <= 30 and dy <= 30, f"balloon at {lines['balloon']}, icon at {lines['icon']}"
