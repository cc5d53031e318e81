"""The task prompt: a small frameless input near the cursor, with the recent tasks below it.

Enter submits, Esc (or clicking elsewhere) closes; Up/Down pick a recent task. It opens below the
point it was asked near (the cursor, or the tray icon that was clicked), or above it when there is
no room below, and never covers that point: the tray stays visible and clickable.
"""

from __future__ import annotations

from holodesk.app.gui.qt import Qt, QtCore, QtGui, QtWidgets, Signal
from holodesk.app.gui.recent_tasks import RecentTasks

WIDTH = 520
GAP = 16  # between the point the prompt opens near and the prompt


class TaskPrompt(QtWidgets.QWidget):
    """Signals: submitted(str), the task; shown_changed(bool), whether the prompt is on screen."""

    submitted = Signal(str)
    shown_changed = Signal(bool)

    def __init__(self, recent: RecentTasks) -> None:
        super().__init__(
            None, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint | Qt.WindowType.WindowStaysOnTopHint
        )
        self.recent = recent
        self.setObjectName("TaskPrompt")
        self.setWindowTitle("Holodesk: new task")
        self.setFixedWidth(WIDTH)
        self.setStyleSheet(
            "#TaskPrompt { background: #1f2430; border: 1px solid #4c566a; border-radius: 8px; }"
            "QLineEdit { font-size: 15px; padding: 8px; color: #eceff4; background: #2e3440;"
            " border: 1px solid #5e81ac; border-radius: 6px; }"
            "QListWidget { color: #d8dee9; background: #1f2430; border: none; font-size: 13px; }"
            "QListWidget::item:selected { background: #3b4252; }"
            "#title { color: #eceff4; font-size: 14px; font-weight: 600; }"
            "#hint { color: #b8c0cf; font-size: 12px; }"
        )
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.setSpacing(6)
        self.title = QtWidgets.QLabel("What should Holodesk do?")
        self.title.setObjectName("title")
        self.hint = QtWidgets.QLabel("Enter starts · Esc closes")
        self.hint.setObjectName("hint")
        header = QtWidgets.QHBoxLayout()
        header.addWidget(self.title, 1)
        header.addWidget(self.hint)
        self.field = QtWidgets.QLineEdit()
        self.field.setPlaceholderText("e.g. archive every unread newsletter in my mail")
        self.suggestions = QtWidgets.QListWidget()
        self.suggestions.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.suggestions.setMaximumHeight(140)
        layout.addLayout(header)
        layout.addWidget(self.field)
        layout.addWidget(self.suggestions)
        self.field.textEdited.connect(self._refresh)
        self.field.returnPressed.connect(self._submit)
        self.field.installEventFilter(self)
        self.suggestions.itemClicked.connect(lambda item: self._choose(item.text()))

    def open_near(self, point: QtCore.QPoint | None = None) -> None:
        """Show near `point` (default: the mouse cursor), kept inside that screen."""
        point = point if point is not None else QtGui.QCursor.pos()
        self.field.clear()
        self._refresh("")
        self.adjustSize()
        screen = QtGui.QGuiApplication.screenAt(point) or QtGui.QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        x = min(max(point.x() - WIDTH // 2, area.left()), area.right() - self.width())
        below = point.y() + GAP
        if below + self.height() <= area.bottom():
            y = max(below, area.top())
        else:  # no room below (a tray at the bottom of the screen): above the point, not over it
            y = max(point.y() - GAP - self.height(), area.top())
        self.move(x, y)
        self.show()
        self.raise_()
        self.activateWindow()
        self.field.setFocus()

    def showEvent(self, event: QtGui.QShowEvent) -> None:
        super().showEvent(event)
        self.shown_changed.emit(True)

    def hideEvent(self, event: QtGui.QHideEvent) -> None:
        super().hideEvent(event)
        self.shown_changed.emit(False)

    def _refresh(self, text: str) -> None:
        self.suggestions.clear()
        self.suggestions.addItems(self.recent.matching(text)[:8])
        self.suggestions.setVisible(self.suggestions.count() > 0)

    def _choose(self, task: str) -> None:
        self.field.setText(task)
        self._submit()

    def _submit(self) -> None:
        task = self.field.text().strip()
        if not task:
            return
        self.recent.add(task)
        self.hide()
        self.submitted.emit(task)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if watched is self.field and event.type() == QtCore.QEvent.Type.KeyPress and isinstance(event, QtGui.QKeyEvent):
            key = event.key()
            if key == Qt.Key.Key_Escape:
                self.hide()
                return True
            if key in (Qt.Key.Key_Down, Qt.Key.Key_Up) and self.suggestions.count():
                row = self.suggestions.currentRow()
                row = row + 1 if key == Qt.Key.Key_Down else row - 1
                row = max(0, min(row, self.suggestions.count() - 1))
                self.suggestions.setCurrentRow(row)
                self.field.setText(self.suggestions.item(row).text())
                return True
        return super().eventFilter(watched, event)
