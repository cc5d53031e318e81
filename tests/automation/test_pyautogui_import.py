"""pyautogui's MouseInfo tool calls sys.exit when tkinter is missing; Holodesk's input must survive that.

A child Python that cannot import tkinter (a meta-path finder refuses it, as Debian's Python without
python3-tk does) imports pyautogui through automation.pyautogui_import and moves the pointer on Xvfb
with the input performer; the X server must report the pointer there. The same child importing pyautogui
directly exits with MouseInfo's message, which shows the guard is what makes the difference.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from holodesk.automation.virtual_display import XvfbServer
from tests.support import x11_probe

pytestmark = pytest.mark.display

NO_TKINTER = """
import sys
class NoTkinter:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tkinter", "_tkinter", "Tkinter"):
            raise ImportError("No module named " + repr(name))
        return None
sys.meta_path.insert(0, NoTkinter())
"""

GUARDED = (
    NO_TKINTER
    + """
from holodesk.automation.actions import Move, Point
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.performer import InputPerformer
result = InputPerformer(X11Input([Monitor(0, Rect(0, 0, 640, 480))])).execute(Move(Point(123, 234)))
print("moved", result.ok)
"""
)


def test_without_tkinter_pyautogui_still_sends_input(xvfb: XvfbServer) -> None:
    done = subprocess.run([sys.executable, "-c", GUARDED], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "moved True" in done.stdout
    assert x11_probe.pointer()[:2] == (123, 234)


def test_without_the_guard_mouseinfo_would_end_the_process(xvfb: XvfbServer) -> None:
    done = subprocess.run([sys.executable, "-c", NO_TKINTER + "import pyautogui\nprint('alive')"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "alive" not in done.stdout
    assert "tkinter" in done.stderr
