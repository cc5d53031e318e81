"""The Settings window: every user setting in one form, validated before anything is written.

Saving builds a new `Settings` (each value is checked by its dataclass, the error names the key),
writes the TOML atomically, and stores a typed API key in the OS keyring, never in the file. A
broken settings file is only replaced when the user says so (a copy of it is kept); the form starts
from the settings the app runs on, which keep the file's valid values (app.common.settings), so fixing
one bad value keeps the others, the server URL included. Only the chosen backend's
fields are shown. A server URL is normalised as everywhere else ("gpu-box:8000" is accepted).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from holodesk.app.common.choices import IN_PROCESS_PROFILES, local_profile_problem
from holodesk.app.common.session_words import kind_in_words
from holodesk.app.common.settings import (
    BACKENDS,
    DEVICES,
    BrokenSettingsFileError,
    Settings,
    SettingsError,
    SettingValueError,
    save_settings,
    store_api_key,
)
from holodesk.app.gui.qt import QtGui, QtWidgets, Signal
from holodesk.automation.actions import ACTION_TYPES, TERMINAL_KINDS
from holodesk.inference.profiles import PROFILE_MODELS, PROFILE_NAMES

AUTO_APPROVABLE = tuple(kind for kind in ACTION_TYPES if kind not in TERMINAL_KINDS)


class SettingsDialog(QtWidgets.QDialog):
    """Edits a copy of the settings; `saved` carries the new settings once they are on disk."""

    saved = Signal(object)

    def __init__(self, settings: Settings, path: Path, problem: SettingsError | None = None) -> None:
        super().__init__()
        self.setWindowTitle("Holodesk settings")
        self.settings = settings
        self.path = path
        form = QtWidgets.QFormLayout()

        self.backend = QtWidgets.QComboBox()
        self.backend.addItems(BACKENDS)
        self.profile = QtWidgets.QComboBox()
        for name in PROFILE_NAMES:  # shown by model and where it runs; the item's data is the profile's name
            self.profile.addItem(profile_label(name), name)
        self.checkpoint = QtWidgets.QLineEdit()
        self.device = QtWidgets.QComboBox()
        self.device.addItems(DEVICES)
        self.base_url = QtWidgets.QLineEdit()
        self.base_url.setPlaceholderText("http://gpu-box:8000/v1 (or just gpu-box:8000)")
        self.served_model = QtWidgets.QLineEdit()
        self.served_model.setPlaceholderText("the one model the server lists")
        self.api_key = QtWidgets.QLineEdit()
        self.api_key.setEchoMode(QtWidgets.QLineEdit.EchoMode.Password)
        self.api_key.setPlaceholderText("stored in the OS keyring, never in the settings file")
        self.script = QtWidgets.QLineEdit()
        self.prompt_hotkey = QtWidgets.QLineEdit()
        self.stop_key = QtWidgets.QLineEdit()
        self.stop_presses = QtWidgets.QSpinBox()
        self.stop_presses.setRange(1, 5)
        self.monitor = QtWidgets.QComboBox()
        screens = max(1, len(QtGui.QGuiApplication.screens()))
        self.monitor.addItems([str(n) for n in range(1, max(screens, _monitor_number(settings)) + 1)] + ["all"])
        self.max_steps = QtWidgets.QSpinBox()
        self.max_steps.setRange(1, 1000)
        self.sessions_folder = QtWidgets.QLineEdit()
        self.retention_mb = QtWidgets.QSpinBox()
        self.retention_mb.setRange(1, 10_000_000)
        self.retention_mb.setSuffix(" MB")
        self.auto_approve = {kind: QtWidgets.QCheckBox(kind_in_words(kind)) for kind in AUTO_APPROVABLE}
        kinds = QtWidgets.QHBoxLayout()
        for box in self.auto_approve.values():
            kinds.addWidget(box)

        form.addRow("Backend", self.backend)
        form.addRow("Model profile", self.profile)
        form.addRow("Local checkpoint", self.checkpoint)
        form.addRow("Local device", self.device)
        form.addRow("Server URL", self.base_url)
        form.addRow("Served model", self.served_model)
        form.addRow("API key", self.api_key)
        form.addRow("Script (scripted backend)", self.script)
        self.form = form
        # Each backend's own fields; the others are hidden while it is not chosen.
        self.backend_fields: dict[str, tuple[QtWidgets.QWidget, ...]] = {
            "local": (self.checkpoint, self.device),
            "remote": (self.base_url, self.served_model, self.api_key),
            "scripted": (self.script,),
        }
        self.backend.currentTextChanged.connect(self._show_backend_fields)
        # A pair the in-process engine cannot run is said as soon as it is chosen, not only at Save.
        self.backend.currentTextChanged.connect(self._check_pair)
        self.profile.currentIndexChanged.connect(self._check_pair)
        self._pair_problem_shown = False
        form.addRow("Task prompt hotkey", self.prompt_hotkey)
        form.addRow("Stop key", self.stop_key)
        form.addRow("Stop key presses", self.stop_presses)
        form.addRow("Monitor", self.monitor)
        form.addRow("Step limit", self.max_steps)
        form.addRow("Approve without asking", kinds)
        form.addRow("Sessions folder", self.sessions_folder)
        form.addRow("Keep at most", self.retention_mb)

        self.problem = QtWidgets.QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #bf616a;")
        self.problem.setVisible(False)
        buttons = QtWidgets.QDialogButtonBox(
            QtWidgets.QDialogButtonBox.StandardButton.Save | QtWidgets.QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        layout = QtWidgets.QVBoxLayout(self)
        if problem is not None:
            warning = QtWidgets.QLabel(
                f"Problems in the settings file {problem.path}:\n"
                + "\n".join(f"• {line}" for line in problem.problems)
                + "\nHolodesk uses the default for each of these and the file's other values, as this form"
                " shows them. The file is left as it is until you save here."
            )
            warning.setWordWrap(True)
            warning.setObjectName("settings_problem")
            # Dark text on a light amber box: readable on light and dark desktop themes alike.
            warning.setStyleSheet(
                "#settings_problem { background: #fff3d6; color: #4a3200; border: 1px solid #d9a441;"
                " border-radius: 4px; padding: 6px; }"
            )
            layout.addWidget(warning)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(buttons)
        self._show(settings)

    def _show_backend_fields(self, backend: str) -> None:
        for name, widgets in self.backend_fields.items():
            for widget in widgets:
                self.form.setRowVisible(widget, name == backend)
        self.adjustSize()

    def _pair_problem(self) -> str | None:
        profile = self.chosen_profile()
        if self.backend.currentText() == "local" and profile not in IN_PROCESS_PROFILES:
            return f"model.profile: {local_profile_problem(profile)}"
        return None

    def _check_pair(self) -> None:
        problem = self._pair_problem()
        if problem is not None:
            self._pair_problem_shown = True
            self.problem.setText(problem)
            self.problem.setVisible(True)
        elif self._pair_problem_shown:  # only the line this check showed is taken away
            self._pair_problem_shown = False
            self.problem.setVisible(False)

    def chosen_profile(self) -> str:
        """The profile's name (the combo box shows it with its models)."""
        return str(self.profile.currentData())

    def _show(self, settings: Settings) -> None:
        model = settings.model
        self.backend.setCurrentText(model.backend)
        self._show_backend_fields(model.backend)
        self.profile.setCurrentIndex(max(0, self.profile.findData(model.profile)))
        self.checkpoint.setText(model.local.checkpoint)
        self.device.setCurrentText(model.local.device)
        self.base_url.setText(model.remote.base_url or "")
        self.served_model.setText(model.remote.model or "")
        self.script.setText(str(model.script) if model.script else "")
        self.prompt_hotkey.setText(settings.hotkeys.prompt)
        self.stop_key.setText(settings.hotkeys.stop.key)
        self.stop_presses.setValue(settings.hotkeys.stop.presses)
        self.monitor.setCurrentText(str(settings.run.monitor))
        self.max_steps.setValue(settings.run.max_steps)
        self.sessions_folder.setText(str(settings.sessions.folder))
        self.retention_mb.setValue(settings.sessions.retention_mb)
        for kind, box in self.auto_approve.items():
            box.setChecked(kind in settings.approval.auto_approve)

    def edited_settings(self) -> Settings:
        """The form as Settings; SettingValueError (naming the key) for a bad value."""
        s = self.settings
        monitor_text = self.monitor.currentText()
        return dataclasses.replace(
            s,
            model=dataclasses.replace(
                s.model,
                backend=self.backend.currentText(),
                profile=self.chosen_profile(),
                script=Path(self.script.text().strip()).expanduser() if self.script.text().strip() else None,
                local=dataclasses.replace(
                    s.model.local, checkpoint=self.checkpoint.text().strip(), device=self.device.currentText()
                ),
                remote=dataclasses.replace(
                    s.model.remote,
                    base_url=self.base_url.text().strip() or None,
                    model=self.served_model.text().strip() or None,
                ),
            ),
            hotkeys=dataclasses.replace(
                s.hotkeys,
                prompt=self.prompt_hotkey.text().strip(),
                stop=dataclasses.replace(
                    s.hotkeys.stop, key=self.stop_key.text().strip(), presses=self.stop_presses.value()
                ),
            ),
            run=dataclasses.replace(
                s.run,
                monitor="all" if monitor_text == "all" else int(monitor_text),
                max_steps=self.max_steps.value(),
            ),
            approval=dataclasses.replace(
                s.approval, auto_approve=frozenset(k for k, box in self.auto_approve.items() if box.isChecked())
            ),
            sessions=dataclasses.replace(
                s.sessions,
                folder=Path(self.sessions_folder.text().strip()).expanduser(),
                retention_mb=self.retention_mb.value(),
            ),
        )

    def confirm_replace_broken(self, problem: SettingsError) -> bool:
        """Ask before replacing a broken file (tests replace this method)."""
        answer = QtWidgets.QMessageBox.question(
            self,
            "Replace the broken settings file?",
            f"{problem}\n\nSave anyway? A copy of the broken file is kept next to it.",
        )
        return answer == QtWidgets.QMessageBox.StandardButton.Yes

    def save(self) -> bool:
        """Validate, write, store the key; True when the settings are on disk."""
        try:
            settings = self.edited_settings()
        except (SettingValueError, ValueError) as exc:
            return self._fail(str(exc))
        # The tray runs what the file says: a pair the in-process engine cannot run is refused here.
        # (The file itself may hold it: `holodesk run --backend remote` overrides its backend.)
        pair = self._pair_problem()
        if pair is not None:
            return self._fail(pair)
        try:
            save_settings(settings, self.path)
        except BrokenSettingsFileError as problem:
            if not self.confirm_replace_broken(problem):
                return self._fail("Not saved: the broken settings file was left as it is.")
            save_settings(settings, self.path, replace_broken=True)
        except OSError as exc:
            return self._fail(f"Could not write {self.path}: {exc}")
        key = self.api_key.text().strip()
        if key:
            try:
                store_api_key(settings, key)
            except Exception as exc:  # keyring backends raise their own types
                return self._fail(f"Settings saved, but the API key could not be stored: {exc}")
            self.api_key.clear()
        self.settings = settings
        self.problem.setVisible(False)
        self.saved.emit(settings)
        self.accept()
        return True

    def _fail(self, message: str) -> bool:
        self.problem.setText(message)
        self.problem.setVisible(True)
        return False


def _monitor_number(settings: Settings) -> int:
    return settings.run.monitor if isinstance(settings.run.monitor, int) else 1


def profile_label(name: str) -> str:
    """A profile as the settings window lists it: its name, its models, where they can run."""
    where = "in Holodesk or on a server" if name in IN_PROCESS_PROFILES else "on a vLLM server"
    return f"{name}: {PROFILE_MODELS[name]} ({where})"
