"""Shows a balloon the moment the tray indicator exists, as the app's start does, then prints where it went.

Run by tests/app/gui/test_tray.py under Xvfb with trayer: prints "icon x y w h" (the tray icon's place)
and "balloon x y w h" (Qt's own balloon, drawn where no notification daemon runs), or "balloon none".
"""

from __future__ import annotations

import sys

from holodesk.app.gui.app_state import AppState
from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.app.gui.tray import TrayIndicator


def icon_for(state: AppState) -> QtGui.QIcon:
    pixmap = QtGui.QPixmap(22, 22)
    pixmap.fill(QtGui.QColor("#3070c0") if state is not AppState.ERROR else QtGui.QColor("#c03030"))
    return QtGui.QIcon(pixmap)


def main() -> None:
    app = QtWidgets.QApplication(sys.argv)
    indicator = TrayIndicator(icon_for)
    indicator.notify("Holodesk is running", "Open a task from the tray icon.")  # before the tray embedded it

    def report() -> None:
        icon = indicator.tray.geometry()
        print(f"icon {icon.x()} {icon.y()} {icon.width()} {icon.height()}", flush=True)
        tips = [w for w in app.topLevelWidgets() if w.metaObject().className() == "QBalloonTip" and w.isVisible()]
        if not tips:
            print("balloon none", flush=True)
        for tip in tips:
            where = tip.frameGeometry()
            print(f"balloon {where.x()} {where.y()} {where.width()} {where.height()}", flush=True)
        app.quit()

    QtCore.QTimer.singleShot(2000, report)
    app.exec()


if __name__ == "__main__":
    main()
