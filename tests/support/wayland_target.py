"""A native Wayland Qt window that logs the input it receives, for the headless GNOME tests.

Usage: QT_QPA_PLATFORM=wayland python tests/support/wayland_target.py
A Wayland client cannot place itself or learn its global position, so the window goes full screen
on the only monitor: window coordinates are then screen coordinates. It writes JSON lines:
  ready   once the window has been shown full screen: size, and each widget's rectangle
  press   button, x, y (window = screen coordinates), widget
  text    the text field's full content after each change
  enter   Enter pressed in the text field, with its content then
Commands on stdin: "quit".
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPalette
from PySide6.QtWidgets import QApplication, QLineEdit, QWidget

# A colour nothing else on the desktop has, so a capture test can find the pad.
PAD_COLOUR = (255, 0, 170)
BACKGROUND_COLOUR = (30, 200, 60)
LAYOUT = {"pad": (100, 100, 400, 250), "field": (100, 420, 500, 40)}


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class PressLogger(QObject):
    """Logs every mouse press on the window or its children, in window coordinates."""

    def __init__(self, window: QWidget) -> None:
        super().__init__(window)
        self._window = window

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.MouseButtonPress and isinstance(event, QMouseEvent):
            point = event.scenePosition() if watched is self._window else None
            widget = watched if isinstance(watched, QWidget) else self._window
            local = widget.mapTo(self._window, event.position().toPoint()) if point is None else point.toPoint()
            if watched is self._window and self._window.childAt(local) is not None:
                return False  # a child's press that bubbled up: the child already logged it
            emit(
                {
                    "event": "press",
                    "button": event.button().name,
                    "x": local.x(),
                    "y": local.y(),
                    "widget": widget.objectName() or "window",
                }
            )
        return False


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
    logger = PressLogger(window)
    for widget in (window, pad, field):
        widget.installEventFilter(logger)
    reader = StdinReader()
    reader.line.connect(lambda command: app.quit() if command == "quit" else None)
    reader.start()
    window.setWindowFlag(Qt.WindowType.FramelessWindowHint)
    window.showFullScreen()

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
