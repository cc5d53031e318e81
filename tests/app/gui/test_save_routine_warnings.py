"""History's "Save as routine" says, before saving, which kept steps a replay cannot do by itself."""

from __future__ import annotations

from bench.rigs.routine_scenes import click_step, record_session
from holodesk.app.gui.history_window import HistoryWindow
from tests.automation.frames import solid_frame


def test_a_click_on_a_plain_background_is_a_warning_in_the_dialog(qtbot, tmp_path):
    plain = solid_frame(800, 600, (12, 12, 12))  # a terminal's background: one colour wherever clicked
    record_session(tmp_path / "sessions", "click the terminal", [(plain, click_step(400, 300, "the terminal"))], plain)
    history = HistoryWindow(tmp_path / "sessions", tmp_path / "routines")
    qtbot.addWidget(history)
    history.show()
    history.sessions.setCurrentRow(0)
    dialog = history.open_save_dialog()
    assert dialog is not None and dialog.isVisible()
    warnings = dialog.findChild(type(dialog.problem), "warnings")
    assert warnings is not None and warnings.isVisible()
    assert "step 1: its target's picture is one plain colour" in warnings.text()
    assert "only the model can find it again, from its description 'the terminal'" in warnings.text()
