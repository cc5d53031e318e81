"""History: recorded sessions, their steps, and each step's screenshot with its target drawn on it.

Sessions (task, start time, outcome, steps taken) on the left, the chosen session's steps in the
middle, and on the right the step as the approval panel showed it: the badge, what actually ran
(the edited action, with the proposal when the user changed it), the decision, the result in
words, the timings, the note and thought, and the screenshot with the target drawn where it landed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from PIL import Image

from holodesk.app.common.session_words import (
    DECISIONS,
    SessionWords,
    StepWords,
    session_words,
    step_words,
    steps_in_words,
)
from holodesk.app.gui.approval_panel import STYLE as PANEL_STYLE
from holodesk.app.gui.overlay_drawing import MARKER
from holodesk.app.gui.qt import Qt, QtGui, QtWidgets
from holodesk.app.gui.save_routine_dialog import SaveRoutineDialog
from holodesk.automation.action_picture import annotate
from holodesk.automation.actions import action_from_dict
from holodesk.automation.errors import ActionError
from holodesk.automation.routines.compiler import CompileError, compile_session
from holodesk.automation.screen import frame_from_image
from holodesk.automation.trajectory import Session, iter_session_folders, read_session

WINDOW_SIZE = (1280, 760)  # on a screen with room for it; smaller screens get what fits
SCREEN_MARGIN = 16

OUTCOME_COLOURS = {
    "done": "#2fa862",
    "failed": "#e0626d",
    "stopped": "#c9a227",
    "asked you": "#c9a227",
    "step limit": "#c9a227",
}

STYLE = (
    PANEL_STYLE
    + f"""
#history {{ background: #1d1e27; }}
QListWidget {{ background: #23242f; color: #e6e6ee; border: 1px solid #44465a; font-size: 13px; padding: 0px 6px; }}
QListWidget::item {{ padding: 6px 0px; border-bottom: 1px solid #2f3040; }}
QListWidget::item:selected {{ background: #34365a; color: white; }}
#caption {{ color: #a4a6ba; font-size: 12px; font-weight: 600; }}
#decision {{ color: #c9cad8; font-size: 12px; }}
#proposed {{ color: #9fa1b5; font-size: 12px; }}
#result {{ color: #e6e6ee; }}
#timings {{ color: #9fa1b5; font-size: 12px; }}
#picture {{ background: #15161d; border: 1px solid #44465a; color: #9fa1b5; }}
QPlainTextEdit {{ font-family: monospace; font-size: 12px; }}
QSplitter::handle {{ background: #2f3040; }}
#badge {{ background: {MARKER.name()}; }}
"""
)


def step_picture(session: Session, step: dict[str, Any]) -> Image.Image | None:
    """The step's screenshot with the executed (or edited) target drawn where it landed."""
    shot = step.get("screenshot")
    if not shot:
        return None
    try:
        with Image.open(session.folder / shot) as image:
            region = step.get("region") or {}
            frame = frame_from_image(image, int(region.get("left", 0)), int(region.get("top", 0)))
    except OSError:
        return None
    record = step.get("edited_screen") or step.get("action_screen")
    if not record:
        return frame.to_image()
    try:
        action = action_from_dict(record)
    except ActionError:
        return frame.to_image()
    return annotate(frame, action, f"{step.get('index', '?')}: {action.describe()}")


def _pixmap(image: Image.Image) -> QtGui.QPixmap:
    rgb = image.convert("RGB")
    data = rgb.tobytes()
    qimage = QtGui.QImage(data, rgb.width, rgb.height, rgb.width * 3, QtGui.QImage.Format.Format_RGB888)
    return QtGui.QPixmap.fromImage(qimage.copy())  # copy: `data` is freed when this returns


def session_item_text(words: SessionWords) -> str:
    text = f"{words.task}\n{words.started} · {words.outcome} · {steps_in_words(words.steps_taken)}"
    if words.state not in ("done", "unfinished") and words.detail:
        detail = words.detail if len(words.detail) <= 90 else words.detail[:89] + "…"
        text += f"\n{detail}"  # why it ended, without opening it
    return text


def step_item_text(words: StepWords) -> str:
    if words.decision == DECISIONS["final"]:  # the answer that ends the run is not a step: no number
        return f"Finished: {words.ran.removeprefix('finish: ')}"
    ran = "nothing recorded (the run ended inside this step)" if words.ran == "-" else words.ran
    if words.decision in ("answered", "-"):  # "asked: ...": the question says it; no decision was made
        return f"{words.index}. {ran}"
    return f"{words.index}. {words.decision}: {ran}"


class HistoryWindow(QtWidgets.QWidget):
    """Sessions on the left, steps in the middle, the selected step on the right."""

    def __init__(self, root: Path, routines: Path | None = None) -> None:
        super().__init__()
        self.root = root
        self.routines = routines  # where "Save as routine" writes; None: no such button
        self.setObjectName("history")
        self.setWindowTitle("Holodesk history")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        self.setStyleSheet(STYLE)
        self.resize(*WINDOW_SIZE)
        self._placed = False
        self.sessions = self._list()
        self.steps = self._list()
        self.picture = QtWidgets.QLabel("Select a step to see its screenshot")
        self.picture.setObjectName("picture")
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(480, 270)
        self.picture.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored, QtWidgets.QSizePolicy.Policy.Ignored)
        self.details = QtWidgets.QPlainTextEdit()  # note, thought and the raw answer, copyable
        self.details.setReadOnly(True)
        self.details.setMaximumHeight(150)

        step_box = QtWidgets.QWidget()
        step_layout = QtWidgets.QVBoxLayout(step_box)
        step_layout.setContentsMargins(12, 4, 4, 4)
        step_layout.setSpacing(6)
        header = QtWidgets.QHBoxLayout()
        self.badge = self._label("badge")
        self.decision = self._label("decision")
        header.addWidget(self.badge)
        header.addWidget(self.decision, 1)
        step_layout.addLayout(header)
        self.ran = self._label("action", wrap=True)
        self.proposed = self._label("proposed", wrap=True)
        self.result = self._label("result", wrap=True)
        self.timings = self._label("timings")
        for widget in (self.ran, self.proposed, self.result, self.timings):
            step_layout.addWidget(widget)
        step_layout.addWidget(self.picture, 1)
        step_layout.addWidget(self.details)

        splitter = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        columns = []
        for caption, listing in (("SESSIONS", self.sessions), ("STEPS", self.steps)):
            column = QtWidgets.QWidget()
            column_layout = QtWidgets.QVBoxLayout(column)
            column_layout.setContentsMargins(4, 4, 4, 4)
            column_layout.addWidget(self._label("caption", caption))
            column_layout.addWidget(listing, 1)
            splitter.addWidget(column)
            columns.append(column_layout)
        self.save_routine = QtWidgets.QPushButton("Save as routine…")
        self.save_routine.setObjectName("edit")
        self.save_routine.setEnabled(False)
        self.save_routine.setVisible(routines is not None)
        self.save_routine.clicked.connect(self.open_save_dialog)
        self.routine_status = self._label("decision", wrap=True)
        columns[0].addWidget(self.save_routine)
        columns[0].addWidget(self.routine_status)
        splitter.addWidget(step_box)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 3)
        splitter.setStretchFactor(2, 6)
        splitter.setSizes([330, 330, 620])
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(splitter)

        self._session: Session | None = None
        self._image: Image.Image | None = None
        self._show_step(None)
        self.sessions.currentRowChanged.connect(self._session_selected)
        self.steps.currentRowChanged.connect(self._step_selected)
        self.refresh()

    def _list(self) -> QtWidgets.QListWidget:
        widget = QtWidgets.QListWidget()
        widget.setWordWrap(True)  # long tasks and actions wrap instead of being clipped
        widget.setTextElideMode(Qt.TextElideMode.ElideNone)
        widget.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        widget.setVerticalScrollMode(QtWidgets.QAbstractItemView.ScrollMode.ScrollPerPixel)
        widget.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)  # re-wrap items when the column resizes
        return widget

    def _label(self, name: str, text: str = "", wrap: bool = False) -> QtWidgets.QLabel:
        label = QtWidgets.QLabel(text)
        label.setObjectName(name)
        label.setWordWrap(wrap)
        label.setTextFormat(Qt.TextFormat.PlainText)  # recorded model text is shown as written
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return label

    def refresh(self) -> None:
        self.sessions.clear()
        self._folders = list(reversed(list(iter_session_folders(self.root))))  # newest first
        for folder in self._folders:
            words = session_words(read_session(folder))
            item = QtWidgets.QListWidgetItem(session_item_text(words))
            item.setToolTip(f"{words.task}\n{folder.name}\n{words.detail}".strip())
            colour = OUTCOME_COLOURS.get(words.state)  # a replay's outcome words start with more than the state
            if colour is not None:
                item.setForeground(QtGui.QColor("#e6e6ee"))
                item.setData(Qt.ItemDataRole.DecorationRole, _dot(colour))
            self.sessions.addItem(item)
        if not self._folders:
            self.sessions.addItem(f"No sessions yet under {self.root}")
            self.sessions.item(0).setFlags(Qt.ItemFlag.NoItemFlags)

    def _session_selected(self, row: int) -> None:
        self.steps.clear()
        self._session = read_session(self._folders[row]) if 0 <= row < len(self._folders) else None
        self._show_step(None)
        self.save_routine.setEnabled(self._session is not None)
        if self._session is None:
            return
        for step in self._session.steps:
            self.steps.addItem(step_item_text(step_words(step)))

    def open_save_dialog(self) -> SaveRoutineDialog | None:
        """Compile the selected session and open the save dialog (shown, not waited for); None if it cannot."""
        if self._session is None or self.routines is None:
            return None
        try:
            compiled = compile_session(self._session, routine_name_for(self._session.task))
        except (CompileError, ValueError) as exc:
            self.routine_status.setText(f"This session cannot be a routine: {exc}")
            return None
        dialog = SaveRoutineDialog(compiled, self.routines, self)
        dialog.accepted.connect(lambda: self.routine_status.setText(f"Saved the routine in {dialog.saved}"))
        dialog.open()
        return dialog

    def _step_selected(self, row: int) -> None:
        if self._session is None or not 0 <= row < len(self._session.steps):
            self._show_step(None)
            return
        self._show_step(self._session.steps[row])

    def _show_step(self, step: dict[str, Any] | None) -> None:
        for widget in (self.badge, self.decision, self.ran, self.proposed, self.result, self.timings):
            widget.setVisible(step is not None)
        if step is None:
            self._image = None
            self.picture.setText("Select a step to see its screenshot")
            self.details.clear()
            return
        words = step_words(step)
        self.badge.setText(f"Step {words.index}")
        self.decision.setText(words.decision)
        self.ran.setText(words.ran[:1].upper() + words.ran[1:])
        self.proposed.setText(f"The model proposed: {words.proposed}")
        self.proposed.setVisible(bool(words.proposed))
        result = words.result
        self.result.setText(result[:1].upper() + result[1:] if result.startswith("you") else f"Result: {result}")
        self.result.setVisible(bool(words.result))
        self.timings.setText(words.timings)
        self.timings.setVisible(bool(words.timings))
        assert self._session is not None
        self._image = step_picture(self._session, step)
        self._fit_picture()
        lines = []
        for key, caption in (("note", "note"), ("thought", "thought")):
            if step.get(key):
                lines.append(f"{caption}: {step[key]}")
        if step.get("raw_text"):
            lines.append(f"raw answer:\n{step['raw_text']}")
        self.details.setPlainText("\n".join(lines))
        self.details.setVisible(bool(lines))

    def _fit_picture(self) -> None:
        if self._image is None:
            self.picture.setPixmap(QtGui.QPixmap())
            self.picture.setText("No screenshot for this step")
            return
        self.picture.setPixmap(
            _pixmap(self._image).scaled(
                self.picture.size(), Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
            )
        )

    def showEvent(self, event: QtGui.QShowEvent) -> None:
        if not self._placed:  # the first time only: later the user's own size and place stay
            self._placed = True
            self.fit_on(QtGui.QGuiApplication.screenAt(QtGui.QCursor.pos()) or self.screen())
        super().showEvent(event)

    def fit_on(self, screen: QtGui.QScreen) -> None:
        """At most its natural size, never larger than the screen's free area, centred on it."""
        area = screen.availableGeometry()
        frame = self.frameGeometry().size() - self.size()  # the window manager's decoration
        width = min(WINDOW_SIZE[0], area.width() - frame.width() - 2 * SCREEN_MARGIN)
        height = min(WINDOW_SIZE[1], area.height() - frame.height() - 2 * SCREEN_MARGIN)
        self.resize(max(width, 320), max(height, 240))
        self.move(
            area.left() + (area.width() - self.width() - frame.width()) // 2,
            area.top() + (area.height() - self.height() - frame.height()) // 2,
        )

    def resizeEvent(self, event: QtGui.QResizeEvent) -> None:
        super().resizeEvent(event)
        if self._image is not None:
            self._fit_picture()


def routine_name_for(task: str) -> str:
    """A first name for a routine: the task's first five words, as a routine's name may hold them."""
    words = re.sub(r"[^A-Za-z0-9 _-]+", " ", task).split()[:5]
    name = " ".join(words)[:40].strip(" -_")
    return name if name and name[0].isalnum() else "routine"


def _dot(colour: str) -> QtGui.QPixmap:
    """A small filled circle in the outcome's colour, before the session's name."""
    pixmap = QtGui.QPixmap(12, 12)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QtGui.QPainter(pixmap)
    painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
    painter.setBrush(QtGui.QColor(colour))
    painter.setPen(Qt.PenStyle.NoPen)
    painter.drawEllipse(1, 1, 10, 10)
    painter.end()
    return pixmap
