"""HolodeskApp, the tray application's owner of windows and runs, driven as the tray menu drives it.

Routines too: the Routines menu starts a replay on the real screen (a drawn picture as the Xvfb's
root background, recorded from real grabs), the panel asks, the run ends in a notification, and
"continue with the agent" starts the agent on what is left.

A real scripted policy and a real engine on the module's Xvfb; the approval panel is answered in
code, as a click on it would. Qt runs offscreen (the session's QApplication), whose one screen is
800x800 at the origin, so the Xvfb here has that size too: capture, overlay and performer then agree
on where every point is.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from bench.rigs.routine_scenes import click_step, record_session
from bench.screens import show_on_root
from holodesk.app.common.settings import LoadedSettings, ModelSettings, SessionSettings, Settings
from holodesk.app.gui.main import HolodeskApp
from holodesk.app.gui.qt import QtGui, QtWidgets
from holodesk.automation.engine_protocols import EngineState
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.routine_file import ROUTINE_FILE
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import DisplayLayout


def scripted_settings(tmp_path: Path, profile: str, *answers: str) -> Settings:
    script = tmp_path / f"answers-{profile}.jsonl"
    script.write_text("".join(json.dumps(answer) + "\n" for answer in answers), encoding="utf-8")
    return Settings(
        model=ModelSettings(backend="scripted", profile=profile, script=script),
        sessions=SessionSettings(folder=tmp_path / "sessions"),
    )


# The offscreen platform's screen (see the module docstring).
pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(800, 800)], indirect=True, ids=str, scope="module"),
]

CLICK = '{"note": null, "thought": "t", "tool_call": {"tool_name": "click_desktop", "x": 500, "y": 500}}'


@pytest.fixture
def holodesk_app(qtbot, xvfb, tmp_path) -> Iterator[HolodeskApp]:  # type: ignore[no-untyped-def]
    settings = scripted_settings(tmp_path, "holotron", CLICK, CLICK)
    app = HolodeskApp(LoadedSettings(settings, tmp_path / "settings.toml"), lambda state: QtGui.QIcon())
    app.start()
    qtbot.waitUntil(lambda: app.policy is not None, timeout=20_000)
    yield app
    app.stop()
    qtbot.waitUntil(lambda: app.engine is None, timeout=10_000)
    if app.hotkeys is not None:
        from pynput import keyboard

        app.hotkeys.stop()
        # pynput's X11 listener thread only notices stop() at its next event: give it one before Xvfb goes.
        subprocess.run(["xdotool", "key", "shift"], env=xvfb.env(), check=False, timeout=10)
        for thread in threading.enumerate():
            if isinstance(thread, keyboard.Listener):
                thread.join(5)
    app.approver.panel.retract()
    app.overlay.clear()


def test_a_model_change_during_a_run_applies_when_the_run_ends(qtbot, holodesk_app, tmp_path) -> None:
    app = holodesk_app
    assert app.policy is not None and app.policy.profile.name == "holotron"
    waiting: list[object] = []
    app.bridge.engine_event.connect(
        lambda event: waiting.append(event) if event.state is EngineState.WAITING_APPROVAL else None
    )
    app.start_task("click the middle")
    qtbot.waitUntil(lambda: bool(waiting), timeout=20_000)  # the first step waits for approval

    changed = dataclasses.replace(app.settings, model=scripted_settings(tmp_path, "holo1", "Click(5, 5)").model)
    app.apply_settings(changed)
    assert app.policy.profile.name == "holotron"  # the running task keeps its model
    assert app.indicator.last_notification[0] == "Model settings saved"

    app.stop()
    qtbot.waitUntil(lambda: app.engine is None, timeout=10_000)
    qtbot.waitUntil(lambda: app.policy is not None and app.policy.profile.name == "holo1", timeout=20_000)
    assert app.settings.model.profile == "holo1"


def test_a_model_change_while_idle_loads_at_once(qtbot, holodesk_app, tmp_path) -> None:
    app = holodesk_app
    changed = dataclasses.replace(app.settings, model=scripted_settings(tmp_path, "holo1.5", "x").model)
    app.apply_settings(changed)
    qtbot.waitUntil(lambda: app.policy is not None and app.policy.profile.name == "holo1.5", timeout=20_000)


def test_an_auto_approved_step_is_announced(qtbot, holodesk_app, tmp_path) -> None:
    app = holodesk_app
    app.approver.set_auto_approve_kinds(frozenset({"click"}))
    finished: list[object] = []
    app.bridge.engine_event.connect(
        lambda event: finished.append(event) if event.state is EngineState.FINISHED else None
    )
    app.start_task("click the middle")
    qtbot.waitUntil(lambda: bool(finished), timeout=30_000)
    # Announced, held to be read (the run's end waits behind it), and listed in the menu.
    steps = app.indicator.approved_steps
    title, text = app.indicator.last_notification
    assert steps and steps[0].startswith("Step 1: click at") and all(": click at" in step for step in steps)
    assert title == f"Step {len(steps)} approved automatically" and text.endswith(steps[-1])
    assert [a.text() for a in app.indicator.approved_menu.actions()] == steps[::-1]  # newest first
    qtbot.waitUntil(lambda: app.indicator.last_notification[0] != title, timeout=20_000)
    assert app.indicator.approved_steps == steps  # kept until the next run


def test_a_monitor_the_display_lacks_is_said_before_the_task_starts(qtbot, holodesk_app, tmp_path) -> None:
    from holodesk.app.common.settings import RunSettings

    app = holodesk_app
    app.apply_settings(dataclasses.replace(app.settings, run=RunSettings(monitor=7)))
    app.start_task("click the middle")
    title, text = app.indicator.last_notification
    assert title == "Task not started" and "monitor 7" in text and "this display has 1" in text
    assert app.engine is None
    assert not (tmp_path / "sessions").exists() or not list((tmp_path / "sessions").iterdir())


# -- routines: the Routines menu, the panel, the hand-over to the agent --------------------------

ROUTINE_TASK = "press the green button"


def show_buttons(*labels: str) -> None:
    picture = Image.new("RGB", (800, 800), (236, 236, 236))
    draw = ImageDraw.Draw(picture)
    for index, label in enumerate(labels):
        left = 120 + 200 * index
        draw.rectangle((left, 300, left + 140, 340), fill=(40, 160, 90), outline=(10, 60, 30), width=2)
        draw.text((left + 70, 320), label, fill="white", anchor="mm")
    show_on_root(picture)


def save_routine(app: HolodeskApp, tmp_path) -> None:  # type: ignore[no-untyped-def]
    show_buttons("Go", "Cancel")
    capture = ScreenCapture()
    try:
        frame = capture.grab(1)
    finally:
        capture.close()
    session = record_session(
        tmp_path / "recorded", ROUTINE_TASK, [(frame, click_step(190, 320, "the Go button"))], frame
    )
    app.routines_root = tmp_path / "routines"
    save_compiled(compile_session(session, "go"), app.routines_root)


def run_from_menu(app: HolodeskApp) -> None:
    menu = app.indicator.routines_menu
    menu.aboutToShow.emit()
    (routine,) = [a for a in menu.actions() if a.text() == "go"]
    run = routine.menu().actions()[0]
    assert run.text() == "Run (1 step)"
    run.trigger()


def test_a_routine_runs_from_the_menu_with_the_panel_and_ends_in_a_notification(qtbot, holodesk_app, tmp_path):
    app = holodesk_app
    save_routine(app, tmp_path)
    run_from_menu(app)
    panel = app.routine_approver.panel
    qtbot.waitUntil(panel.isVisible, timeout=10_000)
    assert app.engine is not None and app.routine_policy is not None and app.overlay.showing
    panel.named_widgets()["approve"].click()
    qtbot.waitUntil(lambda: app.engine is None, timeout=10_000)
    title, text = app.indicator.last_notification
    assert title == "Routine 'go': done, every step as recorded" and "the 1 step of 'go' done" in text
    # The replay is a session in History, like any task.
    (folder,) = iter_session_folders(app.settings.sessions.folder)
    assert read_session(folder).outcome == "done"


def test_a_routine_stopped_on_the_panel_says_at_which_step_in_its_notification(qtbot, holodesk_app, tmp_path):
    app = holodesk_app
    save_routine(app, tmp_path)
    run_from_menu(app)
    panel = app.routine_approver.panel
    qtbot.waitUntil(panel.isVisible, timeout=10_000)
    panel.named_widgets()["stop"].click()
    qtbot.waitUntil(lambda: app.engine is None, timeout=10_000)
    title, text = app.indicator.last_notification
    assert title == "Routine 'go': stopped at step 1 of 1", title
    assert text.startswith("routine 'go' stopped at step 1 of 1 (none of its steps had run): "), text


def test_a_routine_hotkey_pressed_on_the_keyboard_starts_the_routine_as_its_menu_does(
    qtbot, holodesk_app, xvfb, tmp_path
):
    app = holodesk_app
    save_routine(app, tmp_path)
    folder = app.routines_root / "go"
    text = (folder / ROUTINE_FILE).read_text()
    (folder / ROUTINE_FILE).write_text(text.replace('task = "', 'hotkey = "<ctrl>+<alt>+1"\ntask = "', 1))
    app.indicator.routines_menu.aboutToShow.emit()  # the menu reads the routines afresh and binds the hotkey
    (entry,) = [a for a in app.indicator.routines_menu.actions() if a.text() == "go"]
    assert entry.menu().actions()[1].text() == "Hotkey: Ctrl+Alt+1"
    assert app.engine is None
    subprocess.run(["xdotool", "key", "ctrl+alt+1"], env=xvfb.env(), check=True, timeout=10)
    panel = app.routine_approver.panel
    qtbot.waitUntil(panel.isVisible, timeout=10_000)  # the same approval panel as a run from the menu
    assert app.engine is not None
    panel.named_widgets()["approve"].click()
    qtbot.waitUntil(lambda: app.engine is None, timeout=10_000)
    assert app.indicator.last_notification[0] == "Routine 'go': done, every step as recorded"


def test_continue_with_the_agent_starts_the_agent_on_what_is_left(qtbot, holodesk_app, tmp_path):
    app = holodesk_app
    save_routine(app, tmp_path)
    show_buttons("Cancel")  # the Go button is gone
    run_from_menu(app)
    qtbot.waitUntil(lambda: app.routine_approver.window is not None, timeout=10_000)
    box = app.routine_approver.window
    assert isinstance(box, QtWidgets.QMessageBox) and "The Go button was not found" in box.text()
    assert not app.thinking.showing, app.thinking.text  # the run waits for the person, not for a model
    (agent,) = [b for b in box.buttons() if b.text() == "Continue with the agent"]
    agent.click()
    # The same run goes on with the agent, told what is left; one session holds both.
    qtbot.waitUntil(lambda: app.last_routine is not None and app.last_routine.handed_over, timeout=10_000)
    task = app.last_routine.handover_task
    assert task.startswith(ROUTINE_TASK) and "Still to do (the routine could not): click the Go button" in task
    # The agent's step says whose step it is, and since where (the panel is the app's own).
    qtbot.waitUntil(app.approver.panel.isVisible, timeout=10_000)
    context = app.approver.panel.named_widgets()["context"]
    assert isinstance(context, QtWidgets.QLabel)
    said = "The agent continues the routine 'go', handed over at step 1 of 1: the Go button was not found on the screen"
    assert said in context.text(), context.text()
    (folder,) = iter_session_folders(app.settings.sessions.folder)
    assert read_session(folder).task == ROUTINE_TASK
