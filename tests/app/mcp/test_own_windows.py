"""An act aimed at one of Holodesk's windows is refused in words; other windows are not."""

from __future__ import annotations

from holodesk.app.mcp.own_windows import own_window_refusal
from holodesk.automation.actions import Click, KeyCombo, Point, TypeText
from holodesk.automation.coords import Rect
from holodesk.automation.routines.windows import DesktopWindow, KeyboardWindow

PANEL = DesktopWindow(7, Rect(100, 100, 300, 200), "Holodesk: approve this step?")
BROWSER = DesktopWindow(9, Rect(0, 0, 1920, 1080), "Holodesk - GitHub - Browser")


class Probe:
    def __init__(self, under: DesktopWindow, focus: DesktopWindow | None) -> None:
        self.under, self.focus = under, focus

    def window_at(self, x: int, y: int) -> DesktopWindow | None:
        return self.under if self.under.rect.contains(Point(x, y)) else BROWSER

    def keyboard_window(self) -> KeyboardWindow:
        return KeyboardWindow(self.focus)

    def window(self, window_id: int) -> DesktopWindow | None:
        return None


def test_a_click_on_the_panel_and_keys_to_it_are_refused():
    probe = Probe(PANEL, PANEL)
    words = own_window_refusal(Click(Point(150, 280)), probe)
    assert words is not None and "Holodesk's own window 'Holodesk: approve this step?'" in words
    assert "nothing was done" in words
    keys = own_window_refusal(KeyCombo(("enter",)), probe)
    assert keys is not None and "the keys would go to Holodesk's own window" in keys
    assert own_window_refusal(TypeText("x"), probe) is not None


def test_other_windows_and_no_probe_refuse_nothing():
    probe = Probe(PANEL, BROWSER)
    assert own_window_refusal(Click(Point(50, 50)), probe) is None  # beside the panel: the browser
    assert own_window_refusal(KeyCombo(("enter",)), probe) is None
    assert own_window_refusal(TypeText("x", Point(50, 50)), probe) is None
    assert own_window_refusal(Click(Point(150, 150)), None) is None
