"""Without a tray, the control window stands in for it, but never takes the keyboard from the user's window.

A real window manager (openbox) decides focus here, as on a user's desktop: the user clicks the
control window's New task button while their own window has the focus, then Holodesk types. The
text must land in the user's window, and the space in it must not press the control window's
button (seen before: a run "typed" into Holodesk's own window and reported success).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from bench.rigs.target_client import TargetWindow, window_origin
from holodesk.automation.actions import Click, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.screen import ScreenCapture
from tests.support.line_process import LineProcess
from tests.support.waiting import wait_until
from tests.support.x11_probe import selection_owned

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack


@pytest.fixture
def window_manager(xvfb) -> Iterator[None]:  # type: ignore[no-untyped-def]
    if shutil.which("openbox") is None:
        pytest.fail("Debian's openbox is missing: install it (tests/run.sh does)", pytrace=False)
    manager = subprocess.Popen(["openbox"], env=xvfb.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # openbox must manage the screen before the windows map: it owns WM_S0 once it does.
    wait_until(lambda: selection_owned("WM_S0"), 60, "openbox managing the screen")
    yield
    manager.terminate()
    manager.wait(10)


def new_task_button(control: LineProcess, display_env: dict[str, str]) -> tuple[int, int]:
    """Where the New task button is on screen, asking the X server where the window manager put the window."""
    assert control.next(10) == "kind window"
    control.next(10)  # Qt's idea of the position, from before the window manager placed the window
    control.send("where")
    line = control.next(10)
    assert line is not None and line.startswith("local "), line
    _, local_x, local_y = line.split()
    found = subprocess.run(
        ["xdotool", "search", "--sync", "--onlyvisible", "--pid", str(control.process.pid)],
        capture_output=True, text=True, timeout=10, env=display_env,
    )  # fmt: skip
    for window in found.stdout.split():
        geometry = subprocess.run(
            ["xdotool", "getwindowgeometry", "--shell", window], capture_output=True, text=True, timeout=10,
            env=display_env,
        ).stdout  # fmt: skip
        values = dict(line.split("=", 1) for line in geometry.split())
        if int(values["HEIGHT"]) < 80:  # the control bar, not another window of the probe
            return int(values["X"]) + int(local_x), int(values["Y"]) + int(local_y)
    raise AssertionError(f"no control window of pid {control.process.pid} on screen: {found.stdout!r}")


def test_the_control_window_never_receives_typed_text(xvfb, window_manager) -> None:  # type: ignore[no-untyped-def]
    target = TargetWindow.start(*window_origin(xvfb.layout))
    control = LineProcess("tests.support.tray_probe", env={**os.environ, "QT_QPA_PLATFORM": "xcb"})
    capture = ScreenCapture()
    try:
        x, y = new_task_button(control, xvfb.env())
        input_performer = InputPerformer(X11Input(capture=capture))
        input_performer.execute(Click(target.centre("field")), CancelToken())  # the user's field has the focus
        target.sync()
        subprocess.run(["xdotool", "mousemove", str(x), str(y), "click", "1"], check=True, timeout=10)
        assert control.next(10) == "new_task"  # the user's click on New task works
        time.sleep(0.3)

        input_performer.execute(TypeText("a b c"), CancelToken())  # into the focused field: the user's

        events = target.sync()
        assert [e["text"] for e in events if e["event"] == "text"][-1] == "a b c"
        assert control.next(1.0) is None  # the space pressed no button of the control window
    finally:
        capture.close()
        control.close()
        target.close()
