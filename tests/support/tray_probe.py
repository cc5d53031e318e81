"""Runs the tray indicator (or its control-window stand-in) in its own Qt process for the tray tests.

Prints "kind tray|window" and the clickable geometry ("geometry x y w h" of the tray icon, or
"button x y" for the control window's New task button), then one line per command signal. Reads
"state NAME [detail]" on stdin to change the shown state and answers with "tooltip <text>"; "where"
prints the New task button's place inside the control window ("local x y"); "own" prints the
indicator's own regions ("own x y w h ...", screen pixels).
"""

from __future__ import annotations

import sys
import threading

from holodesk.app.gui.app_state import AppState, StatusLine
from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.app.gui.tray import ControlWindow, make_indicator

COLOURS = {state: QtGui.QColor.fromHsv(i * 45, 200, 230) for i, state in enumerate(AppState)}


def icon_for(state: AppState) -> QtGui.QIcon:
    pixmap = QtGui.QPixmap(22, 22)
    pixmap.fill(COLOURS[state])
    return QtGui.QIcon(pixmap)


class Commands(QtCore.QObject):
    line = QtCore.Signal(str)


def main() -> None:
    app = QtWidgets.QApplication(sys.argv)
    indicator = make_indicator(icon_for)
    for name in ("new_task", "stop", "pause_toggled", "show_history", "show_settings", "quit"):
        getattr(indicator, name).connect(lambda name=name: print(name, flush=True))
    indicator.quit.connect(app.quit)

    def announce() -> None:
        if isinstance(indicator, ControlWindow):
            button = indicator.buttons["new_task"]
            centre = button.mapToGlobal(button.rect().center())
            print("kind window", flush=True)
            print(f"button {centre.x()} {centre.y()}", flush=True)
        else:
            rect = indicator.tray.geometry()
            print("kind tray", flush=True)
            print(f"geometry {rect.x()} {rect.y()} {rect.width()} {rect.height()}", flush=True)

    def on_line(line: str) -> None:
        command, _, rest = line.strip().partition(" ")
        if command == "state":
            name, _, detail = rest.partition(" ")
            indicator.show_status(StatusLine(AppState(name), detail))
            tooltip = indicator.tray.toolTip() if hasattr(indicator, "tray") else indicator.window.toolTip()
            print("tooltip " + tooltip.replace("\n", " | "), flush=True)
        elif command == "where" and isinstance(indicator, ControlWindow):
            # Under a window manager Qt may not know where the window ended up: the button's place
            # inside the window, for a test that reads the window's position from the X server.
            button = indicator.buttons["new_task"]
            local = button.mapTo(indicator.window, button.rect().center())
            print(f"local {local.x()} {local.y()}", flush=True)
        elif command == "own":  # where the indicator says it shows without a window a grab can hide
            regions = indicator.own_regions()
            print("own " + " ".join(f"{r.left} {r.top} {r.width} {r.height}" for r in regions), flush=True)
        elif command == "menu":
            shown = [a.text() for a in indicator.menu.actions() if a.text() and a.isVisible()]
            print("menu " + ",".join(shown), flush=True)

    commands = Commands()
    commands.line.connect(on_line)
    threading.Thread(target=lambda: [commands.line.emit(line) for line in sys.stdin], daemon=True).start()
    QtCore.QTimer.singleShot(800, announce)  # give the tray host time to embed the icon
    app.exec()


if __name__ == "__main__":
    main()
