"""The history window lists sessions and steps and shows each step's screenshot with its target."""

from __future__ import annotations

from holodesk.app.gui.history_window import HistoryWindow, step_picture
from holodesk.automation.actions import Click, Point
from holodesk.automation.annotate import MARKER_COLOUR
from holodesk.automation.trajectory import TrajectoryWriter, read_session
from tests.automation.frames import solid_frame


def record_session(root, task="Click the button"):
    writer = TrajectoryWriter.create(root, task)
    # A frame of a monitor at x=-400: the target must be drawn relative to it.
    frame = solid_frame(400, 300, (20, 40, 60), left=-400)
    shot = writer.save_screenshot("step-0001", frame).result()
    region = {"left": -400, "top": 0, "width": 400, "height": 300}
    writer.append(
        {
            "type": "step",
            "index": 1,
            "decision": "approve",
            "screenshot": shot,
            "region": region,
            "action_screen": Click(Point(-300, 100)).to_dict(),
            "action_text": "click at (-300, 100)",
            "raw_text": '{"action": "click"}',
            "note": "the OK button",
        }
    )
    writer.finish("done", "clicked")
    return writer.folder


def test_step_picture_draws_the_target_where_it_landed(tmp_path):
    folder = record_session(tmp_path)
    session = read_session(folder)
    picture = step_picture(session, session.steps[0])
    assert picture.size == (400, 300)
    # The ring of the marker passes 14 px left of the target's image position (100, 100).
    ring = [picture.getpixel((100 - 14 + dx, 100)) for dx in (-1, 0, 1)]
    assert MARKER_COLOUR in ring
    assert picture.getpixel((350, 250)) == (20, 40, 60)  # far from the marker: the screenshot itself


def test_window_lists_sessions_and_shows_the_selected_step(qtbot, tmp_path):
    record_session(tmp_path, "First task")
    record_session(tmp_path, "Second task")
    window = HistoryWindow(tmp_path)
    qtbot.addWidget(window)
    window.show()
    assert window.sessions.count() == 2
    assert window.sessions.item(0).text().startswith("Second task")  # newest first
    window.sessions.setCurrentRow(0)
    assert window.steps.count() == 1 and "click at (-300, 100)" in window.steps.item(0).text()
    window.steps.setCurrentRow(0)
    assert window.picture.pixmap() is not None and not window.picture.pixmap().isNull()
    assert '{"action": "click"}' in window.details.toPlainText()
    assert "the OK button" in window.details.toPlainText()
