"""Global hotkeys under a real X server: xdotool presses keys, pynput must see exactly what it should."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from holodesk.app.gui.hotkeys import HotkeyError, HotkeyListener, RepeatedPressDetector, stop_key_name
from tests.support.line_process import LineProcess


@pytest.fixture
def probe(xvfb) -> Iterator[LineProcess]:
    probe = LineProcess("tests.support.hotkey_probe", "<ctrl>+<alt>+h")
    assert probe.next(10) == "ready"
    yield probe
    probe.close()


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True, timeout=10)


def test_the_prompt_hotkey_fires_once(probe):
    xdotool("key", "ctrl+alt+h")
    assert probe.next(2) == "prompt"
    assert probe.next(0.3) is None


def test_a_plain_h_does_not_fire(probe):
    xdotool("key", "h", "alt+h", "ctrl+h")
    assert probe.next(0.5) is None


def test_escape_twice_stops_and_once_does_not(probe):
    xdotool("key", "Escape")
    assert probe.next(0.7) is None  # the pair window has passed: this press was alone
    xdotool("key", "--delay", "80", "Escape", "Escape")
    assert probe.next(2) == "stop"
    assert probe.next(0.3) is None


def test_escapes_that_holodesk_injects_are_ignored(probe):
    # The executor notes its keys just before sending them; xdotool stands in for pyautogui.
    probe.send("inject esc")
    assert probe.next(2) == "injected"
    xdotool("key", "--delay", "50", "Escape", "Escape")
    assert probe.next(0.5) is None
    time.sleep(0.3)  # past the injected window: the user's own double Esc works again
    xdotool("key", "--delay", "80", "Escape", "Escape")
    assert probe.next(2) == "stop"


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


def test_a_malformed_hotkey_is_reported(xvfb):
    with pytest.raises(HotkeyError, match="not valid"):
        HotkeyListener("<ctrl>+<bogus>", lambda: None, lambda: None).start()
