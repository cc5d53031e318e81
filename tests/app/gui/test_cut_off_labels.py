"""Words that were cut off at a window's edge: the approval panel's tick ("...rest of this tas") and the
routine parameter dialog's title ("Routin... name")."""

from __future__ import annotations

from holodesk.app.gui.approval_panel import ApprovalPanel
from holodesk.app.gui.parameter_dialog import ask_parameter, parameter_dialog
from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.app.gui.routine_runs import APPROVE_ALL_EXACT_WORDS, RoutinePanel
from holodesk.automation.actions import Click, Point, TypeText
from holodesk.automation.routines.routine_file import Parameter, Routine
from tests.app.gui.approval_requests import approval_request


def fits(panel: ApprovalPanel) -> None:
    """The tick's label needs no more room than the panel gives it, and says all its words."""
    remember = panel.named_widgets()["remember"]
    panel._fit_height()
    assert remember.isVisible()
    assert remember.sizeHint().width() <= remember.width(), (remember.sizeHint(), remember.width(), remember.text())
    assert " ".join(remember.text().split()) == remember.toolTip()


def larger_font(panel: ApprovalPanel) -> None:
    """A desktop's larger font (the trial's was larger than the tests' default): the label must still fit."""
    panel.setStyleSheet(panel.styleSheet() + "\nQCheckBox { font-size: 15px; }")


def test_the_approve_all_kinds_tick_is_never_cut_off(qtbot):
    panel = ApprovalPanel()
    qtbot.addWidget(panel)
    larger_font(panel)
    for action in (Click(Point(10, 10)), TypeText("hello", press_enter=True)):
        panel.present(approval_request(action))
        fits(panel)
        assert panel.named_widgets()["remember"].toolTip().endswith("for the rest of this task")
    panel.retract()


def test_a_routines_approve_all_tick_is_never_cut_off(qtbot):
    panel = RoutinePanel()
    qtbot.addWidget(panel)
    larger_font(panel)
    panel.bulk_allowed[1] = True
    panel.present(approval_request(Click(Point(10, 10))))
    fits(panel)
    assert panel.named_widgets()["remember"].toolTip() == APPROVE_ALL_EXACT_WORDS
    panel.retract()


def test_the_parameter_dialog_is_wide_enough_for_its_whole_title(qtbot):
    routine = Routine("greet the newcomer in the terminal", "run echo hi", (), (Parameter("text_1", "echo hi"),))
    dialog = parameter_dialog(routine, routine.parameters[0])
    qtbot.addWidget(dialog)
    title = dialog.windowTitle()
    assert routine.name in title and "text_1" in dialog.labelText()  # the label says it too
    bold = dialog.font()
    bold.setBold(True)  # title bars draw their text bold
    needed = max(dialog.fontMetrics().horizontalAdvance(title), QtGui.QFontMetrics(bold).horizontalAdvance(title))
    dialog.show()
    assert dialog.width() >= needed + 100, (dialog.width(), needed)  # icon and buttons beside the text


def test_the_parameter_value_typed_is_returned_and_cancel_is_none(qtbot):
    routine = Routine("greet", "run echo hi", (), (Parameter("text_1", "echo hi"),))

    def answer(accept: bool) -> None:
        dialog = next(
            w
            for w in QtWidgets.QApplication.topLevelWidgets()
            if isinstance(w, QtWidgets.QInputDialog) and w.isVisible()
        )
        if accept:
            dialog.setTextValue("echo handover-value")
            dialog.accept()
        else:
            dialog.reject()

    QtCore.QTimer.singleShot(200, lambda: answer(True))
    assert ask_parameter(routine, routine.parameters[0]) == "echo handover-value"
    QtCore.QTimer.singleShot(200, lambda: answer(False))
    assert ask_parameter(routine, routine.parameters[0]) is None
