"""The wlroots pointer (automation/input/wlroots/pointer.py) on the headless sway, seen by a native Wayland Qt window.

Each action goes through the InputPerformer, as a run's approved step does, with the one backend a
wlroots run builds (wtype keyboard + virtual pointer). The window is full screen on sway's only
output, so the coordinates it logs are screen coordinates: a click must arrive at exactly the pixel
asked for, on the widget drawn there; a drag must arrive as a press, moves and a release from start
to end; a wheel scroll as that many notches in that direction. A drag stopped part-way must end with
the button released (the window logs the release), and the next click must work as usual. The
pointer conformance cases every input backend passes (tests/support/pointer_conformance.py) run here too.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator

import pytest

from bench.rigs.sway_stack import SwayStack
from holodesk.automation.actions import Click, Drag, Point, Scroll, ScrollDirection
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.errors import ActionError, Cancelled
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from holodesk.automation.input.wlroots.pointer import WlrootsPointer
from tests.automation.wlroots.conftest import SwayTarget
from tests.support.pointer_conformance import FENCE_OFFSET, POINTER_CASES, PointerCase, PointerWindow, run_pointer_case

pytestmark = [pytest.mark.display, pytest.mark.wlroots]


@pytest.fixture(scope="module")
def pointer(sway_stack: SwayStack) -> Iterator[WlrootsPointer]:
    device = WlrootsPointer(environ=sway_stack.env())
    yield device
    device.close()


@pytest.fixture(scope="module")
def performer(sway_stack: SwayStack, pointer: WlrootsPointer) -> InputPerformer:
    return InputPerformer(WtypeKeyboard(environ=sway_stack.env(), pointer=pointer))


def pad_point(target: SwayTarget, dx: int, dy: int) -> Point:
    x, y, _, _ = target.ready["layout"]["pad"]
    return Point(x + dx, y + dy)


def test_a_click_lands_on_the_exact_pixel(performer: InputPerformer, sway_target: SwayTarget) -> None:
    at = pad_point(sway_target, 37, 61)
    assert performer.execute(Click(at)).ok
    press = sway_target.wait_for("press", 10.0)
    release = sway_target.wait_for("release", 10.0)
    assert (press["x"], press["y"], press["button"], press["widget"]) == (at.x, at.y, "LeftButton", "pad"), press
    assert (release["x"], release["y"]) == (at.x, at.y), release


def test_a_right_click_and_a_double_click_are_seen(performer: InputPerformer, sway_target: SwayTarget) -> None:
    at = pad_point(sway_target, 200, 120)
    assert performer.execute(Click(at, button="right")).ok
    assert sway_target.wait_for("press", 10.0)["button"] == "RightButton"
    assert performer.execute(Click(at, count=2)).ok
    double = sway_target.wait_for("double_click", 10.0)
    assert (double["x"], double["y"], double["button"]) == (at.x, at.y, "LeftButton"), double


def test_a_drag_goes_from_start_to_end_with_the_button_held(performer: InputPerformer, sway_target: SwayTarget) -> None:
    start, end = pad_point(sway_target, 20, 30), pad_point(sway_target, 310, 190)
    assert performer.execute(Drag(start, end)).ok
    drag = sway_target.wait_for("drag", 10.0)
    assert (drag["start"], drag["end"]) == ([start.x, start.y], [end.x, end.y]), drag


@pytest.mark.parametrize(("direction", "notches"), [("down", 3), ("up", 2), ("right", 1)])
def test_a_scroll_arrives_as_notches_in_its_direction(
    performer: InputPerformer, sway_target: SwayTarget, direction: str, notches: int
) -> None:
    at = pad_point(sway_target, 150, 100)
    start = len(sway_target.seen)
    assert performer.execute(Scroll(ScrollDirection(direction), notches, at)).ok
    received = 0.0
    while received < notches:
        wheel = sway_target.wait_for("wheel", 10.0)
        assert (wheel["direction"], wheel["x"], wheel["y"], wheel["widget"]) == (direction, at.x, at.y, "pad"), wheel
        received += wheel["notches"]
    assert received == notches, sway_target.seen[start:]


def test_a_drag_stopped_part_way_leaves_no_button_held(
    sway_stack: SwayStack, pointer: WlrootsPointer, sway_target: SwayTarget
) -> None:
    # A slow drag (0.2 s a step) so that the stop comes while the button is down.
    slow = WlrootsPointer(environ=sway_stack.env(), drag_step_interval_s=0.2)
    performer = InputPerformer(WtypeKeyboard(environ=sway_stack.env(), pointer=slow))
    cancel = CancelToken()
    outcome: list[BaseException | None] = []

    def drag() -> None:
        try:
            performer.execute(Drag(pad_point(sway_target, 10, 10), pad_point(sway_target, 350, 220)), cancel)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    try:
        worker = threading.Thread(target=drag)
        worker.start()
        press = sway_target.wait_for("press", 10.0)
        # The drag takes about 7 s (34 steps); the stop comes after a few steps, while the button is down.
        time.sleep(0.7)
        cancel.cancel("stopped by the test")
        worker.join(10.0)
        assert not worker.is_alive()
        assert isinstance(outcome[0], Cancelled), outcome
        release = sway_target.wait_for("release", 10.0)
        assert release["button"] == press["button"] == "LeftButton", release
        end = pad_point(sway_target, 350, 220)
        # stopped part-way: after some moves, before the end
        assert (release["x"], release["y"]) not in ((press["x"], press["y"]), (end.x, end.y)), release
    finally:
        performer.close()
    # The seat is not left with a button down: a plain click afterwards is a fresh press and release.
    at = pad_point(sway_target, 300, 60)
    assert InputPerformer(WtypeKeyboard(environ=sway_stack.env(), pointer=pointer)).execute(Click(at)).ok
    press = sway_target.wait_for("press", 10.0)
    assert (press["x"], press["y"]) == (at.x, at.y) and sway_target.wait_for("release", 10.0)


def test_closing_releases_a_button_still_down(sway_stack: SwayStack, sway_target: SwayTarget) -> None:
    device = WlrootsPointer(environ=sway_stack.env())
    keyboard = WtypeKeyboard(environ=sway_stack.env(), pointer=device)
    performer = InputPerformer(keyboard)
    at = pad_point(sway_target, 120, 140)
    assert performer.execute(Click(at)).ok  # opens the device and moves it there
    sway_target.wait_for("release", 10.0)
    device._button(0x110, pressed=True)
    sway_target.wait_for("press", 10.0)
    keyboard.close()  # what the run's end does
    release = sway_target.wait_for("release", 10.0)
    assert (release["x"], release["y"], release["button"]) == (at.x, at.y, "LeftButton"), release


def test_without_pywayland_the_pointer_is_refused_naming_it(
    sway_stack: SwayStack, sway_target: SwayTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Typing is refused too then (test_seat_keyboard.py): its seat keyboard needs pywayland as well."""
    monkeypatch.setitem(sys.modules, "pywayland.client", None)  # import fails as if not installed
    performer = InputPerformer(
        WtypeKeyboard(environ=sway_stack.env(), pointer=WlrootsPointer(environ=sway_stack.env()))
    )
    with pytest.raises(ActionError, match="need the Python package pywayland"):
        performer.validate(Click(pad_point(sway_target, 5, 5)))


def test_an_unreachable_display_and_a_scaled_output_are_refused_in_words() -> None:
    pointer = WlrootsPointer(environ={"WAYLAND_DISPLAY": "/nonexistent/wayland-9"})
    with pytest.raises(ActionError, match="cannot connect to the Wayland display"):
        pointer.check((Monitor(1, Rect(0, 0, 100, 100)),))
    with pytest.raises(ActionError, match="works only at scale 1"):
        pointer.check((Monitor(1, Rect(0, 0, 100, 100), 2.0, "DP-1"),))


# -- the pointer conformance cases (tests/support/pointer_conformance.py), as the X11 and portal backends run them


@pytest.mark.parametrize("case", POINTER_CASES, ids=[case.name for case in POINTER_CASES])
def test_the_pointer_conformance_cases(case: PointerCase, performer: InputPerformer, sway_target: SwayTarget) -> None:
    left, top, _, _ = sway_target.ready["layout"]["pad"]
    fence = {"button": "MiddleButton", "x": left + FENCE_OFFSET[0], "y": top + FENCE_OFFSET[1]}
    start = len(sway_target.seen)

    def read_until_fence() -> list[dict[str, object]]:
        sway_target.wait_for("release", 10.0, **fence)  # the whole fence click
        return sway_target.seen[start:]

    problem = run_pointer_case(performer, PointerWindow(Point(left, top), read_until_fence), case)
    assert problem is None, problem
