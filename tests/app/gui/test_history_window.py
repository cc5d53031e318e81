"""The history window lists sessions and steps and shows each step's screenshot with its target."""

from __future__ import annotations

from holodesk.app.gui.history_window import OUTCOME_COLOURS, HistoryWindow, step_picture
from holodesk.app.gui.qt import QtCore
from holodesk.automation.action_picture import MARKER_COLOUR
from holodesk.automation.actions import Click, Point
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


def test_window_shows_what_ran_the_decision_the_result_and_the_outcome(qtbot, tmp_path):
    from holodesk.automation.actions import AskUser, Done, TypeText

    writer = TrajectoryWriter.create(tmp_path, "Type a greeting into the terminal and tell me when it is done")
    shot = writer.save_screenshot("step-0001", solid_frame(400, 300, (20, 40, 60))).result()
    writer.append(
        {
            "type": "step",
            "index": 1,
            "decision": "edit",
            "screenshot": shot,
            "region": {"left": 0, "top": 0, "width": 400, "height": 300},
            "action_screen": TypeText("echo hello from holodesk", Point(50, 50)).to_dict(),
            "edited_screen": TypeText("echo bye", Point(50, 50)).to_dict(),
            "timings": {"total_s": 2.41, "tokens_in": 2366},
            "result": {"ok": True, "detail": "", "duration_s": 0.183},
        }
    )
    writer.append({"type": "step", "index": 2, "decision": "answered", "action_model": AskUser("Which one?").to_dict(),
                   "reply": "the first"})  # fmt: skip
    writer.append({"type": "step", "index": 3, "decision": "final", "action_model": Done("Greeted.").to_dict()})
    writer.finish("done", "Greeted.", steps=2)
    window = HistoryWindow(tmp_path)
    qtbot.addWidget(window)
    window.show()
    session_text = window.sessions.item(0).text()
    assert session_text.startswith("Type a greeting into the terminal and tell me when it is done\n")  # not clipped
    assert "· done · 2 steps" in session_text
    window.sessions.setCurrentRow(0)
    items = [window.steps.item(i).text() for i in range(window.steps.count())]
    # Two steps taken, and the answer that ended the run (not a step: no number).
    assert items == ["1. edited: type 'echo bye' at (50, 50)", "2. asked: Which one?", "Finished: Greeted."]
    window.steps.setCurrentRow(0)
    assert window.ran.text() == "Type 'echo bye' at (50, 50)"  # what ran, not the proposal
    assert window.proposed.text() == "The model proposed: type 'echo hello from holodesk' at (50, 50)"
    assert window.result.text() == "Result: ok" and "{" not in window.result.text()
    assert window.timings.text() == "model 2.4 s, 2,366 tokens in · action 0.18 s"
    assert window.picture.pixmap() is not None and not window.picture.pixmap().isNull()
    window.steps.setCurrentRow(1)
    assert window.result.text() == "You replied: the first"


def test_the_window_fits_a_small_screen_and_a_step_without_a_decision_reads_in_words(qtbot, tmp_path):
    writer = TrajectoryWriter.create(tmp_path, "Cut short")
    writer.append({"type": "step", "index": 1})  # the run ended before the model answered
    writer.finish("error", "the model could not answer")
    window = HistoryWindow(tmp_path)
    qtbot.addWidget(window)
    window.show()
    area = window.screen().availableGeometry()  # the offscreen platform's 800x600 screen
    assert area.contains(window.frameGeometry()), (area, window.frameGeometry())
    window.sessions.setCurrentRow(0)
    assert window.steps.item(0).text() == "1. nothing recorded (the run ended inside this step)"


def test_a_replay_is_listed_with_how_it_ended_and_its_outcome_colour(qtbot, tmp_path):
    """A replay's end words ("stopped at step 2 of 3") are shown, and the dot keeps the stopped colour."""
    writer = TrajectoryWriter.create(tmp_path, "ok, cancel, save")
    detail = "routine 'three' stopped at step 2 of 3 (1 of its 3 steps ran and was checked): stopped by the user"
    writer.finish("stopped", detail, steps=1, summary="stopped at step 2 of 3")
    window = HistoryWindow(tmp_path)
    qtbot.addWidget(window)
    item = window.sessions.item(0)
    assert " · stopped at step 2 of 3 · 1 step" in item.text() and detail[:60] in item.text()
    dot = item.data(QtCore.Qt.ItemDataRole.DecorationRole).toImage()
    centre = dot.pixelColor(dot.width() // 2, dot.height() // 2)
    assert centre.name() == OUTCOME_COLOURS["stopped"]
