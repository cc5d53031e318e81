"""A fault while measuring the first-run choices reaches the person in words; the tray keeps running."""

from __future__ import annotations

import pytest

from holodesk.app.common.settings import LoadedSettings, Settings
from holodesk.app.gui import main
from holodesk.app.gui.app_state import AppState
from holodesk.app.gui.main import HolodeskApp
from holodesk.app.gui.qt import QtGui

pytestmark = pytest.mark.display  # the app's backends need a display


def test_a_measurement_that_fails_is_said_and_the_menu_offers_the_choice_again(
    xvfb, qapp, qtbot, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))

    def broken() -> list:
        raise OSError("cannot read /proc/meminfo")

    monkeypatch.setattr(main, "measured_choices", broken)
    app = HolodeskApp(LoadedSettings(Settings(), tmp_path / "settings.toml"), lambda state: QtGui.QIcon())
    notes: list[tuple[str, str]] = []
    monkeypatch.setattr(app.indicator, "notify", lambda title, text: notes.append((title, text)))
    app.open_first_run()
    qtbot.waitUntil(lambda: bool(notes), timeout=10_000)
    ((title, words),) = notes
    assert title == "No model chosen"
    assert "The model choice could not be shown (OSError: cannot read /proc/meminfo)" in words, words
    assert "Choose a model…" in words and app.first_run_window is None and app.no_model_chosen
    assert app.indicator.status.state is AppState.ERROR
    assert app.indicator.model_problem == "⚠ No model yet: choose one" and app.indicator.model_problem_opens_choice
