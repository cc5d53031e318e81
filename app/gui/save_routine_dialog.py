"""The "Save as routine" dialog: a finished session's steps, compiled, reviewed and named before saving.

It shows what the compiler made of the session: a name, each proposed parameter (the text typed,
where it came from) with keep / rename / type as recorded, each kept step with a tick (untick to
leave it out; irreversible steps say that they will always be asked), and the steps the compiler
left out with why. Save applies the choices (`automation.routines.save_choices`) and writes the
routine; a choice that cannot be honoured, or a name already taken, is said in the dialog, which
stays open. Nothing is written until Save.
"""

from __future__ import annotations

from pathlib import Path

from holodesk.app.gui.approval_panel import STYLE as PANEL_STYLE
from holodesk.app.gui.qt import Qt, QtWidgets
from holodesk.automation.display_text import safe_text
from holodesk.automation.routines.compiler import CompiledRoutine, save_compiled
from holodesk.automation.routines.save_choices import ParameterChoice, ParameterUse, SaveChoiceError, apply_choices

USES = (
    (ParameterUse.KEEP, "Keep as a parameter"),
    (ParameterUse.RENAME, "Rename to:"),
    (ParameterUse.LITERAL, "Type it as recorded"),
)

STYLE = (
    PANEL_STYLE
    + """
#saveRoutine { background: #1d1e27; }
#saveRoutine QLabel { color: #e6e6ee; }
#section { color: #a4a6ba; font-size: 12px; font-weight: 600; margin-top: 8px; }
#leftOut { color: #c9a227; }
#problem { color: #ff8a94; font-weight: 600; }
QLineEdit, QComboBox { background: #23242f; color: #e6e6ee; border: 1px solid #44465a; padding: 3px 6px; }
QComboBox QAbstractItemView { background: #23242f; color: #e6e6ee; }
QListWidget { background: #23242f; color: #e6e6ee; border: 1px solid #44465a; }
"""
)


class ParameterRow(QtWidgets.QWidget):
    """One proposed parameter: its value and origin, and what to make of it."""

    def __init__(self, name: str, value: str, description: str) -> None:
        super().__init__()
        self.name = name
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        label = QtWidgets.QLabel(f"{name} = {safe_text(value)!r}  ({safe_text(description)})")
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setWordWrap(True)
        self.use = QtWidgets.QComboBox()
        self.use.setObjectName(f"use_{name}")
        for use, words in USES:
            self.use.addItem(words, use.value)
        self.new_name = QtWidgets.QLineEdit(name)
        self.new_name.setObjectName(f"rename_{name}")
        self.new_name.setVisible(False)  # shown only for "Rename to:"
        self.use.currentIndexChanged.connect(
            lambda _: self.new_name.setVisible(self.current_use() is ParameterUse.RENAME)
        )
        layout.addWidget(label, 1)
        layout.addWidget(self.use)
        layout.addWidget(self.new_name)

    def current_use(self) -> ParameterUse:
        return ParameterUse(str(self.use.currentData()))

    def set_use(self, use: ParameterUse) -> None:
        self.use.setCurrentIndex(self.use.findData(use.value))

    def choice(self) -> ParameterChoice:
        return ParameterChoice(self.current_use(), self.new_name.text())


class SaveRoutineDialog(QtWidgets.QDialog):
    """Review a compiled session and save it under `routines`; `saved` is its folder once saved."""

    def __init__(self, compiled: CompiledRoutine, routines: Path, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.compiled = compiled
        self.routines = routines
        self.saved: Path | None = None
        routine = compiled.routine
        self.setObjectName("saveRoutine")
        self.setWindowTitle("Save as routine")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground)
        self.setStyleSheet(STYLE)
        self.setMinimumWidth(640)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setSpacing(6)

        form = QtWidgets.QFormLayout()
        self.name = QtWidgets.QLineEdit(routine.name)
        self.name.setObjectName("name")
        form.addRow("Name", self.name)
        task = QtWidgets.QLabel(safe_text(routine.task))
        task.setTextFormat(Qt.TextFormat.PlainText)
        task.setWordWrap(True)
        form.addRow("Task", task)
        layout.addLayout(form)

        self.parameter_rows: list[ParameterRow] = []
        if routine.parameters:
            layout.addWidget(self._section("PARAMETERS: the text a run may change (--set NAME=VALUE)"))
            for parameter in routine.parameters:
                row = ParameterRow(parameter.name, parameter.default, parameter.description)
                self.parameter_rows.append(row)
                layout.addWidget(row)

        layout.addWidget(self._section("STEPS KEPT: untick a step to leave it out"))
        self.steps = QtWidgets.QListWidget()
        self.steps.setObjectName("steps")
        for step in routine.steps:
            flag = "  (always asked: irreversible)" if step.irreversible else ""
            item = QtWidgets.QListWidgetItem(f"{step.number}. {safe_text(step.describe())}{flag}")
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked)
            item.setData(Qt.ItemDataRole.UserRole, step.number)
            self.steps.addItem(item)
        self.steps.setMaximumHeight(26 * min(8, len(routine.steps)) + 8)
        layout.addWidget(self.steps)

        if compiled.left_out:
            layout.addWidget(self._section("LEFT OUT by the compiler"))
            left_out = QtWidgets.QLabel("\n".join(safe_text(line) for line in compiled.left_out))
            left_out.setObjectName("leftOut")
            left_out.setTextFormat(Qt.TextFormat.PlainText)
            left_out.setWordWrap(True)
            layout.addWidget(left_out)

        if compiled.warnings:  # kept, but a replay cannot do them by itself: said now, not at replay
            layout.addWidget(self._section("⚠ A REPLAY WILL NEED YOU HERE"))
            warnings = QtWidgets.QLabel("\n".join(safe_text(line) for line in compiled.warnings))
            warnings.setObjectName("warnings")
            warnings.setTextFormat(Qt.TextFormat.PlainText)
            warnings.setWordWrap(True)
            layout.addWidget(warnings)

        self.problem = QtWidgets.QLabel("")
        self.problem.setObjectName("problem")
        self.problem.setWordWrap(True)
        self.problem.setVisible(False)
        layout.addWidget(self.problem)
        buttons = QtWidgets.QDialogButtonBox()
        self.save_button = buttons.addButton("Save routine", QtWidgets.QDialogButtonBox.ButtonRole.AcceptRole)
        self.save_button.setObjectName("approve")
        cancel = buttons.addButton(QtWidgets.QDialogButtonBox.StandardButton.Cancel)
        cancel.setObjectName("skip")
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def _section(self, text: str) -> QtWidgets.QLabel:
        label = QtWidgets.QLabel(text)
        label.setObjectName("section")
        return label

    def left_out_steps(self) -> set[int]:
        items = (self.steps.item(i) for i in range(self.steps.count()))
        return {int(i.data(Qt.ItemDataRole.UserRole)) for i in items if i.checkState() != Qt.CheckState.Checked}

    def save(self) -> None:
        """Apply the choices and write the routine; any problem is shown and the dialog stays open."""
        choices = {row.name: row.choice() for row in self.parameter_rows}
        try:
            chosen = apply_choices(self.compiled, self.name.text().strip(), choices, self.left_out_steps())
            self.saved = save_compiled(chosen, self.routines)
        except SaveChoiceError as exc:
            self._say(str(exc))
            return
        except FileExistsError:
            self._say(f"a routine named {self.name.text().strip()!r} already exists: choose another name")
            return
        except OSError as exc:
            self._say(f"the routine cannot be written under {self.routines}: {exc.strerror or exc}")
            return
        self.accept()

    def _say(self, problem: str) -> None:
        self.problem.setText(problem)
        self.problem.setVisible(True)
