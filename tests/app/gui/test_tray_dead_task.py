"""The tray app never keeps a dead task "running": a crashed engine thread or an unwritable sessions folder
returns it to idle with the error shown, and the next task is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holodesk.app.common.policy_factory import build_policy
from holodesk.app.common.settings import LoadedSettings, ModelSettings, SessionSettings, Settings
from holodesk.app.gui.app_state import AppState
from holodesk.app.gui.main import HolodeskApp
from holodesk.app.gui.qt import QtGui
from holodesk.automation.engine import StepEngine
from tests.e2e.scripting import holotron

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack


@pytest.fixture
def make_app(xvfb, qapp, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    script = tmp_path / "answers.jsonl"
    script.write_text("".join(json.dumps(holotron("answer", content="ok")) + "\n" for _ in range(4)), encoding="utf-8")
    apps: list[HolodeskApp] = []

    def make(sessions: Path) -> tuple[HolodeskApp, list[tuple[str, str]]]:
        settings = Settings(
            model=ModelSettings(backend="scripted", script=script), sessions=SessionSettings(folder=sessions)
        )
        app = HolodeskApp(LoadedSettings(settings, tmp_path / "settings.toml"), lambda state: QtGui.QIcon())
        notes: list[tuple[str, str]] = []
        monkeypatch.setattr(app.indicator, "notify", lambda title, text: notes.append((title, text)))
        app.policy = build_policy(settings.to_policy_options())
        apps.append(app)
        return app, notes

    yield make
    for app in apps:
        app.overlay.clear()


def test_an_engine_thread_that_dies_returns_the_app_to_idle_with_the_error(make_app, qtbot, tmp_path, monkeypatch):
    app, notes = make_app(tmp_path / "sessions")
    statuses: list = []
    monkeypatch.setattr(app.indicator, "show_status", statuses.append)

    def crash(self: StepEngine, task: str) -> None:
        raise MemoryError("the engine thread died")

    with monkeypatch.context() as patch:
        patch.setattr(StepEngine, "run", crash)
        app.start_task("first task")
        qtbot.waitUntil(lambda: app.engine is None, timeout=5000)
    assert notes[-1][0] == "Task failed" and "MemoryError: the engine thread died" in notes[-1][1]
    assert statuses[-1].state is AppState.ERROR

    app.start_task("second task")  # accepted, not "A task is running"
    qtbot.waitUntil(lambda: app.engine is None, timeout=10000)
    assert notes[-1][0] == "Task finished", notes
    assert all(title != "A task is running" for title, _ in notes)


def test_an_unwritable_sessions_folder_is_reported_and_nothing_starts(make_app, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    app, notes = make_app(blocker / "sessions")
    app.start_task("a task")
    assert app.engine is None
    assert notes == [
        (
            "Cannot record the task",
            f"cannot record the session in {blocker / 'sessions'}: Not a directory. "
            "Choose another sessions folder in the settings.",
        )
    ]
