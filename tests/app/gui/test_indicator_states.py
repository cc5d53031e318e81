"""The control window (the tray's stand-in): Stop and Pause only while running, settings problems kept."""

from __future__ import annotations

from holodesk.app.gui.app_state import AppState, StatusLine
from holodesk.app.gui.main import steps_in_words, tray_icon
from holodesk.app.gui.tray import ControlWindow


def test_stop_and_pause_are_enabled_only_while_a_task_runs(qtbot):
    control = ControlWindow(tray_icon)
    qtbot.addWidget(control.window)
    actions = control.menu_actions
    assert not actions["stop"].isEnabled() and not actions["pause"].isEnabled()
    assert not control.buttons["stop"].isEnabled()
    control.set_running(True)
    assert actions["stop"].isEnabled() and actions["pause"].isEnabled() and control.buttons["stop"].isEnabled()
    control.show_status(StatusLine(AppState.PAUSED, "pauses before the next step"))
    assert actions["pause"].text() == "Resume"
    control.set_running(False)
    assert not actions["stop"].isEnabled() and actions["pause"].text() == "Pause"


def test_a_settings_problem_stays_until_it_is_cleared(qtbot):
    control = ControlWindow(tray_icon)
    qtbot.addWidget(control.window)
    problem = "settings.toml: model.backend must be local, remote or scripted, got 'gpu'"
    control.show_settings_problem(problem)
    control.show_status(StatusLine(AppState.ERROR, "the model is not available"))  # a later message...
    control.notify("Model not available", "no GPU")
    assert control.problem_button.isVisible()  # ...does not hide it
    assert problem in control.problem_button.toolTip()
    assert control.menu_actions["settings_problem"].isVisible()
    with qtbot.waitSignal(control.show_settings, timeout=1000):
        control.problem_button.click()
    control.show_settings_problem(None)
    assert not control.problem_button.isVisible() and not control.menu_actions["settings_problem"].isVisible()


def test_steps_are_counted_in_words():
    assert [steps_in_words(n) for n in (0, 1, 2)] == ["no step taken", "1 step taken", "2 steps taken"]
