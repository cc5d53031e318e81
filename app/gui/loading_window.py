"""The model-loading window: a progress bar with the stage and the percentage, until the model is ready.

Loading a 12B model takes tens of seconds; the tray tooltip alone was easy to miss. The window is
small, stays on top, never takes the keyboard, and goes away by itself when loading ends.
"""

from __future__ import annotations

from holodesk.app.gui.qt import FLOATING_NO_FOCUS, Qt, QtGui, QtWidgets

SCREEN_MARGIN = 24
WIDTH = 380

STYLE = """
#loading { background: #1d1e27; border: 1px solid #44465a; border-radius: 6px; }
QLabel { color: #e6e6ee; font-size: 13px; }
#title { color: white; font-size: 14px; font-weight: 600; }
#stage { color: #b9bbcc; font-size: 12px; }
QProgressBar { background: #2a2b37; border: 1px solid #4b4d63; border-radius: 4px; height: 16px;
               color: white; text-align: center; font-size: 11px; }
QProgressBar::chunk { background: #5a5cf0; border-radius: 3px; }
"""


class LoadingWindow(QtWidgets.QWidget):
    """Shows what the model load is doing. Use on the GUI thread."""

    def __init__(self) -> None:
        super().__init__(None, FLOATING_NO_FOCUS)
        self.setObjectName("loading")
        self.setWindowTitle("Holodesk: loading the model")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        self.setStyleSheet(STYLE)
        self.setFixedWidth(WIDTH)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(14, 10, 14, 12)
        layout.setSpacing(6)
        self.title = QtWidgets.QLabel("Loading the model", self)
        self.title.setObjectName("title")
        self.bar = QtWidgets.QProgressBar(self)
        self.bar.setRange(0, 1000)
        self.bar.setFormat("%p%")
        self.stage = QtWidgets.QLabel(self)
        self.stage.setObjectName("stage")
        self.stage.setTextFormat(Qt.TextFormat.PlainText)
        self.stage.setWordWrap(True)
        for widget in (self.title, self.bar, self.stage):
            layout.addWidget(widget)

    def show_progress(self, fraction: float, stage: str, title: str = "Loading the model") -> None:
        self.title.setText(title)
        self.setWindowTitle(f"Holodesk: {title[:1].lower()}{title[1:]}")
        self.bar.setValue(round(min(max(fraction, 0.0), 1.0) * 1000))
        self.stage.setText(stage)
        self.adjustSize()
        if not self.isVisible():
            screen = QtGui.QGuiApplication.primaryScreen().availableGeometry()
            self.move(screen.right() - SCREEN_MARGIN - self.width(), screen.bottom() - SCREEN_MARGIN - self.height())
            self.show()

    def percent(self) -> int:
        return round(self.bar.value() / 10)
