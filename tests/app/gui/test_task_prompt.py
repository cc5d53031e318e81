"""The task prompt: typing and Enter submit the task; recent tasks are offered and filtered."""

from __future__ import annotations

from holodesk.app.gui.qt import Qt, QtCore
from holodesk.app.gui.recent_tasks import RecentTasks
from holodesk.app.gui.task_prompt import TaskPrompt


def make_prompt(qtbot, tmp_path, *tasks):
    recent = RecentTasks(tmp_path / "recent.json")
    for task in tasks:
        recent.add(task)
    prompt = TaskPrompt(recent)
    qtbot.addWidget(prompt)
    prompt.open_near(QtCore.QPoint(300, 200))
    return prompt, recent


def test_enter_submits_the_typed_task_and_remembers_it(qtbot, tmp_path):
    prompt, recent = make_prompt(qtbot, tmp_path)
    qtbot.keyClicks(prompt.field, "Open the settings")
    with qtbot.waitSignal(prompt.submitted, timeout=1000) as signal:
        qtbot.keyClick(prompt.field, Qt.Key.Key_Return)
    assert signal.args == ["Open the settings"]
    assert recent.tasks[0] == "Open the settings"
    assert not prompt.isVisible()


def test_an_empty_task_is_not_submitted(qtbot, tmp_path):
    prompt, _ = make_prompt(qtbot, tmp_path)
    with qtbot.assertNotEmitted(prompt.submitted):
        qtbot.keyClick(prompt.field, Qt.Key.Key_Return)
    assert prompt.isVisible()


def test_recent_tasks_are_filtered_and_picked_with_the_arrow_keys(qtbot, tmp_path):
    prompt, _ = make_prompt(qtbot, tmp_path, "Archive newsletters", "Open Display settings", "Open Mail")
    assert prompt.suggestions.count() == 3
    qtbot.keyClicks(prompt.field, "open")
    assert [prompt.suggestions.item(i).text() for i in range(prompt.suggestions.count())] == [
        "Open Mail",
        "Open Display settings",
    ]
    qtbot.keyClick(prompt.field, Qt.Key.Key_Down)
    qtbot.keyClick(prompt.field, Qt.Key.Key_Down)
    assert prompt.field.text() == "Open Display settings"
    with qtbot.waitSignal(prompt.submitted, timeout=1000) as signal:
        qtbot.keyClick(prompt.field, Qt.Key.Key_Return)
    assert signal.args == ["Open Display settings"]


def test_escape_closes_without_submitting(qtbot, tmp_path):
    prompt, _ = make_prompt(qtbot, tmp_path)
    qtbot.keyClicks(prompt.field, "something")
    with qtbot.assertNotEmitted(prompt.submitted):
        qtbot.keyClick(prompt.field, Qt.Key.Key_Escape)
    assert not prompt.isVisible()
