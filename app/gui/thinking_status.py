"""A small status near the panel's place while the model thinks: the step, elapsed seconds, Stop.

It never takes the keyboard (the user keeps working in their application) and never appears in a
screenshot the model sees: app/gui/own_windows_capture.py hides it through `hide_for_capture`, on the
GUI thread and confirmed by the window system, before every grab.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from holodesk.app.gui.capture_hiding import HiddenWindows, hide_windows
from holodesk.app.gui.gui_thread import GuiThreadCaller
from holodesk.app.gui.qt import FLOATING_NO_FOCUS, Qt, QtCore, QtGui, QtWidgets, Signal

SCREEN_MARGIN = 24
TICK_MS = 200

STYLE = """
#thinking { background: #1d1e27; border: 1px solid #44465a; border-radius: 6px; }
QLabel { color: #e6e6ee; font-size: 13px; }
#spinner { color: #8d90ff; font-size: 15px; }
QPushButton { background: #2d2e3c; color: #ffc9c9; border: 1px solid #a5404a; border-radius: 5px;
              padding: 3px 10px; font-size: 12px; }
QPushButton:hover { background: #5b1f24; }
"""
SPINNER = "◐◓◑◒"


class ThinkingStatus(QtWidgets.QWidget):
    """Shows "Step N · the model is thinking · 4 s" with a Stop button. Use on the GUI thread.

    Signals:
      stop_requested(): the user pressed Stop.
    """

    stop_requested = Signal()

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(None, FLOATING_NO_FOCUS)
        self.setObjectName("thinking")
        self.setWindowTitle("Holodesk: thinking")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setStyleSheet(STYLE)
        self._clock = clock
        self._since = 0.0
        self._step = 0
        self._words = ""
        self._ticks = 0
        self._showing = False  # read from the engine thread: a plain bool is atomic enough
        self._gui = GuiThreadCaller(self)
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(12, 7, 8, 7)
        layout.setSpacing(10)
        self._spinner = QtWidgets.QLabel(SPINNER[0], self)
        self._spinner.setObjectName("spinner")
        self._label = QtWidgets.QLabel(self)
        self._label.setObjectName("label")
        self._label.setTextFormat(Qt.TextFormat.PlainText)
        self._stop = QtWidgets.QPushButton("Stop", self)
        self._stop.setObjectName("stop")
        self._stop.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self._stop.clicked.connect(self.stop_requested)
        layout.addWidget(self._spinner)
        layout.addWidget(self._label, 1)
        layout.addWidget(self._stop)
        self._timer = QtCore.QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)

    @property
    def showing(self) -> bool:
        return self._showing

    @property
    def text(self) -> str:
        return self._label.text()

    def show_state(self, step: int, words: str = "the model is thinking") -> None:
        """Show (or keep showing) the status for `step`; the clock restarts when the step or words change."""
        if not self._showing or (step, words) != (self._step, self._words):
            self._since = self._clock()
            self._step, self._words = step, words
        self._showing = True
        self._render()
        self.show()  # shown (and styled) first: the style sheet's paddings count in its size
        layout = self.layout()
        if layout is not None:
            layout.activate()
        self.resize(self.sizeHint())
        self._place()
        self.raise_()
        self._timer.start()

    def hide_status(self) -> HiddenWindows:
        """Hide the status; unmapped by the window system before this returns (a screenshot may follow)."""
        self._showing = False
        self._timer.stop()
        return hide_windows([self])

    def _tick(self) -> None:
        self._ticks += 1
        self._spinner.setText(SPINNER[self._ticks % len(SPINNER)])
        self._render()

    def _render(self) -> None:
        elapsed = int(self._clock() - self._since)
        step = f"Step {self._step} · " if self._step else ""
        self._label.setText(f"{step}{self._words} · {elapsed} s")
        self._label.setMinimumWidth(self._label.fontMetrics().horizontalAdvance(f"{step}{self._words} · 000 s"))

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._showing:
            self._place()  # keep the right and bottom margins when the text grows

    def _place(self) -> None:
        """Bottom right of the screen under the pointer: where the panel shows for most targets."""
        screen = QtGui.QGuiApplication.screenAt(QtGui.QCursor.pos()) or QtGui.QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        self.move(area.right() - SCREEN_MARGIN - self.width(), area.bottom() - SCREEN_MARGIN - self.height())

    # -- any thread --

    def hide_for_capture(self, timeout_s: float = 2.0) -> HiddenWindows:
        """Hide the status before a screenshot; call from the engine (or any) thread."""
        if not self._showing:
            return HiddenWindows()
        return self._gui.call(self.hide_status, timeout_s)
