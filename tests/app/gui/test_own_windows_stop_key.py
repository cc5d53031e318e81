"""The stop gesture inside Holodesk's own windows (Wayland: nothing global hears them there).

Keys enter through Qt's window-system path (QTest on the QWindow), as a compositor's key event
does, so the application-wide filter sees them exactly as a user's press would arrive.
"""

from __future__ import annotations

import time

from holodesk.app.gui.hotkeys import DOUBLE_PRESS_WINDOW_S, OwnWindowsStopKey
from holodesk.app.gui.qt import Qt, QtCore, QtWidgets
from holodesk.app.gui.recent_tasks import RecentTasks
from holodesk.app.gui.task_prompt import TaskPrompt
from holodesk.automation.input.injected import InjectedInput


def installed(qapp, qtbot, **options) -> tuple[OwnWindowsStopKey, list[bool]]:
    stop_key = OwnWindowsStopKey(**options)
    qapp.installEventFilter(stop_key)
    fired: list[bool] = []
    stop_key.triggered.connect(lambda: fired.append(True))
    return stop_key, fired


def shown_window(qtbot) -> QtWidgets.QWidget:
    window = QtWidgets.QWidget()
    window.setWindowTitle("Holodesk: history")
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def press(qtbot, window: QtWidgets.QWidget, key: Qt.Key = Qt.Key.Key_Escape) -> None:
    handle = window.windowHandle()
    assert handle is not None
    qtbot.keyClick(handle, key)  # QTest's QWindow overload: through the window-system path
    QtCore.QCoreApplication.processEvents()


def test_esc_twice_in_a_holodesk_window_stops_and_once_does_not(qapp, qtbot):
    stop_key, fired = installed(qapp, qtbot)
    window = shown_window(qtbot)
    try:
        press(qtbot, window)
        time.sleep(DOUBLE_PRESS_WINDOW_S + 0.1)
        press(qtbot, window)  # too late: a new series
        assert fired == []
        press(qtbot, window)
        assert fired == [True]
        press(qtbot, window, Qt.Key.Key_A)
        press(qtbot, window, Qt.Key.Key_A)
        assert fired == [True]
    finally:
        qapp.removeEventFilter(stop_key)


def test_a_configured_stop_key_and_count(qapp, qtbot):
    stop_key, fired = installed(qapp, qtbot, stop_key="q", presses=3)
    window = shown_window(qtbot)
    try:
        for _ in range(2):
            press(qtbot, window, Qt.Key.Key_Q)
        assert fired == []
        press(qtbot, window, Qt.Key.Key_Q)
        assert fired == [True]
    finally:
        qapp.removeEventFilter(stop_key)


def test_presses_the_input_backend_sent_do_not_count(qapp, qtbot):
    injected = InjectedInput()
    stop_key, fired = installed(qapp, qtbot, injected=injected)
    window = shown_window(qtbot)
    try:
        injected.note(["esc"])  # the model pressed Esc into this window
        press(qtbot, window)
        press(qtbot, window)  # the user's first
        assert fired == []
        press(qtbot, window)  # and second
        assert fired == [True]
    finally:
        qapp.removeEventFilter(stop_key)


def test_the_key_still_reaches_the_window(qapp, qtbot, tmp_path):
    stop_key, _ = installed(qapp, qtbot)
    prompt = TaskPrompt(RecentTasks(tmp_path / "recent.json"))
    qtbot.addWidget(prompt)
    prompt.open_near(QtCore.QPoint(300, 200))
    qtbot.waitExposed(prompt)
    try:
        press(qtbot, prompt)
        assert not prompt.isVisible()  # Esc closed the prompt: the filter watched, it did not take it
    finally:
        qapp.removeEventFilter(stop_key)
