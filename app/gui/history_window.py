"""History: recorded sessions, their steps, and each step's screenshot with its target drawn on it."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from holodesk.app.gui.qt import Qt, QtGui, QtWidgets
from holodesk.automation.actions import action_from_dict
from holodesk.automation.annotate import annotate
from holodesk.automation.errors import ActionError
from holodesk.automation.screen import frame_from_image
from holodesk.automation.trajectory import Session, iter_session_folders, read_session


def step_picture(session: Session, step: dict) -> Image.Image | None:
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


class HistoryWindow(QtWidgets.QWidget):
    """Sessions on the left, steps in the middle, the selected step's picture and raw answer on the right."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.setWindowTitle("Holodesk history")
        self.resize(1200, 700)
        self.sessions = QtWidgets.QListWidget()
        self.steps = QtWidgets.QListWidget()
        self.picture = QtWidgets.QLabel("Select a step")
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(480, 300)
        self.details = QtWidgets.QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setMaximumHeight(160)
        right = QtWidgets.QVBoxLayout()
        right.addWidget(self.picture, 1)
        right.addWidget(self.details)
        layout = QtWidgets.QHBoxLayout(self)
        layout.addWidget(self.sessions, 2)
        layout.addWidget(self.steps, 2)
        layout.addLayout(right, 5)
        self._session: Session | None = None
        self._image: Image.Image | None = None
        self.sessions.currentRowChanged.connect(self._session_selected)
        self.steps.currentRowChanged.connect(self._step_selected)
        self.refresh()

    def refresh(self) -> None:
        self.sessions.clear()
        self._folders = list(reversed(list(iter_session_folders(self.root))))  # newest first
        for folder in self._folders:
            session = read_session(folder)
            self.sessions.addItem(f"{session.task}\n{folder.name} · {len(session.steps)} steps · {session.outcome}")

    def _session_selected(self, row: int) -> None:
        self.steps.clear()
        self._session = read_session(self._folders[row]) if 0 <= row < len(self._folders) else None
        if self._session is None:
            return
        for step in self._session.steps:
            what = step.get("action_text") or step.get("error") or step.get("decision", "")
            self.steps.addItem(f"{step.get('index', '?')}. {step.get('decision', '-')}: {what}")

    def _step_selected(self, row: int) -> None:
        if self._session is None or not 0 <= row < len(self._session.steps):
            return
        step = self._session.steps[row]
        self._image = step_picture(self._session, step)
        if self._image is None:
            self.picture.setText("No screenshot for this step")
        else:
            self.picture.setPixmap(
                _pixmap(self._image).scaled(
                    self.picture.size(), Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
                )
            )
        lines = [f"note: {step.get('note', '')}", f"thought: {step.get('thought', '')}"]
        if step.get("result"):
            lines.append(f"result: {step['result']}")
        lines.append(f"raw answer:\n{step.get('raw_text', '')}")
        self.details.setPlainText("\n".join(lines))
