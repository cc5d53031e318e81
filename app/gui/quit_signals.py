"""SIGINT, SIGTERM and SIGHUP end a Qt program the way its own Quit does, not by killing it mid-step.

Python runs a signal handler only between bytecodes, and Qt's event loop runs in C++: a timer wakes
the interpreter every SIGNAL_POLL_MS so that a signal is handled within that time.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

from holodesk.app.gui.qt import QtCore, QtWidgets

SIGNAL_POLL_MS = 200
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def end_on_signals(app: QtWidgets.QApplication, end: Callable[[str], None]) -> None:
    """Call `end` with the signal's name (SIGTERM, ...) when one of ENDING_SIGNALS arrives; `end` quits."""

    def on_signal(number: int, _frame: object) -> None:
        end(signal.Signals(number).name)

    for number in ENDING_SIGNALS:
        signal.signal(number, on_signal)
    timer = QtCore.QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(SIGNAL_POLL_MS)
