"""The seat keyboard (automation/input/wlroots/seat_keyboard.py): with it open, no wtype call loses a key.

The headless sway has no keyboard of its own (no libinput devices), as a virtual machine's or a
kiosk's desktop may not: between two wtype calls the seat has none, and a program asks for its
keyboard again only after the next call's keys may have gone out (seen: 13 first letters lost in 25
calls into foot, 2 keys in 20 calls through the backend under load). Here wtype runs without the
backend's warm-up Shift, so each call's own first key is the one at risk: with the seat keyboard
open every one must arrive; with its device not made, about half lose their first letter.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.rigs.sway_stack import SwayStack
from holodesk.automation.actions import TypeText
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from holodesk.automation.input.wlroots.seat_keyboard import SeatKeyboard
from tests.automation.wlroots.conftest import SwayTarget

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

CALLS = 20


def keyboards(stack: SwayStack) -> int:
    inputs = stack.swaymsg("get_inputs")
    assert isinstance(inputs, list)
    return sum(1 for device in inputs if isinstance(device, dict) and device.get("type") == "keyboard")


def bare_wtype(stack: SwayStack, *arguments: str) -> None:
    done = subprocess.run(["wtype", *arguments], env=stack.env(), capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"wtype failed ({done.returncode}): {done.stderr.strip()}"


def test_with_the_seat_keyboard_open_no_wtype_call_loses_its_first_key(
    sway_stack: SwayStack, sway_target: SwayTarget
) -> None:
    assert keyboards(sway_stack) == 0  # the stack's seat has no keyboard of its own
    seat_keyboard = SeatKeyboard(environ=sway_stack.env())
    seat_keyboard.open()
    try:
        assert keyboards(sway_stack) == 1
        lost = []
        for index in range(CALLS):
            word = f"word{index}"
            sway_target.clear()
            bare_wtype(sway_stack, "--", word)  # a call of its own, then Enter in another, as the backend does
            bare_wtype(sway_stack, "-k", "Return")
            received = sway_target.wait_for("enter", 10.0)["text"]
            if received != word:
                lost.append((word, received))
        assert lost == [], f"{len(lost)} of {CALLS} calls lost keys: {lost}"
    finally:
        seat_keyboard.close()
    assert keyboards(sway_stack) == 0  # closed: the device is gone
    seat_keyboard.close()  # twice is fine


def test_the_backend_keeps_one_seat_keyboard_for_the_run_and_closes_it(
    sway_stack: SwayStack, sway_target: SwayTarget
) -> None:
    backend = WtypeKeyboard(environ=sway_stack.env())
    performer = InputPerformer(backend)
    try:
        for text in ("first", "second"):
            sway_target.clear()
            assert performer.execute(TypeText(text, press_enter=True)).ok
            assert sway_target.wait_for("enter", 10.0)["text"] == text
            assert keyboards(sway_stack) == 1  # wtype's own keyboards are gone, the seat keyboard stays
    finally:
        performer.close()
    assert keyboards(sway_stack) == 0


def test_without_pywayland_typing_is_refused_naming_it_before_anything_is_sent(
    sway_stack: SwayStack, sway_target: SwayTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pywayland.client", None)  # import fails as if not installed
    performer = InputPerformer(WtypeKeyboard(environ=sway_stack.env()))
    sway_target.clear()
    with pytest.raises(ActionError, match="typing on a wlroots desktop needs the Python package pywayland"):
        performer.validate(TypeText("never typed"))
    with pytest.raises(ActionError, match="pywayland"):
        performer.execute(TypeText("never typed", press_enter=True))
    monkeypatch.undo()
    fence = InputPerformer(WtypeKeyboard(environ=sway_stack.env()))
    try:
        assert fence.execute(TypeText("fence", press_enter=True)).ok
    finally:
        fence.close()
    assert sway_target.wait_for("enter", 10.0)["text"] == "fence"  # nothing of the refused text arrived
