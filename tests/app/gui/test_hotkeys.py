"""Global hotkeys under a real X server: xdotool presses keys, pynput must see exactly what it should."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from holodesk.app.gui.hotkeys import HotkeyError, HotkeyListener, RepeatedPressDetector, action_presses, stop_key_name
from holodesk.automation.actions import Action, Click, HoldAndTap, KeyCombo, Point, TypeText, Wait
from tests.support.line_process import LineProcess


@pytest.fixture
def probe(xvfb) -> Iterator[LineProcess]:
    probe = LineProcess("tests.support.hotkey_probe", "<ctrl>+<alt>+h")
    assert probe.next(10) == "ready"
    yield probe
    probe.close()


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


@pytest.mark.display
def test_the_prompt_hotkey_fires_once(probe):
    xdotool("key", "ctrl+alt+h")
    assert probe.next(2) == "prompt"
    assert probe.next(0.3) is None


@pytest.mark.display
def test_a_plain_h_does_not_fire(probe):
    xdotool("key", "h", "alt+h", "ctrl+h")
    assert probe.next(0.5) is None


@pytest.mark.display
def test_escape_twice_stops_and_once_does_not(probe):
    xdotool("key", "Escape")
    assert probe.next(0.7) is None  # the pair window has passed: this press was alone
    xdotool("key", "--delay", "80", "Escape", "Escape")
    assert probe.next(2) == "stop"
    assert probe.next(0.3) is None


@pytest.mark.display
def test_escapes_that_holodesk_injects_are_ignored(probe):
    # The performer notes its keys just before sending them; xdotool stands in for pyautogui.
    probe.send("inject esc")
    assert probe.next(2) == "injected"
    xdotool("key", "--delay", "50", "Escape", "Escape")
    assert probe.next(0.5) is None
    time.sleep(0.3)  # past the injected window: the user's own double Esc works again
    xdotool("key", "--delay", "80", "Escape", "Escape")
    assert probe.next(2) == "stop"


@pytest.mark.display
def test_a_double_esc_right_after_the_models_esc_still_stops(probe):
    probe.send("press esc")  # the model's Esc, pressed by the real performer
    assert probe.next(5) == "pressed"
    assert probe.next(0.1) is None
    xdotool("key", "--delay", "80", "Escape", "Escape")  # the user's, at once
    assert probe.next(2) == "stop"


@pytest.fixture
def q_probe(xvfb) -> Iterator[LineProcess]:
    probe = LineProcess("tests.support.hotkey_probe", "<ctrl>+<alt>+h", "q")
    assert probe.next(10) == "ready"
    yield probe
    probe.close()


@pytest.mark.display
def test_a_printable_stop_key_typed_by_the_model_does_not_stop(q_probe):
    q_probe.send("type quiet quarry, qq")
    assert q_probe.next(10) == "typed"
    assert q_probe.next(0.7) is None


@pytest.mark.display
def test_a_printable_stop_key_pressed_by_the_user_while_the_model_types_it_stops(q_probe):
    q_probe.send("type " + "q" * 60)  # 60 keys at 20 ms: over a second of the model typing q
    time.sleep(0.3)
    # Each press released at once: `xdotool key --delay` holds a key for half the delay, and the
    # model's presses of the same keycode meanwhile would merge with it (one keyboard, one key state).
    xdotool("keydown", "q", "keyup", "q", "sleep", "0.1", "keydown", "q", "keyup", "q")
    assert q_probe.next(10) == "stop"


def test_double_press_detector_pairs_presses_inside_the_window():
    now = [0.0]
    detector = RepeatedPressDetector(2, 0.5, clock=lambda: now[0])
    assert not detector.press()
    now[0] = 0.4
    assert detector.press()
    now[0] = 0.5
    assert not detector.press()  # a third press starts a new pair
    now[0] = 1.2
    assert not detector.press()  # too late after the last one


def test_three_presses_need_each_gap_inside_the_window():
    now = [0.0]
    detector = RepeatedPressDetector(3, 0.3, clock=lambda: now[0])
    results = []
    for t in (0.0, 0.2, 0.6, 0.8, 1.0):
        now[0] = t
        results.append(detector.press())
    assert results == [False, False, False, False, True]  # 0.2 -> 0.6 broke the first series


def test_stop_keys_in_pynput_syntax_become_canonical_names():
    assert stop_key_name("<esc>") == "esc"
    assert stop_key_name("<pause>") == "pause"
    assert stop_key_name("Q") == "q"


@pytest.mark.display
def test_a_malformed_hotkey_is_reported(xvfb):
    with pytest.raises(HotkeyError, match="not valid"):
        HotkeyListener("<ctrl>+<bogus>", lambda: None, lambda: None).start()


@pytest.mark.parametrize(
    ("action", "key", "presses"),
    [
        (KeyCombo(("esc",)), "esc", True),
        (KeyCombo(("ctrl", "c")), "esc", False),
        (HoldAndTap(("shift",), ("esc",)), "esc", True),
        (TypeText("hello"), "esc", False),
        (TypeText("hello\x1b"), "esc", True),  # a control character: its key is not named here
        (TypeText("quit"), "q", True),  # a letter as the stop key, typed by the action
        (TypeText("", press_enter=True), "enter", True),
        (Click(Point(5, 5)), "esc", False),
        (Wait(1.0), "esc", False),
    ],
)
def test_an_action_that_presses_the_stop_key_is_known(action: Action, key: str, presses: bool) -> None:
    """While such an action runs the stop key is not grabbed: the grab would take the action's own press."""
    assert action_presses(action, key) is presses
