"""A native Wayland Qt window that logs the input it receives, for the headless GNOME tests.

Usage: QT_QPA_PLATFORM=wayland python tests/support/wayland_target.py
A Wayland client cannot place itself or learn its global position, so the window goes full screen
on the only monitor: window coordinates are then screen coordinates. It writes JSON lines:
  ready   once the window has been shown full screen: size, and each widget's rectangle
  press, release, double_click   button, x, y (window = screen coordinates), widget
  wheel   direction, x, y, notches (how many the event carries), widget
  drag    start [x, y], end [x, y]: a press, moves with the button held, a release
  text    the text field's full content after each change
  enter   Enter pressed in the text field, with its content then
  key     each key press the window was given: its text, whether Shift was down, its scan code
  key_up  each key release: the scan code
  focus   the widget that took the keyboard focus on a "focus" command
  stalled the window stops handling events now, for a "stall" command's seconds
  cleared the text field was emptied by the "clear" command (no key was sent)
  caret   the text field's caret blinks (blinking: true) or not, after a "caret" command
Commands on stdin: "quit"; "clear" (empty the text field, as a test's reset); "focus pad" (the pad,
which pastes nothing, takes the keyboard focus; "focus field" gives it back); "stall SECONDS" (the
event loop sleeps, as a busy program's does: input sent meanwhile is handled afterwards, in order);
"caret steady" (the caret stops blinking: the window then sends the desktop no picture of its own
accord, so each new one shows the input's effect; "caret blinking" restores it).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QKeyEvent, QMouseEvent, QPalette, QWheelEvent
from PySide6.QtWidgets import QApplication, QLineEdit, QWidget

# A colour nothing else on the desktop has, so a capture test can find the pad.
PAD_COLOUR = (255, 0, 170)
BACKGROUND_COLOUR = (30, 200, 60)
LAYOUT = {"pad": (100, 100, 400, 250), "field": (100, 420, 500, 40)}


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class PointerLogger(QObject):
    """Logs every mouse press, release, double click and wheel notch at the QWindow, where each
    platform event arrives exactly once (as the X11 target window does), in window coordinates, and a
    press-move-release as a drag."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window
        self._drag_start: tuple[int, int] | None = None
        self._moves = 0

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in _MOUSE_EVENTS and isinstance(event, QMouseEvent):
            local = event.position().toPoint()
            emit({"event": _MOUSE_EVENTS[kind], "button": event.button().name, "x": local.x(), "y": local.y(),
                  "widget": self._widget_at(local)})  # fmt: skip
            if kind == QEvent.Type.MouseButtonPress:
                self._drag_start, self._moves = (local.x(), local.y()), 0
            elif kind == QEvent.Type.MouseButtonRelease:
                if self._drag_start is not None and self._moves:
                    emit({"event": "drag", "start": list(self._drag_start), "end": [local.x(), local.y()]})
                self._drag_start = None
        elif kind == QEvent.Type.MouseMove and self._drag_start is not None:
            self._moves += 1
        elif kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease) and isinstance(event, QKeyEvent):
            if event.isAutoRepeat():
                return False
            if kind == QEvent.Type.KeyRelease:
                emit({"event": "key_up", "code": event.nativeScanCode()})
            else:  # what the program was told, for a failure report: the text, and whether Shift was down
                shift = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
                emit({"event": "key", "text": event.text(), "shift": shift, "code": event.nativeScanCode()})
        elif kind == QEvent.Type.Wheel and isinstance(event, QWheelEvent):
            local = event.position().toPoint()
            delta = event.angleDelta()
            vertical = "up" if delta.y() > 0 else "down"
            horizontal = "left" if delta.x() > 0 else "right"  # Qt: positive x is towards the left
            # One event may carry several notches (the desktop handed them over in one frame): each
            # notch is 120 (QWheelEvent's eighths of a degree).
            notches = abs(delta.y() or delta.x()) / 120
            emit({"event": "wheel", "direction": vertical if delta.y() else horizontal, "x": local.x(),
                  "y": local.y(), "notches": notches, "widget": self._widget_at(local)})  # fmt: skip
        return False

    def _widget_at(self, local: QPoint) -> str:
        child = self._window.childAt(local)
        return child.objectName() if child is not None and child.objectName() else "window"


_MOUSE_EVENTS = {
    QEvent.Type.MouseButtonPress: "press",
    QEvent.Type.MouseButtonRelease: "release",
    QEvent.Type.MouseButtonDblClick: "double_click",
}


class StdinReader(QObject):
    line = Signal(str)

    def start(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in sys.stdin:
            self.line.emit(raw.strip())
        self.line.emit("quit")


def solid(widget: QWidget, colour: tuple[int, int, int]) -> None:
    palette = widget.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor(*colour))
    widget.setPalette(palette)
    widget.setAutoFillBackground(True)


def main() -> int:
    app = QApplication(sys.argv)
    window = QWidget()
    window.setObjectName("window")
    window.setWindowTitle("holodesk wayland target")
    solid(window, BACKGROUND_COLOUR)
    pad = QWidget(window)
    pad.setObjectName("pad")
    pad.setGeometry(*LAYOUT["pad"])
    solid(pad, PAD_COLOUR)
    field = QLineEdit(window)
    field.setObjectName("field")
    field.setGeometry(*LAYOUT["field"])
    field.textChanged.connect(lambda text: emit({"event": "text", "text": text}))
    field.returnPressed.connect(lambda: emit({"event": "enter", "text": field.text()}))
    logger = PointerLogger(window)
    reader = StdinReader()
    widgets: dict[str, QWidget] = {"pad": pad, "field": field}
    blink_ms = app.cursorFlashTime()

    def run(command: str) -> None:
        name, _, argument = command.partition(" ")
        if name == "quit":
            app.quit()
        elif name == "clear":
            field.clear()
            emit({"event": "cleared"})
        elif name == "focus" and argument in widgets:
            widgets[argument].setFocus(Qt.FocusReason.OtherFocusReason)
            emit({"event": "focus", "widget": argument})
        elif name == "caret":
            app.setCursorFlashTime(0 if argument == "steady" else blink_ms)
            if field.hasFocus():  # the field reads the flash time when it takes the focus
                field.clearFocus()
                field.setFocus(Qt.FocusReason.OtherFocusReason)
            emit({"event": "caret", "blinking": argument != "steady"})
        elif name == "stall":
            emit({"event": "stalled", "seconds": float(argument)})
            time.sleep(float(argument))

    reader.line.connect(run)
    reader.start()
    window.setWindowFlag(Qt.WindowType.FramelessWindowHint)
    window.showFullScreen()
    handle = window.windowHandle()
    assert handle is not None
    handle.installEventFilter(logger)

    def report_when_shown() -> None:
        handle = window.windowHandle()
        if not window.isFullScreen() or handle is None or not handle.isExposed():
            QTimer.singleShot(50, report_when_shown)
            return
        emit(
            {
                "event": "ready",
                "platform": app.platformName(),
                "width": window.width(),
                "height": window.height(),
                "layout": LAYOUT,
            }
        )

    QTimer.singleShot(0, report_when_shown)
    return app.exec()


if __name__ == "__main__":
    raise SystemExit(main())
