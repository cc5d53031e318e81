"""A run killed outright mid-drag on sway leaves no button held after the next start (automation/held_input.py).

A child process drags on the headless sway through the run's own input layer (InputPerformer,
WtypeKeyboard with the virtual pointer), slowly, and is killed with SIGKILL once the Qt window has seen
the press. sway keeps that button down (its device died with the process), so the window sees no release.
The next start's `release_leftover_input` must send exactly that release (the window logs it) and
remove the marker; a second call finds nothing. The markers live in the test's own folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.rigs.sway_stack import SwayStack
from holodesk.automation.actions import Click, Drag, Point
from holodesk.automation.held_input import HeldInputMarker, release_leftover_input
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from holodesk.automation.input.wlroots.pointer import WlrootsPointer, marker_display
from tests.automation.wlroots.conftest import SwayTarget

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

# The child: one slow drag (5 s a step) from (x, y), its markers in `folder`; it is killed during the first step.
DRAGGING_CHILD = """
import sys
from pathlib import Path
from holodesk.automation.actions import Drag, Point
from holodesk.automation.held_input import HeldInputMarker
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from holodesk.automation.input.wlroots.pointer import WlrootsPointer, marker_display

folder, x, y = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
pointer = WlrootsPointer(marker=HeldInputMarker(folder, marker_display()), drag_step_interval_s=5.0)
InputPerformer(WtypeKeyboard(pointer=pointer)).execute(Drag(Point(x, y), Point(x + 200, y + 100)))
"""


def test_a_run_killed_mid_drag_has_its_button_released_at_the_next_start(
    sway_stack: SwayStack, sway_target: SwayTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    x, y, _, _ = sway_target.ready["layout"]["pad"]
    at = (x + 40, y + 40)
    child = subprocess.Popen(
        [sys.executable, "-c", DRAGGING_CHILD, str(tmp_path), str(at[0]), str(at[1])], env=sway_stack.env()
    )
    try:
        press = sway_target.wait_for("press", 30.0)
        assert (press["x"], press["y"], press["button"]) == (*at, "LeftButton"), press
        assert len(list(tmp_path.glob("held-input-*.json"))) == 1  # named before the press went out
    finally:
        child.kill()
        child.wait(10)

    for name in ("WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SWAYSOCK"):  # the next start runs on this desktop
        monkeypatch.setenv(name, sway_stack.env()[name])
    released = release_leftover_input(folder=tmp_path, display=":no-x-display-here")
    release = sway_target.wait_for("release", 10.0)
    assert release["button"] == "LeftButton", release
    assert (released.markers, released.buttons, released.problems) == (1, (1,), ()), released
    assert "mouse button 1" in released.describe()
    assert not list(tmp_path.glob("held-input-*"))
    assert release_leftover_input(folder=tmp_path, display=":no-x-display-here").markers == 0


def test_a_finished_click_and_drag_leave_no_marker(
    sway_stack: SwayStack, sway_target: SwayTarget, tmp_path: Path
) -> None:
    """A marker left after a release would make the next start send a release nobody needs (the window sees it)."""
    pointer = WlrootsPointer(
        environ=sway_stack.env(), marker=HeldInputMarker(tmp_path, marker_display(sway_stack.env()))
    )
    performer = InputPerformer(WtypeKeyboard(environ=sway_stack.env(), pointer=pointer))
    x, y, _, _ = sway_target.ready["layout"]["pad"]
    try:
        assert performer.execute(Click(Point(x + 10, y + 10))).ok
        assert performer.execute(Drag(Point(x + 20, y + 20), Point(x + 60, y + 50))).ok
    finally:
        performer.close()
    assert not list(tmp_path.glob("held-input-*")), list(tmp_path.iterdir())
