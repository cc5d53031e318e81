"""The thinking status and the model-loading window: what they say, that they never take the keyboard,
and that the thinking status is off the screen before any screenshot."""

from __future__ import annotations

import threading

from holodesk.app.gui.loading_window import LoadingWindow
from holodesk.app.gui.own_windows_capture import OwnWindowsHiddenCapture
from holodesk.app.gui.qt import Qt, QtWidgets
from holodesk.app.gui.thinking_status import ThinkingStatus
from tests.automation.frames import solid_frame


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_the_thinking_status_shows_step_and_elapsed_seconds_and_stops(qtbot):
    clock = Clock()
    status = ThinkingStatus(clock=clock)
    qtbot.addWidget(status)
    status.show_state(3)
    assert status.isVisible() and status.text == "Step 3 · the model is thinking · 0 s"
    clock.now += 7.4
    qtbot.waitUntil(lambda: status.text.endswith("· 7 s"), timeout=2000)  # its own timer redraws it
    status.show_state(3)  # the same step again: the clock keeps running
    assert status.text.endswith("· 7 s")
    status.show_state(4)
    assert status.text == "Step 4 · the model is thinking · 0 s"
    # Never the keyboard: the user keeps typing in their own application.
    assert status.windowFlags() & Qt.WindowType.WindowDoesNotAcceptFocus
    assert status.testAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
    with qtbot.waitSignal(status.stop_requested, timeout=1000):
        qtbot.mouseClick(status.findChild(QtWidgets.QPushButton, "stop"), Qt.MouseButton.LeftButton)
    status.hide_status()
    assert not status.isVisible()


def test_the_thinking_status_is_hidden_before_a_screenshot(qtbot):
    status = ThinkingStatus()
    qtbot.addWidget(status)
    status.show_state(1)
    seen: list[bool] = []

    class Screen:
        def grab(self, monitor):
            seen.append(status.isVisible())
            return solid_frame(8, 8)

        def monitors(self):
            return []

        def close(self):
            pass

    capture = OwnWindowsHiddenCapture(Screen(), status=status)
    thread = threading.Thread(target=lambda: capture.grab(1))  # from the engine's thread, as in the app
    thread.start()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=3000)
    assert seen == [False]


def test_the_loading_window_shows_stage_and_percentage(qtbot):
    window = LoadingWindow()
    qtbot.addWidget(window)
    window.show_progress(0.42, "Loading weights: shard 3 of 7")
    assert window.isVisible() and window.percent() == 42
    assert window.bar.text() == "42%" and window.stage.text() == "Loading weights: shard 3 of 7"
    assert window.windowFlags() & Qt.WindowType.WindowDoesNotAcceptFocus
