"""The first-run window: the models that fit this computer, a download with progress, and Cancel.

The choices are `holodesk.app.setup.choices`' list, the one `holodesk setup` numbers in a terminal (the
recommended model first, each with its download size and the step's time measured here). The download is
the `holodesk setup` command itself, run as a child process (the same tested path as in a terminal): the
window reads its progress lines (bytes, rate, time left) and its words when it fails. Cancel sends it
Ctrl+C (SIGINT), on which it stops, keeps what it downloaded for the next try and leaves the settings as
they were.

The list also offers Holotron-12B on a GPU with enough memory (greyed where there is none) and a model
server elsewhere: its URL is checked by asking the server (`holodesk.app.setup.remote_check`, off the
GUI thread) and saved only once it answered.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Sequence

from holodesk.app.gui.qt import QtCore, QtWidgets, Signal
from holodesk.app.setup.choices import Choice, measured_choices
from holodesk.app.setup.choose import save_remote_choice
from holodesk.app.setup.errors import SetupError
from holodesk.app.setup.progress_line import parse_line
from holodesk.app.setup.remote_check import EXAMPLE, ServerChoice, check_server_url

EXIT_OK = 0
EXIT_CANCELLED = 130


class FirstRunWindow(QtWidgets.QDialog):
    """Choose, download (progress, Cancel), done. `finished_setup(ok)` when the download ends."""

    finished_setup = Signal(bool)
    _server_answered = Signal(object)  # ServerChoice, or SetupError: from the checking thread

    def __init__(
        self, choices: Sequence[Choice], current_profile: str = "holotron", parent: QtWidgets.QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._current_profile = current_profile
        self.chosen = False  # a model was downloaded and set, or a server was checked and set
        self.setWindowTitle("Holodesk: choose a model")
        self.setMinimumWidth(560)
        self._choices = list(choices)
        layout = QtWidgets.QVBoxLayout(self)
        intro = QtWidgets.QLabel(
            "Holodesk needs a model. The one that suits this computer best comes first (the step times were"
            " measured here just now); greyed ones do not fit it."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.choice_list = QtWidgets.QListWidget()
        self.choice_list.setSpacing(3)  # two lines a choice: a gap tells where one ends
        # A long reason ("does not fit: ...") wraps inside the window rather than behind a scroll bar.
        self.choice_list.setWordWrap(True)
        self.choice_list.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.choice_list.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)
        for choice in self._choices:
            item = QtWidgets.QListWidgetItem(choice.label)
            if not choice.enabled:
                item.setFlags(item.flags() & ~QtCore.Qt.ItemFlag.ItemIsEnabled)
            self.choice_list.addItem(item)
        first = next((i for i, c in enumerate(self._choices) if c.enabled), -1)
        self.choice_list.setCurrentRow(first)
        layout.addWidget(self.choice_list)
        self.url_row = QtWidgets.QWidget()
        url_layout = QtWidgets.QHBoxLayout(self.url_row)
        url_layout.setContentsMargins(0, 0, 0, 0)
        url_layout.addWidget(QtWidgets.QLabel("Server URL:"))
        self.url_field = QtWidgets.QLineEdit()
        self.url_field.setPlaceholderText(EXAMPLE)
        url_layout.addWidget(self.url_field, 1)
        self.url_row.setVisible(False)
        layout.addWidget(self.url_row)
        self.progress = QtWidgets.QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setVisible(False)
        layout.addWidget(self.progress)
        self.status = QtWidgets.QLabel("")
        self.status.setWordWrap(True)
        # Room for three lines: a wrapped label does not grow a dialog that is already shown.
        self.status.setMinimumHeight(3 * self.status.fontMetrics().lineSpacing())
        layout.addWidget(self.status)
        buttons = QtWidgets.QHBoxLayout()
        self.download_button = QtWidgets.QPushButton("&Download")
        self.cancel_button = QtWidgets.QPushButton("&Cancel")
        self.cancel_button.setEnabled(False)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.download_button)
        layout.addLayout(buttons)
        self.download_button.setEnabled(first >= 0)
        if first >= 0 and self._choices[first].is_server:
            self.status.setText("No model fits this computer's memory: use a server elsewhere (type its URL).")
        self.download_button.clicked.connect(self.start_download)
        self.cancel_button.clicked.connect(self.cancel_download)
        self.choice_list.currentRowChanged.connect(self._choice_changed)
        self.url_field.returnPressed.connect(self.start_download)
        self._server_answered.connect(self._server_checked)
        self._process: QtCore.QProcess | None = None
        self._errors: list[str] = []
        self._pending = ""
        self._choice_changed(first)

    def _choice_changed(self, row: int) -> None:
        server = 0 <= row < len(self._choices) and self._choices[row].is_server
        self.url_row.setVisible(server)
        if server:  # a cancelled download's bar and words are not about the server
            self.progress.setVisible(False)
            self.status.setText("")
        self.download_button.setText("Check and &use" if server else "&Download")
        if server:
            self.url_field.setFocus()

    def start_download(self) -> None:
        if not self.download_button.isEnabled():  # Enter in the URL field while a check or download runs
            return
        choice = self._choices[self.choice_list.currentRow()]
        if choice.is_server:
            self._check_server(self.url_field.text())
            return
        process = QtCore.QProcess(self)
        process.setProgram(sys.executable)
        arguments = ["-m", "holodesk.app.cli", "setup", "--model", choice.model, "--device", choice.device]
        if choice.profile is not None:
            arguments += ["--profile", choice.profile]
        process.setArguments([*arguments, "--yes"])
        process.readyReadStandardError.connect(self._read_progress)
        process.finished.connect(self._ended)
        self._process, self._errors, self._pending = process, [], ""
        self.download_button.setEnabled(False)
        self.choice_list.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.progress.setVisible(True)
        self.progress.setValue(0)
        self.status.setText(f"Asking the Hugging Face hub about {choice.model}...")
        process.start()

    def _check_server(self, text: str) -> None:
        """Ask the server off the GUI thread (a connection may take its 5 s timeout); the answer comes back
        through a queued signal."""
        self.download_button.setEnabled(False)
        self.choice_list.setEnabled(False)
        self.url_field.setEnabled(False)
        self.status.setText(f"Asking the server at {text.strip()} which model it serves...")

        def ask() -> None:
            try:
                answer: ServerChoice | SetupError = check_server_url(text, self._current_profile)
            except SetupError as exc:
                answer = exc
            self._server_answered.emit(answer)

        threading.Thread(target=ask, name="holodesk-server-check", daemon=True).start()

    def _server_checked(self, answer: ServerChoice | SetupError) -> None:
        if isinstance(answer, ServerChoice):
            try:
                settings_file = save_remote_choice(answer.base_url, answer.model, answer.profile)
            except SetupError as exc:
                answer = exc
            else:
                self.status.setText(
                    f"Ready: the server at {answer.base_url} serves {answer.model} ({answer.profile} profile);"
                    f" the settings ({settings_file}) now use it."
                )
                self._done()
                return
        self.status.setText(f"Not done: {answer}. The settings are unchanged.")
        self.download_button.setEnabled(True)
        self.choice_list.setEnabled(True)
        self.url_field.setEnabled(True)
        self.url_field.setFocus()

    def _done(self) -> None:
        self.chosen = True
        self.download_button.setText("&Close")
        self.download_button.clicked.disconnect()
        self.download_button.clicked.connect(self.accept)
        self.download_button.setEnabled(True)
        self.finished_setup.emit(True)

    def cancel_download(self) -> None:
        process = self._process
        if process is None or process.state() != QtCore.QProcess.ProcessState.Running:
            return
        self.status.setText("Cancelling...")
        self.cancel_button.setEnabled(False)
        os.kill(int(process.processId()), signal.SIGINT)  # the command's own Ctrl+C path: keeps the part

    def reject(self) -> None:
        """Closed (Esc, the title bar's X) mid-download: the download is cancelled as by Cancel, never left
        running unseen."""
        self.cancel_download()
        super().reject()

    def _read_progress(self) -> None:
        if self._process is None:
            return
        self._pending += bytes(self._process.readAllStandardError().data()).decode("utf-8", "replace")
        *lines, self._pending = self._pending.split("\n")
        for text in lines:
            line = parse_line(text)
            if line is None:
                if text.strip():
                    self._errors.append(text.strip().removeprefix("holodesk setup: "))
                continue
            self.progress.setValue(1000 * line.done // max(line.total, 1))
            left = f"{line.left_s} s left" if line.left_s is not None else "time left unknown"
            self.status.setText(
                f"{line.done / 1e6:.1f} MB of {line.total / 1e6:.1f} MB, {line.rate_mb_s:.1f} MB/s, {left}"
            )

    def _ended(self, code: int, _status: QtCore.QProcess.ExitStatus) -> None:
        self._read_progress()
        self.cancel_button.setEnabled(False)
        if code == EXIT_OK:
            self.progress.setValue(1000)
            self.status.setText("Ready: the model is downloaded, verified and set in the settings.")
            self._done()
            return
        self.choice_list.setEnabled(True)
        self.download_button.setEnabled(True)
        if code == EXIT_CANCELLED:
            self.status.setText(
                "Cancelled: the settings are unchanged; what was downloaded is kept and Download resumes it."
            )
        else:
            words = " ".join(self._errors) or f"holodesk setup ended with status {code}"
            self.status.setText(f"Not done: {words}")
        self.finished_setup.emit(False)


def run_first_run_window() -> int:
    """`holodesk setup --window`: the window on its own, for a first run from a menu or a terminal."""
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    window = FirstRunWindow(measured_choices())
    window.show()
    app.exec()
    return 0 if window.result() == QtWidgets.QDialog.DialogCode.Accepted else 1
