"""A real Qt window that logs every input event it receives, run as its own process under Xvfb.

Usage: python bench/rigs/target_window.py --left X --top Y
It writes JSON lines to stdout: first {"event": "ready", ...} with the exact global geometry of the
window and of each widget, then one line per event (global physical pixels):
  press / release / double_click   button, x, y, widget
  move                             x, y, buttons (only while a button is held, to keep the log short)
  wheel                            direction, delta_x, delta_y, x, y, widget
  key_press / key_release          key (Qt key name), text, modifiers
  text                             the text field's full content after each change
  clicked                          a push button's clicked signal
  drag                             start, end, moves (on the pad, press to release after motion)
  sync                             id: the echo of a sync request (see below)
Sync: an X ClientMessage of type HOLODESK_SYNC sent to the window is echoed as {"event": "sync"}
*after* every X event that arrived before it has been delivered, so a test knows the log is complete.
Commands on stdin: "reset" clears the text field and answers {"event": "reset"}; "read_only" makes the
field read-only and unable to take the keyboard focus (typed keys change nothing in it; it looks as
before) and answers {"event": "read_only"}; "quit" exits.
The window is frameless and placed at an exact position; with no window manager nothing moves it.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import threading
from typing import Any

from PySide6.QtCore import QAbstractNativeEventFilter, QByteArray, QEvent, QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QMouseEvent, QPalette, QWheelEvent, QWindow
from PySide6.QtWidgets import QApplication, QLineEdit, QPushButton, QWidget

WINDOW_SIZE = (900, 540)
PAD_COLOUR = (0, 170, 85)
BACKGROUND_COLOUR = (236, 236, 236)
# Window-local geometry of each named widget: (x, y, width, height).
LAYOUT = {
    "pad": (20, 20, 500, 300),
    "ok": (560, 20, 150, 40),
    "cancel": (560, 80, 150, 40),
    "field": (560, 160, 300, 36),
}
SYNC_ATOM = "HOLODESK_SYNC"
DOUBLE_CLICK_MS = 200
_XCB_CLIENT_MESSAGE = 33

_BUTTONS = {
    Qt.MouseButton.LeftButton: "left",
    Qt.MouseButton.RightButton: "right",
    Qt.MouseButton.MiddleButton: "middle",
}
_MODIFIERS = {
    Qt.KeyboardModifier.ShiftModifier: "shift",
    Qt.KeyboardModifier.ControlModifier: "ctrl",
    Qt.KeyboardModifier.AltModifier: "alt",
    Qt.KeyboardModifier.MetaModifier: "super",
}


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def key_name(key: int) -> str:
    for member in Qt.Key:
        if member.value == key:
            return member.name.removeprefix("Key_")
    return str(key)


class Pad(QWidget):
    """The solid-colour area; reports drags (press, motion with the button held, release)."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("pad")
        self.setAutoFillBackground(True)
        palette = self.palette()
        palette.setColor(QPalette.ColorRole.Window, QColor(*PAD_COLOUR))
        self.setPalette(palette)
        self._start: QPoint | None = None
        self._moves = 0

    def mousePressEvent(self, event: QMouseEvent) -> None:
        self._start = event.globalPosition().toPoint()
        self._moves = 0

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._start is not None:
            self._moves += 1

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._start is not None and self._moves:
            end = event.globalPosition().toPoint()
            emit(
                {
                    "event": "drag",
                    "start": [self._start.x(), self._start.y()],
                    "end": [end.x(), end.y()],
                    "moves": self._moves,
                }
            )
        self._start = None


class EventLogger(QObject):
    """Logs input at the QWindow, where each platform event arrives exactly once."""

    def __init__(self, window: QWidget) -> None:
        super().__init__()
        self.window = window

    def _widget_at(self, x: int, y: int) -> str:
        widget = QApplication.widgetAt(QPoint(x, y))
        while widget is not None and not widget.objectName():
            widget = widget.parentWidget()
        return widget.objectName() if widget is not None else ""

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if not isinstance(watched, QWindow):
            return False
        kind = event.type()
        if kind in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease, QEvent.Type.MouseButtonDblClick):
            assert isinstance(event, QMouseEvent)
            point = event.globalPosition().toPoint()
            name = {
                QEvent.Type.MouseButtonPress: "press",
                QEvent.Type.MouseButtonRelease: "release",
                QEvent.Type.MouseButtonDblClick: "double_click",
            }[kind]
            emit(
                {
                    "event": name,
                    "button": _BUTTONS.get(event.button(), str(event.button())),
                    "x": point.x(),
                    "y": point.y(),
                    "widget": self._widget_at(point.x(), point.y()),
                }
            )
        elif kind == QEvent.Type.MouseMove:
            assert isinstance(event, QMouseEvent)
            if event.buttons() != Qt.MouseButton.NoButton:
                point = event.globalPosition().toPoint()
                emit({"event": "move", "x": point.x(), "y": point.y()})
        elif kind == QEvent.Type.Wheel:
            assert isinstance(event, QWheelEvent)
            delta = event.angleDelta()
            point = event.globalPosition().toPoint()
            if delta.y() > 0:
                direction = "up"
            elif delta.y() < 0:
                direction = "down"
            elif delta.x() > 0:
                direction = "left"  # Qt: positive x means the wheel turned towards the left
            else:
                direction = "right"
            emit(
                {
                    "event": "wheel",
                    "direction": direction,
                    "delta_x": delta.x(),
                    "delta_y": delta.y(),
                    "x": point.x(),
                    "y": point.y(),
                    "widget": self._widget_at(point.x(), point.y()),
                }
            )
        elif kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
            modifiers = event.modifiers()  # type: ignore[attr-defined]
            emit(
                {
                    "event": "key_press" if kind == QEvent.Type.KeyPress else "key_release",
                    "key": key_name(event.key()),  # type: ignore[attr-defined]
                    "text": event.text(),  # type: ignore[attr-defined]
                    "modifiers": sorted(name for flag, name in _MODIFIERS.items() if modifiers & flag),
                }
            )
        return False


class SyncFilter(QAbstractNativeEventFilter):
    """Echoes HOLODESK_SYNC client messages once the events queued before them are delivered."""

    def __init__(self, sync_atom: int) -> None:
        super().__init__()
        self.sync_atom = sync_atom

    def nativeEventFilter(self, event_type: QByteArray | bytes, message: int) -> tuple[bool, int]:
        if bytes(event_type) != b"xcb_generic_event_t":
            return False, 0
        raw = ctypes.string_at(int(message), 32)
        if raw[0] & 0x7F != _XCB_CLIENT_MESSAGE:
            return False, 0
        # xcb_client_message_event_t: type (atom) at byte 8, data.data32[0] at byte 12.
        atom = int.from_bytes(raw[8:12], sys.byteorder)
        if atom != self.sync_atom:
            return False, 0
        sync_id = int.from_bytes(raw[12:16], sys.byteorder)
        # Qt delivers input from the same batch of X events after the native filters have run;
        # a zero timer fires on the next loop iteration, after that delivery.
        QTimer.singleShot(0, lambda: emit({"event": "sync", "id": sync_id}))
        return True, 0


class StdinCommands(QObject):
    command = Signal(str)

    def start(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self.command.emit(line.strip())
        self.command.emit("quit")


def intern_atom(name: str) -> int:
    from Xlib import display as xdisplay

    connection = xdisplay.Display()
    try:
        return int(connection.intern_atom(name))
    finally:
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--left", type=int, required=True)
    parser.add_argument("--top", type=int, required=True)
    args = parser.parse_args()

    app = QApplication([sys.argv[0], "-platform", "xcb"])
    # Shorter than Qt's 400 ms so tests wait less between clicks that must not pair up; a real
    # double click (two clicks within milliseconds) is still one.
    app.styleHints().setMouseDoubleClickInterval(DOUBLE_CLICK_MS)
    window = QWidget(None, Qt.WindowType.FramelessWindowHint)
    window.setObjectName("window")
    window.setWindowTitle("Holodesk test target")
    window.setAutoFillBackground(True)
    palette = window.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor(*BACKGROUND_COLOUR))
    window.setPalette(palette)
    window.setGeometry(args.left, args.top, *WINDOW_SIZE)

    widgets: dict[str, QWidget] = {"pad": Pad(window)}
    for name, label in (("ok", "OK"), ("cancel", "Cancel")):
        button = QPushButton(label, window)
        button.setObjectName(name)
        button.clicked.connect(lambda _checked=False, name=name: emit({"event": "clicked", "widget": name}))
        widgets[name] = button
    field = QLineEdit(window)
    field.setObjectName("field")
    field.textChanged.connect(lambda text: emit({"event": "text", "text": text}))
    widgets["field"] = field
    for name, widget in widgets.items():
        widget.setGeometry(*LAYOUT[name])

    logger = EventLogger(window)
    app.installEventFilter(logger)
    sync_filter = SyncFilter(intern_atom(SYNC_ATOM))
    app.installNativeEventFilter(sync_filter)

    def on_command(command: str) -> None:
        if command == "reset":
            field.blockSignals(True)
            field.clear()
            field.blockSignals(False)
            emit({"event": "reset"})
        elif command == "read_only":
            # Keys then go on to whatever kept the focus: a typing step really has no effect in the field.
            field.setReadOnly(True)
            field.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            emit({"event": "read_only"})
        elif command == "quit":
            app.quit()

    commands = StdinCommands()
    commands.command.connect(on_command)
    commands.start()

    window.show()
    window.raise_()
    window.activateWindow()

    def report_when_exposed() -> None:
        handle = window.windowHandle()
        if handle is None or not handle.isExposed():
            QTimer.singleShot(10, report_when_exposed)
            return
        geometry = {
            name: [*(lambda p: (p.x(), p.y()))(w.mapToGlobal(QPoint(0, 0))), w.width(), w.height()]
            for name, w in widgets.items()
        }
        emit(
            {
                "event": "ready",
                "window": [window.x(), window.y(), window.width(), window.height()],
                "widgets": geometry,
                "window_id": int(window.winId()),
                "device_pixel_ratio": window.devicePixelRatioF(),
                "double_click_ms": app.styleHints().mouseDoubleClickInterval(),
                "pad_colour": list(PAD_COLOUR),
                "background_colour": list(BACKGROUND_COLOUR),
            }
        )

    QTimer.singleShot(0, report_when_exposed)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
