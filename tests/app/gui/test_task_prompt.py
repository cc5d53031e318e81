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


def test_the_prompt_never_covers_the_point_it_opens_near(qtbot, tmp_path):
    """Opened from a tray at the bottom of the screen, it goes above the icon; at the top, below it."""
    prompt, _ = make_prompt(qtbot, tmp_path, "Archive newsletters")
    area = prompt.screen().availableGeometry()
    for point in (QtCore.QPoint(area.right() - 10, area.bottom() - 5), QtCore.QPoint(area.right() - 10, 5)):
        prompt.open_near(point)
        geometry = prompt.frameGeometry()
        assert not geometry.contains(point), (point, geometry)
        assert area.contains(geometry), (area, geometry)  # and stays on the screen
    prompt.open_near(QtCore.QPoint(area.right() - 10, area.bottom() - 5))
    assert prompt.frameGeometry().bottom() < area.bottom() - 5  # above the bottom tray


def test_the_prompt_label_is_readable(qtbot, tmp_path):
    """The label had 11 px text in a low-contrast blue; now it is body-sized, near-white and bold."""
    prompt, _ = make_prompt(qtbot, tmp_path)
    palette_colour = prompt.title.palette().color(prompt.title.foregroundRole())
    background = prompt.palette().color(prompt.backgroundRole())
    assert palette_colour.lightness() - background.lightness() > 150
    assert prompt.title.font().pixelSize() >= 14 and prompt.title.font().bold()
