"""The overlay on a real X display: exact pixels at each scale factor, click-through, out of the
model's screenshot, and dragging its marker.

Qt's scale factor is fixed per process, so the overlay runs in tests/support/overlay_probe.py, one
process per scale, on the module's Xvfb with xcompmgr compositing (without a compositor a
translucent window's empty pixels are black). The test reads the screen with mss, as the model's
screenshots are taken, and clicks and drags with xdotool, as a user would.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from Xlib import X
from Xlib import display as xdisplay

from bench.rigs.target_client import TargetWindow
from bench.rigs.target_window import PAD_COLOUR
from holodesk.automation.action_picture import MARKER_COLOUR
from holodesk.automation.actions import Point
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.virtual_display import LAPTOP, TWO_MONITORS, XvfbServer
from tests.support.overlay_probe import OverlayProbe

pytestmark = pytest.mark.display

MARKER = tuple(MARKER_COLOUR)
PAD = tuple(PAD_COLOUR)


def xdotool(*args: object) -> None:
    subprocess.run(["xdotool", *map(str, args)], check=True, timeout=10)


@pytest.fixture(scope="module")
def compositor(xvfb: XvfbServer) -> Iterator[subprocess.Popen[bytes]]:
    """xcompmgr on the module's display, once it owns the compositing-manager selection."""
    process = subprocess.Popen(["xcompmgr"], env=xvfb.env(), stderr=subprocess.DEVNULL)
    connection = xdisplay.Display(xvfb.display)
    try:
        selection = connection.intern_atom("_NET_WM_CM_S0")
        deadline = time.monotonic() + 5
        while connection.get_selection_owner(selection) == X.NONE:
            assert process.poll() is None, "xcompmgr exited"
            assert time.monotonic() < deadline, "xcompmgr did not start compositing within 5 s"
            time.sleep(0.02)
        yield process
    finally:
        connection.close()
        process.send_signal(signal.SIGCONT)  # in case a test left it paused
        process.terminate()
        process.wait(timeout=5)


@pytest.fixture(scope="module")
def probes(xvfb: XvfbServer, compositor: subprocess.Popen[bytes]) -> Iterator[Callable[..., OverlayProbe]]:
    """Overlay processes by scale factor, started on first use and kept for the module."""
    started: dict[tuple[float | None, str | None], OverlayProbe] = {}

    def probe(scale: float | None = None, screen_scales: str | None = None) -> OverlayProbe:
        key = (scale, screen_scales)
        if key not in started:
            started[key] = OverlayProbe.start(scale=scale, screen_scales=screen_scales)
        return started[key]

    yield probe
    for running in started.values():
        running.close()


@pytest.fixture
def overlay(probes: Callable[..., OverlayProbe]) -> Iterator[Callable[..., OverlayProbe]]:
    """A probe at a given scale; whatever it shows is cleared after the test."""
    used: list[OverlayProbe] = []

    def at(scale: float | None = None, screen_scales: str | None = None) -> OverlayProbe:
        probe = probes(scale, screen_scales)
        used.append(probe)
        return probe

    yield at
    for probe in used:
        probe.request({"cmd": "clear"}, "cleared")


def show_click(probe: OverlayProbe, point: Point, step: int = 1, *, editable: bool = True) -> dict:
    """Show a click at `point`; with `editable` its marker has a handle that takes the mouse."""
    action = {"kind": "click", "at": [point.x, point.y]}
    return probe.request({"cmd": "show", "step": step, "action": action, "editable": editable}, "shown")


def screen_when(condition: Callable[[ScreenFrame], bool], timeout_s: float = 3.0) -> ScreenFrame:
    """The first screenshot meeting `condition` (the compositor paints a little after Qt), or the last one."""
    capture = ScreenCapture()
    deadline = time.monotonic() + timeout_s
    while True:
        frame = capture.grab(None)
        if condition(frame) or time.monotonic() > deadline:
            capture.close()
            return frame
        time.sleep(0.02)


def marker_offsets(frame: ScreenFrame, point: Point, radius: int = 4) -> set[tuple[int, int]]:
    """Where around `point` the screen shows the marker colour, as offsets from it."""
    return {
        (dx, dy)
        for dx in range(-radius, radius + 1)
        for dy in range(-radius, radius + 1)
        if frame.pixel_rgb(point.x + dx, point.y + dy) == MARKER
    }


def assert_marker_centred_on(frame: ScreenFrame, point: Point) -> None:
    """The marker's centre dot is a square of the marker colour centred exactly on `point`."""
    offsets = marker_offsets(frame, point)
    assert (0, 0) in offsets, f"no marker at {point}: {frame.pixel_rgb(point.x, point.y)}"
    half = max(abs(dx) for dx, _ in offsets)
    square = {(dx, dy) for dx in range(-half, half + 1) for dy in range(-half, half + 1)}
    assert offsets == square, f"marker pixels around {point} are not a square centred on it: {sorted(offsets)}"
    assert frame.pixel_rgb(point.x + half + 3, point.y) != MARKER  # a few pixels away: not the marker


@pytest.mark.parametrize("scale", [1, 1.25, 2])
def test_the_marker_sits_on_the_exact_physical_pixel(
    overlay: Callable[..., OverlayProbe], target_window: TargetWindow, scale: float
) -> None:
    probe = overlay(scale)
    assert probe.ready["screens"][0]["scale"] == scale
    pad = target_window.widget_rect("pad")
    # Odd and even positions: at 1.25 only every fifth physical pixel is a whole logical one.
    for step, point in enumerate((Point(pad.left + 137, pad.top + 91), Point(pad.left + 262, pad.top + 200)), 1):
        show_click(probe, point, step)
        frame = screen_when(lambda f, p=point: f.pixel_rgb(p.x, p.y) == MARKER)
        assert_marker_centred_on(frame, point)


@pytest.mark.parametrize("xvfb", [TWO_MONITORS], indirect=True, ids=str)
def test_the_marker_is_exact_on_monitors_with_different_scales(
    xvfb: XvfbServer, overlay: Callable[..., OverlayProbe]
) -> None:
    probe = overlay(screen_scales="LEFT=1.25;RIGHT=2")
    assert [(s["name"], s["scale"]) for s in probe.ready["screens"]] == [("LEFT", 1.25), ("RIGHT", 2)]
    for step, point in enumerate((Point(1451, 603), Point(1920 + 777, 333), Point(1920, 0), Point(1919, 1079)), 1):
        show_click(probe, point, step)
        frame = screen_when(lambda f, p=point: f.pixel_rgb(p.x, p.y) == MARKER)
        if point in (Point(1920, 0), Point(1919, 1079)):  # at a monitor's edge: only the centre can be checked
            assert frame.pixel_rgb(point.x, point.y) == MARKER
        else:
            assert_marker_centred_on(frame, point)


def test_clicks_go_through_the_overlay(overlay: Callable[..., OverlayProbe], target_window: TargetWindow) -> None:
    """The overlay's own windows take no input: without a handle (a marker that cannot be dragged),
    a click on its centre dot reaches the button below."""
    probe = overlay(1.25)
    ok = target_window.centre("ok")
    assert show_click(probe, ok, editable=False)["handles"] == []
    frame = screen_when(lambda f: f.pixel_rgb(ok.x, ok.y) == MARKER)
    assert frame.pixel_rgb(ok.x, ok.y) == MARKER
    target_window.reset()
    xdotool("mousemove", ok.x, ok.y, "click", 1)
    events = target_window.sync()
    presses = [(e["x"], e["y"], e["widget"]) for e in events if e["event"] == "press"]
    assert presses == [(ok.x, ok.y, "ok")]
    assert {"event": "clicked", "widget": "ok"} in events

    # A click on the overlay's label (painted, opaque) also reaches the window below.
    pad = target_window.widget_rect("pad")
    point = Point(pad.left + 60, pad.top + 60)
    show_click(probe, point, 2, editable=False)
    label = Point(point.x + 80, point.y + 48)
    frame = screen_when(lambda f: max(f.pixel_rgb(label.x, label.y)) < 90)
    assert max(frame.pixel_rgb(label.x, label.y)) < 90, "expected the dark label there"
    target_window.reset()
    xdotool("mousemove", label.x, label.y, "click", 1)
    presses = [(e["x"], e["y"], e["widget"]) for e in target_window.sync() if e["event"] == "press"]
    assert presses == [(label.x, label.y, "pad")]


def test_the_overlay_is_kept_out_of_the_screenshot(
    overlay: Callable[..., OverlayProbe], target_window: TargetWindow
) -> None:
    probe = overlay(2)
    pad = target_window.widget_rect("pad")
    point = Point(pad.left + 101, pad.top + 77)
    label = Point(point.x + 110, point.y + 66)  # on the label, at scale 2
    show_click(probe, point)
    screen_when(lambda f: f.pixel_rgb(point.x, point.y) == MARKER)

    plain = probe.request({"cmd": "grab", "points": [[point.x, point.y], [label.x, label.y]]}, "grabbed")
    assert plain["colours"][0] == list(MARKER)
    assert plain["colours"][1] != list(PAD)

    for _ in range(3):  # repeatedly: hiding and restoring must not drift or race
        wrapped = probe.request(
            {"cmd": "grab", "points": [[point.x, point.y], [label.x, label.y]], "wrapped": True}, "grabbed"
        )
        assert wrapped["colours"] == [list(PAD), list(PAD)], "the overlay was in the model's screenshot"
        assert wrapped["visible_after"] is True
    frame = screen_when(lambda f: f.pixel_rgb(point.x, point.y) == MARKER)
    assert_marker_centred_on(frame, point)


@contextmanager
def paused(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """The compositor stopped for the block: the screen keeps its last picture until it resumes."""
    process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        process.send_signal(signal.SIGCONT)


def shown_windows_of(pid: int) -> list[int]:
    """The X windows of process `pid` that are mapped now (Qt sets _NET_WM_PID on each)."""
    connection = xdisplay.Display()
    try:
        pid_atom = connection.intern_atom("_NET_WM_PID")
        shown = []
        for window in connection.screen().root.query_tree().children:
            owner = window.get_full_property(pid_atom, X.AnyPropertyType)
            if owner is not None and list(owner.value) == [pid] and window.get_attributes().map_state != X.IsUnmapped:
                shown.append(window.id)
        return shown
    finally:
        connection.close()


def wait_until_hidden(probe: OverlayProbe, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while shown_windows_of(probe.process.pid):
        assert time.monotonic() < deadline, "the overlay was not hidden for the grab"
        time.sleep(0.005)


def wait_until_shown(probe: OverlayProbe, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not shown_windows_of(probe.process.pid):
        assert time.monotonic() < deadline, "the overlay was not shown again after the grab"
        time.sleep(0.005)


def test_a_late_compositor_never_lets_the_overlay_into_the_screenshot(
    overlay: Callable[..., OverlayProbe], target_window: TargetWindow, compositor: subprocess.Popen[bytes]
) -> None:
    """The X server unmaps at once, but a compositor repaints when it gets to it: the grab must wait
    for the picture to change, not for a guessed time. Paused, the compositor never repaints: the grab
    fails, saying so, rather than return a screenshot with the overlay in it. Resumed only after
    the overlay is unmapped, the grab gets the picture without it."""
    probe = overlay(2)
    pad = target_window.widget_rect("pad")
    point = Point(pad.left + 131, pad.top + 97)
    label = Point(point.x + 110, point.y + 66)  # on the label, at scale 2
    points = [[point.x, point.y], [label.x, label.y]]
    show_click(probe, point)
    screen_when(lambda f: f.pixel_rgb(point.x, point.y) == MARKER)
    assert probe.process.pid is not None and shown_windows_of(probe.process.pid)

    with paused(compositor):
        answer = probe.request({"cmd": "grab", "points": points, "wrapped": True}, ("grabbed", "grab_failed"), 20)
    assert answer["event"] == "grab_failed", f"a screenshot was taken with the overlay still painted: {answer}"
    assert "still showed on the screen" in answer["error"]
    wait_until_shown(probe)  # restored after the failed grab

    with paused(compositor):
        probe.send({"cmd": "grab", "points": points, "wrapped": True})
        wait_until_hidden(probe)
    grabbed = probe.wait_for("grabbed", 20)
    assert grabbed["colours"] == [list(PAD), list(PAD)], "the overlay was in the model's screenshot"
    assert grabbed["visible_after"] is True


@pytest.mark.parametrize("scale", [1.25, 2])
def test_dragging_the_marker_edits_the_target(
    overlay: Callable[..., OverlayProbe], target_window: TargetWindow, scale: float
) -> None:
    probe = overlay(scale)
    pad = target_window.widget_rect("pad")
    start = Point(pad.left + 150, pad.top + 120)
    shown = show_click(probe, start)
    assert len(shown["handles"]) == 1
    screen_when(lambda f: f.pixel_rgb(start.x, start.y) == MARKER)
    target_window.reset()

    grip = Point(start.x - round(15 * scale), start.y)  # on the handle's ring, left of its hole
    dx, dy = 43, -29
    xdotool("mousemove", grip.x, grip.y, "mousedown", 1)
    xdotool("mousemove", grip.x + 10, grip.y - 5)
    xdotool("mousemove", grip.x + dx, grip.y + dy, "mouseup", 1)
    edited = probe.wait_for("target_edited")
    moved = Point(start.x + dx, start.y + dy)
    assert edited["action"] == {"kind": "click", "at": [moved.x, moved.y], "button": "left", "count": 1}
    assert [e for e in target_window.sync() if e["event"] in ("press", "release")] == [], "the drag went through"
    frame = screen_when(lambda f: f.pixel_rgb(moved.x, moved.y) == MARKER)
    assert_marker_centred_on(frame, moved)


@pytest.mark.parametrize(("scale", "grip"), [(1, (0, 0)), (1, (6, 5)), (1.25, (0, 0)), (1.25, (-1, 1)), (2, (1, 0))])
def test_the_marker_can_be_dragged_by_its_centre_dot_and_nothing_reaches_the_window_below(
    overlay: Callable[..., OverlayProbe], target_window: TargetWindow, scale: float, grip: tuple[int, int]
) -> None:
    """A press on the target's own pixel (the dot the panel says to grab), or just beside it, drags it."""
    probe = overlay(scale)
    pad = target_window.widget_rect("pad")
    start = Point(pad.left + 150, pad.top + 120)
    show_click(probe, start)
    frame = screen_when(lambda f: f.pixel_rgb(start.x, start.y) == MARKER)
    assert_marker_centred_on(frame, start)  # the handle's own dot, on the overlay's pixel
    target_window.reset()
    press = Point(start.x + grip[0], start.y + grip[1])
    xdotool("mousemove", press.x, press.y, "mousedown", 1)
    xdotool("mousemove", press.x + 10, press.y + 5)
    xdotool("mousemove", press.x + 40, press.y + 30, "mouseup", 1)
    edited = probe.wait_for("target_edited")
    assert edited["action"]["at"] == [start.x + 40, start.y + 30]
    assert [e for e in target_window.sync() if e["event"] in ("press", "release")] == [], "the press went through"


@pytest.mark.parametrize("xvfb", [LAPTOP], indirect=True, ids=str)
def test_without_a_compositor_the_overlay_covers_only_its_drawing(
    xvfb: XvfbServer, target_window: TargetWindow
) -> None:
    """No compositor: a translucent window's empty pixels are black, so each window is masked to its drawing."""
    pad = target_window.widget_rect("pad")
    point = Point(pad.left + 121, pad.top + 87)
    before = ScreenCapture().grab(None)
    probe = OverlayProbe.start(scale=1.25)  # no `compositor` fixture here
    try:
        show_click(probe, point)
        after = screen_when(lambda f: f.pixel_rgb(point.x, point.y) == MARKER)
        assert_marker_centred_on(after, point)
        changed_rows, changed_columns = np.nonzero(np.any(before.pixels != after.pixels, axis=2))
        # Only the crosshair (radius 25 logical) and the label below-right of it (about 210 x 40) changed.
        assert changed_columns.min() >= point.x - 35 and changed_columns.max() <= point.x + 330
        assert changed_rows.min() >= point.y - 35 and changed_rows.max() <= point.y + 90
        assert after.pixel_rgb(point.x - 60, point.y) == PAD
    finally:
        probe.close()


@pytest.mark.parametrize("xvfb", [LAPTOP], indirect=True, ids=str)
def test_the_marker_is_exact_at_the_scale_the_desktop_sets(xvfb: XvfbServer, target_window: TargetWindow) -> None:
    """X11 desktops scale through Xft.dpi (144 dpi: 1.5), which Qt reads; no QT_SCALE_FACTOR here."""
    subprocess.run(["xrdb", "-merge"], input=b"Xft.dpi: 144\n", env=xvfb.env(), check=True, timeout=10)
    try:
        probe = OverlayProbe.start()
        try:
            assert probe.ready["screens"][0]["scale"] == 1.5
            pad = target_window.widget_rect("pad")
            for step, point in enumerate(
                (Point(pad.left + 131, pad.top + 77), Point(pad.left + 200, pad.top + 150)), 1
            ):
                show_click(probe, point, step)
                frame = screen_when(lambda f, p=point: f.pixel_rgb(p.x, p.y) == MARKER)
                assert_marker_centred_on(frame, point)
        finally:
            probe.close()
    finally:
        subprocess.run(["xrdb", "-remove"], env=xvfb.env(), check=True, timeout=10)
