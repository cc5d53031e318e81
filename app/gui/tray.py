"""The tray icon and its menu, or a small always-on-top control window where no tray exists.

Both show the app's state (icon and tooltip, or a label) and offer the same commands; the rest of
the app talks to whichever was built through the `Indicator` signals and `show_status`. Stop and
Pause are enabled only while a task runs (`set_running`). A settings problem stays in the menu as
"Settings problem: open settings" until the user acts (`show_settings_problem`); a model that cannot
be used stays as the menu's first line, saying why and what to do, until one is ready (`show_model_problem`).

A step approved without asking (a kind the person ticked) is announced (`announce_auto_approved`)
and listed under "Approved automatically" in the menu for the rest of the run. Its balloon is held
for AUTO_APPROVED_HOLD_S, long enough to read: another notice in that time waits until the hold
ends (the next auto-approved step's balloon lists this one too, so replacing it loses nothing).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from holodesk.app.gui.app_state import AppState, StatusLine
from holodesk.app.gui.qt import FLOATING_NO_FOCUS, Qt, QtCore, QtGui, QtWidgets, Signal
from holodesk.app.gui.qt_screens import global_logical_to_screen_or_none
from holodesk.automation.coords import Rect

IconForState = Callable[[AppState], QtGui.QIcon]
CONTROL_TEXT_WIDTH = 380  # logical pixels of status text in the control window
AUTO_APPROVED_HOLD_S = 5.0  # an auto-approved step's notice stays this long before another replaces it
AUTO_APPROVED_LISTED = 20  # the menu lists the run's last this many auto-approved steps
AUTO_APPROVED_IN_BALLOON = 3  # and the balloon its last few
BALLOON_MS = 6000
ICON_PLACE_WAIT_S = 1.0  # the longest a balloon waits for the tray to place the icon it points at
ICON_PLACE_POLL_MS = 25


class Indicator(QtCore.QObject):
    """Commands the user can give from the tray or the control window."""

    new_task = Signal()
    stop = Signal()
    pause_toggled = Signal()
    show_history = Signal()
    show_settings = Signal()
    choose_model = Signal()  # the first-run window again: a model downloaded here, or a server elsewhere
    quit = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.approved_steps: list[str] = []  # this run's auto-approved steps, in words, oldest first
        self.model_problem_opens_choice = False  # no model chosen yet: the problem line opens the first-run window
        self.last_notification: tuple[str, str] = ("", "")
        self._held_until = 0.0
        self._deferred: list[tuple[str, str]] = []
        self._hold_timer = QtCore.QTimer(self)
        self._hold_timer.setSingleShot(True)
        self._hold_timer.timeout.connect(self._end_hold)

    def show_status(self, status: StatusLine) -> None:  # overridden by both indicators
        self.status = status

    def screen_windows(self) -> list[QtWidgets.QWidget]:
        """Its windows on the screen itself, which a screenshot for the model must not show (GUI thread)."""
        return []

    def show_again(self) -> None:
        """Show what a screenshot hid, once the run no longer grabs the screen (GUI thread)."""

    def own_regions(self) -> list[Rect]:
        """Where it shows on the screen without being a window a grab can hide (GUI thread)."""
        return []

    def notify(self, title: str, text: str) -> None:
        """Tell the person something; while an auto-approved step's notice is held, after it."""
        if self.holding():
            self._deferred.append((title, text))
            return
        self._show_notification(title, text)

    def _show_notification(self, title: str, text: str) -> None:  # overridden by both indicators
        self.last_notification = (title, text)

    def holding(self) -> bool:
        """Whether an auto-approved step's notice is still being read."""
        return time.monotonic() < self._held_until

    def announce_auto_approved(self, step: int, action: str) -> None:
        """A step went ahead without asking: listed in the menu, and its notice held to be read."""
        self.approved_steps = [*self.approved_steps, f"Step {step}: {action}"][-AUTO_APPROVED_LISTED:]
        menu = self.approved_menu
        menu.clear()
        for line in reversed(self.approved_steps):
            menu.addAction(line).setEnabled(False)
        menu.menuAction().setVisible(True)
        menu.setTitle(f"Approved automatically ({len(self.approved_steps)})")
        self._show_notification(
            f"Step {step} approved automatically", "\n".join(self.approved_steps[-AUTO_APPROVED_IN_BALLOON:])
        )
        self._held_until = time.monotonic() + AUTO_APPROVED_HOLD_S
        self._hold_timer.start(int(AUTO_APPROVED_HOLD_S * 1000))

    def _end_hold(self) -> None:
        if self.holding():  # a coarse timer may fire a little early: the hold is kept to the full time
            self._hold_timer.start(max(1, int((self._held_until - time.monotonic()) * 1000)))
            return
        deferred, self._deferred = self._deferred, []
        for title, text in deferred:
            self._show_notification(title, text)

    # Set by `_build_menu` when an indicator builds its menu.
    menu: QtWidgets.QMenu
    menu_actions: dict[str, QtGui.QAction]
    approved_menu: QtWidgets.QMenu  # this run's auto-approved steps, hidden while there are none
    routines_menu: QtWidgets.QMenu  # filled by the app each time it opens (app/gui/routine_runs.py)

    def set_running(self, running: bool) -> None:
        """Stop and Pause make sense only while a task runs."""
        for name in ("stop", "pause"):
            self.menu_actions[name].setEnabled(running)
        if not running:
            self.menu_actions["pause"].setText("Pause")
        else:  # a new run lists its own auto-approved steps
            self.approved_steps = []
            self.approved_menu.clear()
            self.approved_menu.menuAction().setVisible(False)

    def show_model_problem(self, line: str | None, words: str = "", *, opens_choice: bool = False) -> None:
        """Keep why no model is usable, and what to do, as the menu's first line until a model is ready.

        `line` is the menu's short form (it opens Settings, or the first-run window with `opens_choice`),
        `words` the whole explanation (its tooltip).
        """
        self.model_problem_opens_choice = opens_choice
        action = self.menu_actions["model_problem"]
        action.setVisible(line is not None)
        action.setText(line or "")
        action.setToolTip(words)
        self.model_problem = line

    def model_problem_clicked(self) -> None:
        (self.choose_model if self.model_problem_opens_choice else self.show_settings).emit()

    def show_settings_problem(self, problem: str | None) -> None:
        """Keep a settings problem in the menu (with the way to fix it) until it is gone."""
        action = self.menu_actions["settings_problem"]
        action.setVisible(problem is not None)
        action.setToolTip(problem or "")
        self.settings_problem = problem


def _build_menu(indicator: Indicator, parent: QtWidgets.QWidget | None = None) -> dict[str, QtGui.QAction]:
    menu = QtWidgets.QMenu(parent)
    menu.setToolTipsVisible(True)
    actions = {
        "model_problem": menu.addAction("", indicator.model_problem_clicked),
        "settings_problem": menu.addAction("⚠ Settings problem: open settings", indicator.show_settings.emit),
        "new_task": menu.addAction("New task", indicator.new_task.emit),
        "stop": menu.addAction("Stop", indicator.stop.emit),
        "pause": menu.addAction("Pause", indicator.pause_toggled.emit),
    }
    indicator.routines_menu = menu.addMenu("Routines")
    indicator.routines_menu.setToolTipsVisible(True)
    indicator.approved_menu = menu.addMenu("Approved automatically")
    indicator.approved_menu.menuAction().setVisible(False)
    menu.addSeparator()
    actions["history"] = menu.addAction("History", indicator.show_history.emit)
    actions["choose_model"] = menu.addAction("Choose a model…", indicator.choose_model.emit)
    actions["settings"] = menu.addAction("Settings", indicator.show_settings.emit)
    menu.addSeparator()
    actions["quit"] = menu.addAction("Quit", indicator.quit.emit)
    actions["settings_problem"].setVisible(False)
    actions["model_problem"].setVisible(False)
    for name in ("stop", "pause"):
        actions[name].setEnabled(False)  # nothing runs yet
    indicator.menu = menu
    indicator.menu_actions = actions
    return actions


class TrayIndicator(Indicator):
    """A QSystemTrayIcon whose icon and tooltip follow the state; left click opens the task prompt."""

    def __init__(self, icon_for: IconForState) -> None:
        super().__init__()
        self.icon_for = icon_for
        self._balloon: tuple[str, str, AppState] | None = None  # a balloon waiting for the icon's place
        self._balloon_deadline = 0.0
        self.pause_action = _build_menu(self)["pause"]
        self.tray = QtWidgets.QSystemTrayIcon()
        self.tray.setContextMenu(self.menu)
        self.tray.activated.connect(self._activated)
        self.show_status(StatusLine(AppState.IDLE))
        self.tray.show()

    def own_regions(self) -> list[Rect]:
        """The tray icon's place (screen pixels): its picture changes with the state, in every screenshot."""
        geometry = QtCore.QRectF(self.tray.geometry())
        if geometry.isEmpty():
            return []  # the tray does not say where the icon is
        start = global_logical_to_screen_or_none(geometry.topLeft())
        end = global_logical_to_screen_or_none(geometry.bottomRight() - QtCore.QPointF(1e-3, 1e-3))
        if start is None or end is None:
            return []
        return [Rect(start.x, start.y, end.x - start.x + 1, end.y - start.y + 1)]

    def _activated(self, reason: QtWidgets.QSystemTrayIcon.ActivationReason) -> None:
        if reason == QtWidgets.QSystemTrayIcon.ActivationReason.Trigger:
            self.new_task.emit()

    def show_status(self, status: StatusLine) -> None:
        super().show_status(status)
        self.tray.setIcon(self.icon_for(status.state))
        self.tray.setToolTip(status.tooltip())
        self.pause_action.setText("Resume" if status.state is AppState.PAUSED else "Pause")

    def _show_notification(self, title: str, text: str) -> None:
        super()._show_notification(title, text)
        self._balloon_at_icon(title, text, AppState.IDLE)

    def _balloon_at_icon(self, title: str, text: str, icon: AppState) -> None:
        self._balloon = (title, text, icon)
        self._balloon_deadline = time.monotonic() + ICON_PLACE_WAIT_S
        self._show_balloon()

    def _show_balloon(self) -> None:
        # Just after start the tray has not placed the icon yet (Qt says 22x22 at (0, 0)), and Qt's own
        # balloon (no notification daemon) would then point at the screen's top-left corner: it waits,
        # briefly, for the icon (an icon really at (0, 0) costs its balloon that wait, no more).
        if self._balloon is None:
            return
        where = self.tray.geometry()
        unplaced = where.isEmpty() or where.topLeft() == QtCore.QPoint(0, 0)
        if unplaced and time.monotonic() < self._balloon_deadline:
            QtCore.QTimer.singleShot(ICON_PLACE_POLL_MS, self._show_balloon)
            return
        (title, text, icon), self._balloon = self._balloon, None
        self.tray.showMessage(title, text, self.icon_for(icon), BALLOON_MS)

    def show_settings_problem(self, problem: str | None) -> None:
        super().show_settings_problem(problem)
        if problem is not None:  # said at start too, before the tray has placed the icon
            self._balloon_at_icon(
                "Settings problem", f"{problem}\nOpen Settings from this menu to fix it.", AppState.ERROR
            )


class ControlWindow(Indicator):
    """The tray's stand-in: a small frameless always-on-top window with the state and the commands."""

    def __init__(self, icon_for: IconForState) -> None:
        super().__init__()
        self.icon_for = icon_for
        self._status_after_hold: StatusLine | None = None  # a status that came while a notice was held
        # It never takes the keyboard: keys the user (or an action) types must not press its buttons.
        self.window = QtWidgets.QWidget(None, FLOATING_NO_FOCUS)
        self.window.setObjectName("HolodeskControl")
        self.window.setWindowTitle("Holodesk control")  # for window lists and screen readers
        self.window.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating)
        self.window.setStyleSheet(
            "#HolodeskControl { background: #1f2430; border: 1px solid #4c566a; border-radius: 6px; }"
            "QLabel { color: #eceff4; } QToolButton { color: #eceff4; background: #3b4252; border: none;"
            " padding: 3px 8px; border-radius: 4px; } QToolButton:disabled { color: #7b8394; }"
            " #problem { background: #7a4b00; color: #fff3d6; }"
        )
        layout = QtWidgets.QHBoxLayout(self.window)
        layout.setContentsMargins(6, 4, 6, 4)
        self.icon_label = QtWidgets.QLabel()
        self.text_label = QtWidgets.QLabel()
        layout.addWidget(self.icon_label)
        layout.addWidget(self.text_label, 1)
        self.pause_action = _build_menu(self, self.window)["pause"]
        self.problem_button = QtWidgets.QToolButton()
        self.problem_button.setObjectName("problem")
        self.problem_button.setText("⚠ Settings problem")
        self.problem_button.clicked.connect(self.show_settings.emit)
        self.problem_button.setVisible(False)
        layout.addWidget(self.problem_button)
        # Why no model is usable and what to do: the status line is cut to fit, this never is.
        self.model_button = QtWidgets.QToolButton()
        self.model_button.setObjectName("problem")
        self.model_button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.model_button.clicked.connect(self.model_problem_clicked)
        self.model_button.setVisible(False)
        layout.addWidget(self.model_button)
        self.buttons: dict[str, QtWidgets.QToolButton] = {}
        for name, text, signal in (("new_task", "New task", self.new_task), ("stop", "Stop", self.stop)):
            button = QtWidgets.QToolButton()
            button.setText(text)
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
            button.clicked.connect(signal.emit)
            layout.addWidget(button)
            self.buttons[name] = button
        self.buttons["stop"].setEnabled(False)
        more = QtWidgets.QToolButton()
        more.setText("⋯")
        more.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        more.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        more.setMenu(self.menu)
        layout.addWidget(more)
        self.show_status(StatusLine(AppState.IDLE))
        self.window.show()

    def show_status(self, status: StatusLine) -> None:
        super().show_status(status)
        self.icon_label.setPixmap(self.icon_for(status.state).pixmap(20, 20))
        self.pause_action.setText("Resume" if status.state is AppState.PAUSED else "Pause")
        if self.holding():  # the auto-approved notice keeps the line; the status follows it
            self._status_after_hold = status
            return
        self._set_text(status.tooltip().replace("\n", " — "), status.tooltip())

    def _show_notification(self, title: str, text: str) -> None:
        super()._show_notification(title, text)
        self._status_after_hold = None
        self._set_text(f"{title}: {text}".replace("\n", " — "), f"{title}\n{text}")

    def _end_hold(self) -> None:
        super()._end_hold()  # a notice that waited takes the line (and drops the waiting status)
        waiting = self._status_after_hold
        if not self.holding() and waiting is not None:
            self._status_after_hold = None
            self._set_text(waiting.tooltip().replace("\n", " — "), waiting.tooltip())

    def set_running(self, running: bool) -> None:
        super().set_running(running)
        self.buttons["stop"].setEnabled(running)

    def screen_windows(self) -> list[QtWidgets.QWidget]:
        return [self.window]  # "thinking — step 0" must not be in what the model reads

    def show_again(self) -> None:
        if not self.window.isVisible():
            self.window.show()  # without taking the keyboard (WA_ShowWithoutActivating)

    def show_model_problem(self, line: str | None, words: str = "", *, opens_choice: bool = False) -> None:
        super().show_model_problem(line, words, opens_choice=opens_choice)
        self.model_button.setText(line or "")
        click = "Click to choose a model." if opens_choice else "Click to open the settings."
        self.model_button.setToolTip(f"{words}\n{click}" if line else "")
        self.model_button.setVisible(line is not None)
        self._set_text(self.text_label.text(), self.window.toolTip())  # re-fit the window

    def show_settings_problem(self, problem: str | None) -> None:
        super().show_settings_problem(problem)
        self.problem_button.setVisible(problem is not None)
        self.problem_button.setToolTip(f"{problem}\nClick to open the settings and fix it." if problem else "")
        self._set_text(self.text_label.text(), self.window.toolTip())  # re-fit the window

    def _set_text(self, line: str, full: str) -> None:
        # One elided line keeps the window small and its buttons on screen; the tooltip has it all.
        metrics = self.text_label.fontMetrics()
        self.text_label.setText(metrics.elidedText(line, Qt.TextElideMode.ElideRight, CONTROL_TEXT_WIDTH))
        self.window.setToolTip(full)
        self.window.adjustSize()
        screen = QtGui.QGuiApplication.primaryScreen().availableGeometry()
        self.window.move(screen.right() - self.window.width() - 12, screen.top() + 12)


def make_indicator(icon_for: IconForState) -> Indicator:
    """The tray icon where a tray exists, otherwise the control window."""
    if QtWidgets.QSystemTrayIcon.isSystemTrayAvailable():
        return TrayIndicator(icon_for)
    return ControlWindow(icon_for)
