"""The tray app's words when the model cannot be used: a real HolodeskApp in this process, its control
window (no tray here) read back, with a real server on 127.0.0.1 or none at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import FakeOpenAIServer, closed_port
from holodesk.app.common.backend_problems import gpu_missing
from holodesk.app.common.settings import LoadedSettings, ModelSettings, RemoteModelSettings, Settings
from holodesk.app.gui.app_state import AppState
from holodesk.app.gui.main import HolodeskApp, tray_icon
from holodesk.app.gui.tray import ControlWindow


def make_app(qtbot, settings: Settings, tmp_path: Path) -> HolodeskApp:
    app = HolodeskApp(LoadedSettings(settings, tmp_path / "settings.toml"), tray_icon)
    qtbot.addWidget(app.thinking)
    qtbot.addWidget(app.loading)
    return app


def remote(url: str) -> Settings:
    return Settings(model=ModelSettings(backend="remote", remote=RemoteModelSettings(base_url=url)))


@pytest.mark.parametrize("case", ["down", "404"])
def test_a_server_that_cannot_serve_is_said_in_words_before_any_task(qtbot, tmp_path, case):
    with FakeOpenAIServer() as server:
        url = f"http://127.0.0.1:{closed_port()}/v1" if case == "down" else server.root_url + "/api"
        app = make_app(qtbot, remote(url), tmp_path)
        app._load_policy()
        assert app.loading.isVisible()  # the window says what it is doing meanwhile
        qtbot.waitUntil(lambda: app.policy_error is not None, timeout=10_000)
    title, text = app.indicator.last_notification
    assert title == "Model not available"
    assert ("Start the model server" if case == "down" else "ends in /v1") in text
    assert "internal error" not in text and "Traceback" not in text
    assert app.indicator.status.state is AppState.ERROR
    assert not app.loading.isVisible()
    # A task asked for now tries again (the server may have been started meanwhile), and no session
    # is recorded for a run that never started.
    app.start_task("open the mail")
    qtbot.waitUntil(lambda: app.indicator.last_notification[0] == "Task not started", timeout=10_000)
    assert app.engine is None and not (Path(app.settings.sessions.folder) / "x").exists()


def test_without_a_gpu_the_local_backend_offers_the_server(qtbot, tmp_path, monkeypatch):
    if not gpu_missing():
        pytest.skip("this machine has an NVIDIA GPU")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    app = make_app(qtbot, Settings(), tmp_path)  # local backend, no weights, and this machine has no GPU
    app._load_policy()
    qtbot.waitUntil(lambda: app.policy_error is not None, timeout=20_000)
    title, text = app.indicator.last_notification
    assert title == "Model not available"
    assert "Backend: remote" in text and "no NVIDIA GPU" in text and "Download it once" not in text
    # The tooltip gives the balloon's fix, not the raw reason's (which says to install the GPU extra).
    tooltip = app.indicator.status.tooltip()
    assert text in tooltip and "pip install" not in tooltip and "holotron]" not in tooltip, tooltip
    # And the menu opens with why and what to do, which opens the settings.
    first = next(action for action in app.indicator.menu.actions() if action.isVisible())
    assert first.text() == "⚠ No usable GPU here: choose Settings → Backend: remote"
    assert first.toolTip() == text
    opened: list[bool] = []
    app.indicator.show_settings.connect(lambda: opened.append(True))
    first.trigger()
    assert opened == [True]
    # Without a tray (here), the control window's status line is cut to fit: a button says it whole.
    assert isinstance(app.indicator, ControlWindow)
    button = app.indicator.model_button
    assert not button.isHidden() and button.text() == first.text() and text in button.toolTip()
    button.click()
    assert opened == [True, True]


def test_a_pause_asked_while_the_model_thinks_stays_visible(qtbot, tmp_path):
    from holodesk.automation.engine import StepEngine
    from holodesk.automation.engine_protocols import EngineEvent, EngineState

    app = make_app(qtbot, Settings(), tmp_path)
    engine = StepEngine(policy=None, approver=app.approver, performer=app.performer, frames=app.frames)  # type: ignore[arg-type]
    app.engine = engine
    app.indicator.set_running(True)
    app._on_engine_event(EngineEvent(EngineState.THINKING, 2))
    assert app.thinking.isVisible() and app.thinking.text.startswith("Step 2 · the model is thinking")
    app.toggle_pause()
    assert app.indicator.last_notification[0] == "Pausing"  # seen at once, not only in a tooltip
    # The model answers after the pause was asked: the status must not flip back to "waiting".
    app._on_engine_event(EngineEvent(EngineState.WAITING_APPROVAL, 2, "click at (5, 5)"))
    assert app.indicator.status.state is AppState.PAUSED
    assert "pauses before the next step" in app.indicator.status.detail
    assert app.indicator.menu_actions["pause"].text() == "Resume"
    assert not app.thinking.isVisible()
    app.toggle_pause()
    assert not engine.paused


def test_a_task_asked_while_the_server_is_asked_says_so_not_loading_the_model(qtbot, tmp_path):
    with FakeOpenAIServer() as server:
        app = make_app(qtbot, remote(server.base_url), tmp_path)
        app._load_policy()
        # The first task races the start: nothing loads for a remote backend, the server is being asked.
        app.start_task("open the mail")
        assert app.indicator.last_notification == (
            "Asking the model server",
            "The task starts as soon as the server answers.",
        )
        assert app.loading.title.text() == "Asking the model server"
        assert app.loading.windowTitle() == "Holodesk: asking the model server"
        app.pending_task = None  # the task itself is not this test's
        qtbot.waitUntil(lambda: app.policy is not None or app.policy_error is not None, timeout=10_000)


def test_a_model_problem_is_the_menus_first_line_until_a_model_is_ready(qtbot, tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    app = make_app(qtbot, remote(url), tmp_path)
    assert not app.indicator.menu_actions["model_problem"].isVisible()  # nothing to say before the load
    app._load_policy()
    qtbot.waitUntil(lambda: app.policy_error is not None, timeout=10_000)
    first = next(action for action in app.indicator.menu.actions() if action.isVisible())
    assert first.text() == "⚠ The model server is not ready: open Settings (hover for why)"
    assert "Start the model server" in first.toolTip() and first.toolTip() == app.indicator.last_notification[1]
    with FakeOpenAIServer() as server:  # the server is started: the next load finds it
        app.settings = remote(server.base_url)
        app._load_policy()
        qtbot.waitUntil(lambda: app.policy is not None, timeout=10_000)
    assert not app.indicator.menu_actions["model_problem"].isVisible()
    assert isinstance(app.indicator, ControlWindow) and app.indicator.model_button.isHidden()
    assert app.indicator.status.state is AppState.IDLE


def test_the_running_balloon_is_the_first_thing_start_says(qtbot, tmp_path, monkeypatch):
    """start() says it at once, before the model loads and before the event loop turns (was: only when a
    second start asked the running one to show itself)."""
    app = make_app(qtbot, remote(f"http://127.0.0.1:{closed_port()}/v1"), tmp_path)
    said: list[tuple[str, str]] = []
    monkeypatch.setattr(app.indicator, "notify", lambda title, text: said.append((title, text)))
    monkeypatch.setattr(app, "_start_hotkeys", lambda: None)  # no global keys from a test
    app.start()
    assert said and said[0][0] == "Holodesk is running", said
    assert "tray icon" in said[0][1] and "press" in said[0][1]
    qtbot.waitUntil(lambda: app.policy_error is not None, timeout=10_000)
