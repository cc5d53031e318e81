"""Holodesk's overlay and approval panel on sway, through XWayland, over a native Wayland window.

sway runs with XWayland here (SwayStack(xwayland=True)); under it a native Wayland Qt window fills the
output (tests/support/wayland_target.py). The overlay probe (tests/support/overlay_probe.py) runs as
Holodesk runs in a sway session: Qt's platform chosen by holodesk.app.gui.qt_platform (XWayland) and
its frames from the backend holodesk.automation.backends chooses (grim). The test's eyes are grim's
screencopy of the whole output, its hand the run's virtual pointer. Checked: the marker covers the
exact target pixel above the native window and nothing far from it; the frame Holodesk hands the
model does not show it; a click on the marker reaches the native window beneath at that pixel
(click-through); the approval panel is drawn above the native window.

The last two fail on sway 1.7 (Debian 12, Xwayland 22.1.9) and are marked as expected failures
(strict: they report when fixed). Click-through: the overlay is one full-screen override-redirect X
window (1024x768, xwininfo) whose X input shape is empty, which XWayland on sway does not turn into
an empty Wayland input region: while the marker shows, no click reaches the native window, even
500 px from the marker (a click there reached it just before the marker showed). The overlay's
windows are app/gui's. The panel covered only 18% of its place over the full-screen native window:
it is a managed X window, which sway makes a floating window (get_tree: floating_con at the panel's
rectangle, fullscreen_mode 0), and sway draws a workspace's full-screen window above its floating ones.

Tried for the panel (30 November 2026) and not kept: the panel as an override-redirect window too
(X11BypassWindowManagerHint). Over the full-screen native window it is then drawn, its Approve and Edit
buttons answer the virtual pointer, and typing while it shows still reaches the user's window; but it
never gets the keyboard itself (sway focuses an override-redirect window on a click only if it wants
focus, and a Tool window's utility type does not), so text typed into its edit fields was lost, and a
question's reply field would be too. A click that arrives with the pointer's first entry into an
XWayland window was lost as well (the virtual pointer jumps; a hand's pointer passes over first).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image

from bench.rigs.sway_stack import StackError, SwayStack
from holodesk.automation.action_picture import MARKER_COLOUR
from holodesk.automation.actions import Click, Point
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from holodesk.automation.input.wlroots.pointer import WlrootsPointer
from tests.automation.wlroots.conftest import SwayTarget
from tests.support.overlay_probe import OverlayProbe
from tests.support.panel_cover import wait_until_covered
from tests.support.wayland_target import BACKGROUND_COLOUR

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

TARGET = (800, 250)  # on the window's plain background, away from its pad and field


@pytest.fixture(scope="module")
def sway_stack() -> Iterator[SwayStack]:
    """conftest's stack with XWayland (the overlay's way on sway); conftest's `sway_target` opens on it."""
    sway = SwayStack(xwayland=True)
    try:
        sway.start()
        sway.x_display()
    except StackError as exc:
        sway.stop()
        pytest.fail(f"the headless sway stack with XWayland did not start: {exc}", pytrace=False)
    try:
        yield sway
    finally:
        sway.stop()


@pytest.fixture(scope="module")
def probe(sway_stack: SwayStack, sway_target: SwayTarget) -> Iterator[OverlayProbe]:
    """Holodesk's GUI side, started with the sway session's environment only (it chooses its own way)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("QT_QPA_PLATFORM", "HOLODESK_BACKEND", "DBUS_SESSION_BUS_ADDRESS"):
            patch.delenv(name, raising=False)
        for name, value in {**sway_stack.env(), "DISPLAY": sway_stack.x_display()}.items():
            patch.setenv(name, value)
        gui = OverlayProbe.start(wayland=True, timeout_s=30)
    try:
        yield gui
    finally:
        gui.close()


def screenshot(sway_stack: SwayStack) -> np.ndarray:
    """The whole output as sway composes it (grim), RGB rows."""
    path = sway_stack.root / "eyes.png"
    subprocess.run(["grim", str(path)], env=sway_stack.env(), check=True, timeout=20)
    with Image.open(path) as picture:
        return np.asarray(picture.convert("RGB"))


def frame_showing(
    sway_stack: SwayStack, point: tuple[int, int], colour: tuple[int, ...], timeout_s: float = 5.0
) -> np.ndarray:
    """sway's picture once `point` shows `colour` (fails with what it showed instead)."""
    deadline = time.monotonic() + timeout_s
    while True:
        frame = screenshot(sway_stack)
        seen = tuple(int(v) for v in frame[point[1], point[0]])
        if seen == colour:
            return frame
        assert time.monotonic() < deadline, f"{point} shows {seen}, not {colour}"
        time.sleep(0.05)


def test_the_gui_runs_through_xwayland(probe: OverlayProbe, sway_stack: SwayStack) -> None:
    assert probe.ready["platform"] == "xcb", probe.ready
    assert f"through XWayland ({sway_stack.x_display()})" in probe.ready["platform_reason"], probe.ready
    assert [screen["rect"] for screen in probe.ready["screens"]] == [[0, 0, 1024, 768]]


def test_the_marker_covers_the_exact_pixel_and_the_models_frame_does_not_show_it(
    probe: OverlayProbe, sway_stack: SwayStack
) -> None:
    x, y = TARGET
    frame_showing(sway_stack, (x, y), BACKGROUND_COLOUR)  # the native window's background before
    probe.request({"cmd": "show", "step": 2, "action": {"kind": "click", "at": [x, y]}}, "shown")
    frame = frame_showing(sway_stack, TARGET, MARKER_COLOUR)
    ring = [(x + 15, y), (x - 15, y), (x, y + 15)]  # the marker ring is drawn around it
    assert all(tuple(frame[py, px]) != BACKGROUND_COLOUR for px, py in ring)
    assert tuple(frame[y, x + 60]) == BACKGROUND_COLOUR  # and only there: the native window shows around it
    points = [[x, y], *[[px, py] for px, py in ring]]
    grabbed = probe.request({"cmd": "grab", "points": points, "wrapped": True}, "grabbed", 30)
    assert [tuple(c) for c in grabbed["colours"]] == [BACKGROUND_COLOUR] * len(points), grabbed
    assert grabbed["visible_after"]
    frame_showing(sway_stack, TARGET, MARKER_COLOUR)  # back on screen after the grab
    probe.request({"cmd": "clear"}, "cleared")


@pytest.mark.xfail(
    strict=True,
    reason="sway 1.7: the full-screen overlay window takes every click while the marker shows (docstring)",
)
def test_a_click_on_the_marker_reaches_the_native_window_beneath(
    probe: OverlayProbe, sway_stack: SwayStack, sway_target: SwayTarget
) -> None:
    x, y = TARGET
    probe.request({"cmd": "show", "step": 3, "action": {"kind": "click", "at": [x, y]}}, "shown")
    frame_showing(sway_stack, TARGET, MARKER_COLOUR)
    performer = InputPerformer(
        WtypeKeyboard(environ=sway_stack.env(), pointer=WlrootsPointer(environ=sway_stack.env()))
    )
    try:
        assert performer.execute(Click(Point(x, y))).ok
    finally:
        performer.close()
    press = sway_target.wait_for("press", 5.0)
    assert (press["x"], press["y"], press["button"]) == (x, y, "LeftButton"), press
    probe.request({"cmd": "clear"}, "cleared")


@pytest.mark.xfail(strict=True, reason="sway 1.7 draws the full-screen window above the floating panel (docstring)")
def test_the_approval_panel_is_drawn_above_the_native_window(probe: OverlayProbe, sway_stack: SwayStack) -> None:
    probe.send({"cmd": "decide", "step": 4, "action": {"kind": "click", "at": list(TARGET)}, "note": "the button"})
    panel = probe.wait_for("panel", 15)
    left, top, width, height = panel["window"]
    assert width > 100 and height > 50 and left >= 0 and left + width <= 1024 and top + height <= 768, panel

    wait_until_covered(lambda: screenshot(sway_stack), panel["window"])
    probe.send({"cmd": "cancel"})
    assert probe.wait_for("decided", 5)["decision"] == "stop"
