"""The question a routine's parameter asks before a run from the tray: its value, or no run.

A plain QInputDialog sizes itself to its field, and a window manager then cuts its title ("Routin...
name"): the dialog is made wide enough for the whole title (within the screen), and the label says
which routine and which value, so nothing needed is only in the title.
"""

from __future__ import annotations

from holodesk.app.gui.qt import QtGui, QtWidgets
from holodesk.automation.routines.routine_file import Parameter, Routine

TITLE_ALLOWANCE = 160  # pixels of a title bar that are not its text: icon and buttons, with room to spare
MIN_WIDTH = 420
FRAME = 40  # the dialog's margins around its field


def parameter_dialog(routine: Routine, parameter: Parameter) -> QtWidgets.QInputDialog:
    dialog = QtWidgets.QInputDialog()
    title = f"Run the routine {routine.name!r}"
    dialog.setWindowTitle(title)
    what = f" ({parameter.description})" if parameter.description else ""
    dialog.setLabelText(f"The value of {parameter.name}{what} for this run:")
    dialog.setTextValue(parameter.default)
    # The dialog's layout fixes its size from its contents (a minimum width on the dialog itself is
    # overridden): the field is what is made wide.
    field = dialog.findChild(QtWidgets.QLineEdit)
    if isinstance(field, QtWidgets.QLineEdit):
        field.setMinimumWidth(wide_enough(title, dialog.fontMetrics()) - FRAME)
    return dialog


def wide_enough(title: str, metrics: QtGui.QFontMetrics) -> int:
    """A width that shows `title` whole in a title bar (a bold title font is about 10 % wider), at
    most the screen's."""
    width = max(MIN_WIDTH, int(metrics.horizontalAdvance(title) * 1.15) + TITLE_ALLOWANCE)
    screen = QtGui.QGuiApplication.primaryScreen()
    return min(width, screen.availableGeometry().width() - 40) if screen is not None else width


def ask_parameter(routine: Routine, parameter: Parameter) -> str | None:
    """The value typed for `parameter`, or None when the person cancelled."""
    dialog = parameter_dialog(routine, parameter)
    if dialog.exec() != QtWidgets.QDialog.DialogCode.Accepted:
        return None
    return dialog.textValue()
