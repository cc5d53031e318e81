"""A routine replayed in the tray app: the agent's overlay and approval panel, and the Routines menu.

A replay is a run of the step engine (automation.routines.replay); `GuiRoutineApprover` is its
approver on the GUI, for both kinds of step. A routine's step is asked through a `GuiApprover` of
its own (the same overlay, a `RoutinePanel`): the marker shows where the step's target was found,
the panel says how it was found and why it is asked. Where the engine's approval rules let "approve
all" cover the step (found exactly where recorded, typing nothing) the panel's tick reads "approve
this and every later step found exactly" (Decision.APPROVE_ALL_EXACT); on any other step the tick
is hidden. Edit is offered as on the agent's steps and as the terminal's `e` is: the edited step
runs, and the replay judges its effect as the recorded step's. Every request
carries its own cancel token (linked to the run's), so that GuiApprover never approves a step by a
choice of its own. After "continue with the agent", the agent's steps go to the app's own approver,
as in any task.

A problem (target not found, effect missing) and a repair are asked in a small window on the GUI
thread; while a repair waits, the overlay shows where the model located the target, and the window
shows the routine's change as a diff. Every wait ends when the run is stopped.

`fill_routines_menu` lists the saved routines in the tray's Routines submenu: run one, or open its
folder; a routine with a hotkey shows it, or why it is not bound.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from holodesk.app.common.routine_hotkeys import RoutineHotkeys
from holodesk.app.common.session_words import hotkey_in_words, steps_in_words
from holodesk.app.gui.approval_panel import ApprovalPanel
from holodesk.app.gui.focused_area import TypingPlace
from holodesk.app.gui.gui_approver import GuiApprover
from holodesk.app.gui.gui_thread import GuiThreadCaller
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets
from holodesk.automation.actions import Action
from holodesk.automation.cancel import CancelToken
from holodesk.automation.display_text import safe_text
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, QuestionRequest
from holodesk.automation.routines.replay import ProblemChoice, ProblemRequest, RepairRequest, RoutinePolicy
from holodesk.automation.routines.routine_file import Routine, RoutineFileError, load_routine, routine_folders

POLL_S = 0.02
APPROVE_ALL_EXACT_WORDS = "Approve this and every later exact step that types nothing"


class LinkedCancel(CancelToken):
    """A token for one request: cancelled when the run's token is, or by itself."""

    def __init__(self, run: CancelToken) -> None:
        super().__init__()
        self.run = run

    @property
    def cancelled(self) -> bool:
        return self.run.cancelled or super().cancelled


class RoutinePanel(ApprovalPanel):
    """The approval panel, worded for a routine's step: its tick approves the exact steps that follow."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.bulk_allowed: dict[int, bool] = {}  # step -> whether "approve all exact" may be offered

    def present(
        self,
        request: ApprovalRequest,
        typing_place: TypingPlace | None = None,
        overlay_drawn: Sequence[QtCore.QRect] = (),
    ) -> None:
        super().present(request, typing_place, overlay_drawn)
        allowed = self.bulk_allowed.get(request.step, False)
        self.set_remember_text(APPROVE_ALL_EXACT_WORDS)
        self._remember.setEnabled(allowed)
        self._remember.setVisible(allowed)  # otherwise the highlighted line says why it is asked alone
        self._remember_note.setVisible(False)  # the highlighted line says it for a routine's step
        self._fit_height()


def why_asked_in_words(request: ApprovalRequest) -> str:
    """The panel's highlighted line: why this routine step is asked on its own; empty when "approve all"
    could cover it."""
    if request.may_approve_all:
        return ""
    why = request.why_asked
    return why[:1].upper() + why[1:]  # the engine's words: "found by the model (...): shown on its own"


class GuiRoutineApprover:
    """The replay's approver on the GUI (and what only a routine asks); call it from the engine's threads."""

    def __init__(
        self, overlay: OverlayController, panel: RoutinePanel | None = None, agent: GuiApprover | None = None
    ) -> None:
        self.overlay = overlay
        self.panel = panel or RoutinePanel()
        self.steps = GuiApprover(overlay, self.panel)
        self.agent = agent or self.steps  # the app's approver, for the agent's steps after a hand-over
        self._gui = GuiThreadCaller()
        self.window: QtWidgets.QMessageBox | None = None  # the problem or repair question shown now
        self.replaying: RoutinePolicy | None = None  # the replay running now (its hand-over is said)
        # Called on the GUI thread as a question window opens: the run now waits for the person, not
        # for a model (the app hides its "thinking" status).
        self.question_shown: Callable[[], object] | None = None

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        grounding = request.proposal.grounding
        if grounding is None:  # the agent's step, after "continue with the agent": said whose it is
            said = self.replaying.handed_over_words if self.replaying is not None else ""
            if said:
                request = dataclasses.replace(request, adjustment="\n".join(filter(None, [said, request.adjustment])))
            return self.agent.decide(request)
        self.panel.bulk_allowed[request.step] = request.may_approve_all
        token = LinkedCancel(request.cancel)
        decision = self.steps.decide(
            dataclasses.replace(request, cancel=token, adjustment=why_asked_in_words(request) or request.adjustment)
        )
        ticked = request.action.kind in self.steps.task_auto_approve_kinds
        if decision.decision is Decision.APPROVE and ticked and request.may_approve_all:
            return ApprovalDecision(Decision.APPROVE_ALL_EXACT)
        return decision  # approve, skip, stop, or an edit: the edited step runs, as the terminal's `e` allows

    def answer_question(self, request: QuestionRequest) -> str | None:
        """The agent's question after a hand-over, on the app's panel."""
        return self.agent.answer_question(request)

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        choices: list[tuple[str, object]] = [
            ("Retry the check" if request.effect_missing else "Look again", ProblemChoice.RETRY)
        ]
        if request.effect_missing:
            choices.append(("Go on", ProblemChoice.CONTINUE))
        choices += [("Continue with the agent", ProblemChoice.HAND_OVER), ("Stop", ProblemChoice.STOP)]
        title = f"Routine {request.routine.name!r}: step {request.step.number} needs you"
        # One sentence, then what each choice does; how each way of looking fared is under Show Details.
        text = f"{safe_text(request.problem[:1].upper() + request.problem[1:])}.\n\n{_choices_words(request)}"
        answer = self._ask(title, text, safe_text(request.detail), choices, request.cancel, None)
        return answer if isinstance(answer, ProblemChoice) else ProblemChoice.STOP

    def offer_repair(self, request: RepairRequest) -> bool:
        point = request.located.point
        recorded = request.step.target.point if request.step.target is not None else (point.x, point.y)
        where = (
            "where it was recorded"
            if recorded == (point.x, point.y)
            else f"at ({point.x}, {point.y}) instead of ({recorded[0]}, {recorded[1]})"
        )
        text = (
            f"Step {request.step.number} ({safe_text(request.step.describe())}): its recorded pictures no longer"
            f" match; {request.located.rung.value} found it at ({point.x}, {point.y}), marked on the screen, and"
            " the step ran as expected.\n\nWrite this into the routine? The step will look for its target"
            f" {where}, with new pictures taken from this screen. The previous version is kept in the"
            " routine's revisions folder; Show Details has the change to the file."
        )
        title = f"Repair the routine {request.routine.name!r}?"
        shown = request.step.action.map_points(lambda _: point)
        answer = self._ask(
            title,
            text,
            request.repair.diff,
            [("Write the repair", True), ("Keep the routine as it is", False)],
            request.cancel,
            (request.step.number, shown),
        )
        return answer is True

    def _ask(
        self,
        title: str,
        text: str,
        details: str,
        choices: list[tuple[str, object]],
        cancel: CancelToken | None,
        marker: tuple[int, Action] | None,
    ) -> object:
        """A question window on the GUI thread; blocks this thread until answered (None when stopped)."""
        done = threading.Event()
        answer: list[object] = []

        def show() -> None:
            box = QtWidgets.QMessageBox()
            box.setObjectName("routineQuestion")
            box.setWindowTitle(title)
            box.setText(text)
            box.setIcon(QtWidgets.QMessageBox.Icon.Question)
            if details:
                box.setDetailedText(details)
                for shown in box.findChildren(QtWidgets.QTextEdit):  # the diff: room and a fixed-width font
                    shown.setMinimumSize(620, 260)
                    shown.setFont(QtGui.QFontDatabase.systemFont(QtGui.QFontDatabase.SystemFont.FixedFont))
            buttons: dict[QtWidgets.QAbstractButton, object] = {}
            for words, value in choices:
                button = box.addButton(words, QtWidgets.QMessageBox.ButtonRole.ActionRole)
                buttons[button] = value
            box.setWindowFlag(QtCore.Qt.WindowType.WindowStaysOnTopHint)
            if marker is not None:
                self.overlay.show_proposal(marker[0], marker[1], editable=False)

            def finished() -> None:
                answer.append(buttons.get(box.clickedButton()))
                buttons.clear()
                self.overlay.clear()
                self.window = None
                box.deleteLater()  # parentless: one window per question, not one per run kept alive
                QtGui.QGuiApplication.sync()
                done.set()

            box.finished.connect(lambda _: finished())
            self.window = box
            box.open()
            if self.question_shown is not None:
                self.question_shown()

        self._gui.post(show)
        while not done.wait(POLL_S):
            if cancel is not None and cancel.cancelled:
                self._gui.post(lambda: self.window.reject() if self.window is not None else None)
                done.wait(1.0)
                return None
        return answer[0] if answer else None


def _choices_words(request: ProblemRequest) -> str:
    """What each of the question's buttons does, in a line each."""
    lines = [
        # Not "after you fixed it": a retry only looks again, so a fix by hand is "Go on", not a retry.
        "Retry the check: look for the step's effect once more; the step is not run again (for a slow program)."
        if request.effect_missing
        else "Look again: after you fixed the screen (brought the window back, for one)."
    ]
    if request.effect_missing:
        last = request.step.number == len(request.routine.steps)
        then = "it was the last step, so the routine is done" if last else "the routine goes on with the next one"
        lines.append(f"Go on: the step did what it should; {then}.")
    lines += [
        "Continue with the agent: the model takes over this run, told what the routine did and what is left.",
        "Stop: end the run here.",
    ]
    return "\n".join(lines)


def hotkey_entry_words(routine: Routine, hotkeys: RoutineHotkeys, through_desktop: bool) -> str | None:
    """The menu's line for a routine's hotkey: its keys, or why they are not bound; None without one."""
    if not routine.hotkey:
        return None
    why = hotkeys.refused.get(routine.name)
    if why is not None:
        return f"⚠ Hotkey not bound: {why}"
    words = hotkey_in_words(routine.hotkey)
    if hotkeys.hotkey_of(routine.name) != routine.hotkey:
        return f"Hotkey {words}: not bound yet (Holodesk binds it when this menu opens)"
    if through_desktop:
        return f"Hotkey: {words}, asked of the desktop (its shortcut settings show the keys it gave)"
    return f"Hotkey: {words}"


def fill_routines_menu(
    menu: QtWidgets.QMenu,
    root: Path,
    run: Callable[[str], None],
    open_folder: Callable[[Path], None],
    hotkeys: RoutineHotkeys | None = None,
    through_desktop: bool = False,
) -> None:
    """The saved routines under `root`, each with Run, its hotkey and Open its folder (a broken one says why).

    `hotkeys` is what is bound now; `through_desktop`: bound through the desktop portal (Wayland)."""
    menu.clear()
    folders = routine_folders(root)
    if not folders:
        empty = menu.addAction("No routines yet: History, then Save as routine")
        empty.setEnabled(False)
        return
    for folder in folders:
        try:
            routine = load_routine(folder)
        except Exception as exc:  # whatever breaks one routine, the others are still in the menu
            problem = exc.problems[0] if isinstance(exc, RoutineFileError) else f"{type(exc).__name__}: {exc}"
            broken = menu.addMenu(f"⚠ {folder.name}")
            broken.setToolTipsVisible(True)
            why = broken.addAction(f"Cannot be read: {safe_text(problem)}")
            why.setEnabled(False)
            broken.addAction("Open its folder", functools.partial(open_folder, folder))
            continue
        sub = menu.addMenu(routine.name)
        sub.setToolTip(safe_text(routine.task))
        sub.addAction(f"Run ({steps_in_words(len(routine.steps))})", functools.partial(run, routine.name))
        hotkey_words = hotkey_entry_words(routine, hotkeys or RoutineHotkeys(), through_desktop)
        if hotkey_words is not None:
            sub.addAction(safe_text(hotkey_words)).setEnabled(False)
        sub.addAction("Open its folder", functools.partial(open_folder, folder))


def open_in_file_manager(folder: Path) -> None:
    QtGui.QDesktopServices.openUrl(QtCore.QUrl.fromLocalFile(str(folder)))
