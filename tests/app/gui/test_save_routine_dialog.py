"""History's "Save as routine": the dialog shows what the compiler made of a session, and saves the user's choices."""

from __future__ import annotations

import pytest

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.gui.history_window import HistoryWindow, routine_name_for
from holodesk.app.gui.qt import Qt
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.routines.save_choices import ParameterUse

OK, CANCEL, SEND = Button("OK", 100, 100), Button("Cancel", 300, 100), Button("Send", 500, 300)
TASK = "search for blue shoes and send it"


def typing(text: str) -> dict[str, object]:
    return {
        "action_model": {"kind": "type"},
        "action_screen": {"kind": "type", "text": text, "at": None, "press_enter": False, "overwrite": False},
        "element": "the search box",
        "decision": "approve",
        "result": {"ok": True, "detail": "typed"},
    }


@pytest.fixture
def history(qtbot, tmp_path):
    frame = screen([OK, CANCEL, SEND])
    record_session(
        tmp_path / "sessions",
        TASK,
        [
            (frame, click_step(*OK.centre, "the OK button")),
            (frame, click_step(*CANCEL.centre, "the Cancel button", decision="skip")),
            (frame, typing("blue shoes")),
            (frame, click_step(*SEND.centre, "the Send button")),
        ],
        end=frame,
    )
    window = HistoryWindow(tmp_path / "sessions", tmp_path / "routines")
    qtbot.addWidget(window)
    window.show()
    return window


def open_dialog(history):
    history.sessions.setCurrentRow(0)
    assert history.save_routine.isEnabled()
    dialog = history.open_save_dialog()
    assert dialog is not None and dialog.isVisible()
    return dialog


def test_the_dialog_shows_parameters_kept_steps_and_why_others_were_left_out(history):
    dialog = open_dialog(history)
    assert dialog.name.text() == routine_name_for(TASK) == "search for blue shoes and"
    (row,) = dialog.parameter_rows
    assert row.name == "search" and row.current_use() is ParameterUse.KEEP
    steps = [dialog.steps.item(i).text() for i in range(dialog.steps.count())]
    assert steps == [
        "1. click the OK button",
        "2. type the value of search",
        "3. click the Send button  (always asked: irreversible)",
    ]
    left_out = dialog.findChild(type(dialog.problem), "leftOut")
    assert left_out is not None and "step 2: it was not performed (decision: skip)" in left_out.text()


def test_save_writes_the_routine_with_a_renamed_parameter(history, tmp_path):
    dialog = open_dialog(history)
    dialog.name.setText("shoes")
    row = dialog.parameter_rows[0]
    assert not row.new_name.isVisibleTo(dialog)  # the name field appears only for "Rename to:"
    row.set_use(ParameterUse.RENAME)
    assert row.new_name.isVisibleTo(dialog)
    row.new_name.setText("query")
    dialog.save_button.click()
    assert dialog.result() == dialog.DialogCode.Accepted and dialog.saved == tmp_path / "routines" / "shoes"
    routine = load_routine(tmp_path / "routines" / "shoes")
    assert [(p.name, p.default) for p in routine.parameters] == [("query", "blue shoes")]
    assert [s.text_parameter for s in routine.steps] == ["", "query", ""]
    assert "Saved the routine in" in history.routine_status.text()


def test_a_literal_parameter_and_an_unticked_step_are_saved_as_chosen(history, tmp_path):
    dialog = open_dialog(history)
    dialog.name.setText("no send")
    row = dialog.parameter_rows[0]
    row.set_use(ParameterUse.LITERAL)
    dialog.steps.item(2).setCheckState(Qt.CheckState.Unchecked)  # leave out "click the Send button"
    dialog.save_button.click()
    routine = load_routine(tmp_path / "routines" / "no send")
    assert routine.parameters == ()
    assert [s.describe() for s in routine.steps] == ["click the OK button", "type 'blue shoes'"]


def test_a_bad_name_or_a_taken_one_is_said_and_nothing_is_written(history, tmp_path):
    dialog = open_dialog(history)
    dialog.name.setText("../escape")
    dialog.save_button.click()
    assert dialog.isVisible() and dialog.problem.isVisible()
    assert "a routine's name is 1 to 64 letters" in dialog.problem.text()
    assert not (tmp_path / "routines").exists()

    (tmp_path / "routines" / "taken").mkdir(parents=True)
    dialog.name.setText("taken")
    dialog.save_button.click()
    assert dialog.isVisible() and "a routine named 'taken' already exists" in dialog.problem.text()
    assert list((tmp_path / "routines" / "taken").iterdir()) == []


def test_two_parameters_renamed_alike_are_refused(history):
    dialog = open_dialog(history)
    row = dialog.parameter_rows[0]
    row.set_use(ParameterUse.RENAME)
    row.new_name.setText("Bad Name")
    dialog.save_button.click()
    assert "'Bad Name' cannot name a parameter" in dialog.problem.text()
