"""The desk the screenshot scripts (bench/*_screenshots.py) shoot on: a private Xvfb with openbox, and
Qt's event loop turned by hand while a script waits for what the screen should show.

`screenshot_desk(width, height, system_tray=True)` also starts trayer, so the tray icon has a place.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from holodesk.automation.virtual_display import DisplayLayout, XvfbServer, xvfb_display

WINDOW_MANAGER_START_S = 1.0  # openbox takes windows as they map only once it runs


@contextmanager
def screenshot_desk(width: int, height: int, *, system_tray: bool = False) -> Iterator[XvfbServer]:
    """A private Xvfb of that size as this process's display (xcb for Qt), with openbox (and trayer)."""
    with xvfb_display(DisplayLayout(width, height)) as server:
        os.environ["DISPLAY"] = server.display
        os.environ["QT_QPA_PLATFORM"] = "xcb"
        env = server.env()
        helpers = [subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        if system_tray:
            helpers.append(
                subprocess.Popen(
                    ["trayer", "--edge", "top", "--align", "right", "--widthtype", "request", "--height", "24"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        try:
            time.sleep(WINDOW_MANAGER_START_S)
            yield server
        finally:
            for process in reversed(helpers):
                process.terminate()
                process.wait(5)


def pump(until: Callable[[], bool], timeout_s: float = 15.0) -> None:
    """Turn Qt's event loop until `until()` holds; TimeoutError after `timeout_s`."""
    # heavy: Qt
    from holodesk.app.gui.qt import QtWidgets

    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            raise TimeoutError("the screen did not show what was expected in time")
        QtWidgets.QApplication.processEvents()
        time.sleep(0.02)


def settle(seconds: float) -> None:
    """Turn Qt's event loop for `seconds`, so what was shown is painted."""
    end = time.monotonic() + seconds
    pump(lambda: time.monotonic() > end)
