"""The control window (the tray's stand-in): Stop and Pause only while running, settings problems kept."""

from __future__ import annotations

import time

from holodesk.app.gui.app_state import AppState, StatusLine
from holodesk.app.gui.main import steps_in_words, tray_icon
from holodesk.app.gui.tray import AUTO_APPROVED_HOLD_S, ControlWindow


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


def test_an_auto_approved_step_is_listed_and_held_long_enough_to_read(qtbot):
    """Its notice keeps the line for AUTO_APPROVED_HOLD_S: a status and another notice that come at once
    wait (the issue saw the next balloon replace it within 2 s); the next auto-approved step's notice
    lists both. The menu lists the run's auto-approved steps until a new run starts."""
    control = ControlWindow(tray_icon)
    qtbot.addWidget(control.window)
    control.set_running(True)
    assert not control.approved_menu.menuAction().isVisible()
    started = time.monotonic()
    control.announce_auto_approved(3, "press ctrl+a")
    control.show_status(StatusLine(AppState.ACTING, "step 3: press ctrl+a"))
    control.notify("Task finished", "done (3 steps)")
    assert control.last_notification == ("Step 3 approved automatically", "Step 3: press ctrl+a")
    assert control.text_label.text().startswith("Step 3 approved automatically")
    control.announce_auto_approved(4, "click at (5, 5)")  # lists the step before: nothing is lost
    assert control.last_notification == (
        "Step 4 approved automatically",
        "Step 3: press ctrl+a\nStep 4: click at (5, 5)",
    )
    assert [a.text() for a in control.approved_menu.actions()] == ["Step 4: click at (5, 5)", "Step 3: press ctrl+a"]
    assert control.approved_menu.menuAction().isVisible()
    qtbot.waitUntil(lambda: control.last_notification[0] == "Task finished", timeout=int(AUTO_APPROVED_HOLD_S * 3000))
    assert time.monotonic() - started >= AUTO_APPROVED_HOLD_S  # held from the last auto-approved step
    assert control.text_label.text().startswith("Task finished")
    control.set_running(True)  # a new run
    assert control.approved_steps == [] and not control.approved_menu.menuAction().isVisible()


def test_a_status_that_came_during_the_hold_is_shown_after_it(qtbot):
    control = ControlWindow(tray_icon)
    qtbot.addWidget(control.window)
    control.announce_auto_approved(1, "click at (5, 5)")
    control.show_status(StatusLine(AppState.THINKING, "step 2"))
    assert control.text_label.text().startswith("Step 1 approved automatically")
    qtbot.waitUntil(lambda: "step 2" in control.text_label.text(), timeout=int(AUTO_APPROVED_HOLD_S * 3000))
