"""The tray app's Approver: the engine thread asks, the overlay and the panel show, the user answers.

`decide()` runs on the engine's thread. It hands the request to the GUI thread through a queued
signal, where the overlay draws the target and the panel asks; then it waits on a threading.Event,
looking at `request.cancel` every 20 ms, so a stop is answered within the engine's 100 ms promise.
The panel and overlay are hidden on the GUI thread, and the window system has confirmed it (a round
trip), before `decide()` returns: the action never lands on the panel, and keystrokes never go to it.

Keys: while a step waits, on X11, Enter and Esc are grabbed (app/gui/key_grab.py) so that they
answer the panel and never reach the user's focused window, whichever window that is; the grab is
released when the panel is withdrawn, before the action runs, and while the task prompt is open
(`set_keys_suspended`): Enter there submits the prompt, never approves the waiting step. When the
answer is a stop (Esc, the Stop button, or the stop gesture while the step waits), the keys are kept
for the stop gesture's window after it (`stop_gesture_s`, and while a grabbed key is still down): the
second Esc of "Esc twice" comes after the first has already stopped the run, and must not reach the
user's window either (it would cancel their dialog). No action follows a stop, so nothing of ours
needs the keys then. In a
Wayland session no grab can keep them from the user's window, so there the panel offers no keys
(answer_keys_grabbed).

Auto-approval is opt-in: the kinds the user chose in the settings, plus the kinds ticked "approve
this kind for the rest of this task" (forgotten when the engine starts a new run, which it does with
a new CancelToken). Which steps a ticked kind covers is not decided here: the approver asks the
same approval rule object the engine asks for "approve all" (automation/auto_approval.py), which
always shows a step with a loop warning, an Enter in any disguise, a paste, an irreversible step.

Questions from the model (`answer_question`) take the same road: the panel shows the question with a
reply field, and the reply (or None, when the user stops) goes back to the engine thread.

Wiring, on the GUI thread at start-up (the engine thread then calls `frames.grab()` and
`approver.decide()`; both hop to the GUI thread themselves):

    overlay = OverlayController()
    approver = GuiApprover(overlay, auto_approve_kinds=settings_kinds)  # empty unless the user chose
    frames = OwnWindowsHiddenCapture(ScreenCapture(), overlay=overlay)  # the model never sees the overlay
    engine = StepEngine(policy, approver, performer, frames, engine_settings, listener, questions=approver)
    engine.start(task)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from holodesk.app.common.hotkey_path import is_wayland_session
from holodesk.app.gui.approval_panel import ApprovalPanel
from holodesk.app.gui.focused_area import TypingPlace, typing_place
from holodesk.app.gui.gui_thread import GuiCallTimeout, GuiThreadCaller
from holodesk.app.gui.hotkeys import DOUBLE_PRESS_WINDOW_S
from holodesk.app.gui.key_grab import ANSWER_KEYSYMS, KeyGrab
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import QtCore, QtGui, Signal
from holodesk.app.gui.qt_screens import use_engine_layout
from holodesk.automation.actions import Action, HoldAndTap, KeyCombo, TypeText
from holodesk.automation.auto_approval import AUTO_APPROVAL, AutoApproval
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, QuestionRequest

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often a waiting decide() looks at the cancel token
HELD_KEY_WAIT_S = 2.0  # after the gesture window, how long a key still held keeps the keys (then they go)


@dataclass
class _Pending:
    """One request on its way through the GUI; `done` is set once `decision` is final."""

    request: ApprovalRequest
    done: threading.Event = field(default_factory=threading.Event)
    decision: ApprovalDecision | None = None
    remember_kind: bool = False
    abandoned: bool = False  # decide() gave up (cancelled): the GUI must not show it any more


@dataclass
class _PendingQuestion:
    """One question on its way through the GUI; `done` is set once `reply` is final (None: stop)."""

    request: QuestionRequest
    done: threading.Event = field(default_factory=threading.Event)
    reply: str | None = None
    abandoned: bool = False


def answer_keys_grabbed(platform_name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether Enter and Esc can be grabbed for the panel while a step waits: on X11 only. In a Wayland
    session Qt runs on XWayland ("xcb" too), but an X grab there hears only keys typed into XWayland
    windows; the user's native window would take them, so the panel is answered with its buttons."""
    return platform_name == "xcb" and not is_wayland_session(environ)


class GuiApprover(QtCore.QObject):
    """Implements automation.engine_protocols.Approver with the overlay and the approval panel.

    Create it on the GUI thread; call `decide` from the engine's thread.

    Signals:
      auto_approved(int, str): a step went ahead without asking (step, the action in words).
    """

    auto_approved = Signal(int, str)
    _present = Signal(object)
    _ask = Signal(object)
    _grabbed_key = Signal(str)  # from the key grab's thread

    def __init__(
        self,
        overlay: OverlayController,
        panel: ApprovalPanel | None = None,
        auto_approve_kinds: Iterable[str] = (),
        parent: QtCore.QObject | None = None,
        *,
        auto_approval: AutoApproval = AUTO_APPROVAL,
    ) -> None:
        super().__init__(parent)
        self.auto_approval = auto_approval  # the rule; give it the engine's (automation/auto_approval.py)
        self.overlay = overlay
        self.panel = panel or ApprovalPanel()
        self._gui = GuiThreadCaller(self)
        self._lock = threading.Lock()
        self._settings_kinds = frozenset(auto_approve_kinds)
        self._task_kinds: set[str] = set()
        self._task_token: CancelToken | None = None
        self._pending: _Pending | None = None  # GUI thread only
        self._typing_place: TypingPlace | None = None  # where the pending step's keys go (see _keys_place)
        self._question: _PendingQuestion | None = None  # GUI thread only
        self._keys_suspended = False  # GUI thread only: another Holodesk window has Enter and Esc
        self.stop_gesture_s = DOUBLE_PRESS_WINDOW_S  # the stop gesture's window (the settings' stop.within_s)
        self._keys_kept_until: float | None = None  # GUI thread only: after a stop, the keys stay ours until then
        self._keys_held_limit = 0.0  # GUI thread only: and no longer than this, even with a key still down
        # Called on the GUI thread with each approved action before the engine may perform it (the
        # app then takes the stop key for the action's time, unless the action presses it itself).
        self.before_action: Callable[[Action], None] | None = None
        self._present.connect(self._on_present, QtCore.Qt.ConnectionType.QueuedConnection)
        self._ask.connect(self._on_ask, QtCore.Qt.ConnectionType.QueuedConnection)
        self._grabbed_key.connect(self._on_grabbed_key, QtCore.Qt.ConnectionType.QueuedConnection)
        keys_grabbed = answer_keys_grabbed(QtGui.QGuiApplication.platformName())
        self._key_grab = KeyGrab(ANSWER_KEYSYMS, self._grabbed_key.emit) if keys_grabbed else None
        self.panel.set_key_hints(keys_grabbed)
        self.panel.decided.connect(self._on_decided)
        self.panel.replied.connect(self._on_replied)
        self.panel.action_edited.connect(self._on_panel_edit)
        overlay.target_edited.connect(self.panel.set_action)

    # -- settings --

    def set_auto_approve_kinds(self, kinds: Iterable[str]) -> None:
        """The action kinds the user's settings approve without asking (any thread)."""
        with self._lock:
            self._settings_kinds = frozenset(kinds)

    @property
    def task_auto_approve_kinds(self) -> frozenset[str]:
        """The kinds approved "for the rest of this task" in the current run."""
        with self._lock:
            return frozenset(self._task_kinds)

    # -- the Approver protocol (engine thread) --

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        if self._gui.on_gui_thread():
            raise RuntimeError("GuiApprover.decide() waits for the GUI; call it from the engine's thread")
        if request.cancel.cancelled:
            return ApprovalDecision.stop()
        if self._auto_approves(request):
            self.auto_approved.emit(request.step, request.action.describe())
            if self.before_action is not None:
                try:
                    self._gui.call(lambda: self._before_action(request.action))  # before the engine acts
                except GuiCallTimeout:
                    log.warning("the GUI thread did not answer before an automatically approved step")
            return ApprovalDecision.approve()

        pending = _Pending(request)
        self._present.emit(pending)
        while not pending.done.wait(POLL_S):
            if request.cancel.cancelled:
                # Answer now; the GUI hides the panel when it gets to it.
                pending.abandoned = True
                self._gui.post(lambda: self._withdraw(pending, stopping=True))
                return ApprovalDecision.stop()
        decision = pending.decision
        assert decision is not None
        if request.cancel.cancelled:
            return ApprovalDecision.stop()
        if pending.remember_kind and decision.decision in (Decision.APPROVE, Decision.EDIT):
            with self._lock:
                if request.cancel is self._task_token:
                    self._task_kinds.add(request.action.kind)
        return decision

    def answer_question(self, request: QuestionRequest) -> str | None:
        """Put the model's question to the user on the panel; the reply, or None if the user stops."""
        if self._gui.on_gui_thread():
            raise RuntimeError("GuiApprover.answer_question() waits for the GUI; call it from the engine's thread")
        if request.cancel.cancelled:
            return None
        pending = _PendingQuestion(request)
        self._ask.emit(pending)
        while not pending.done.wait(POLL_S):
            if request.cancel.cancelled:
                pending.abandoned = True
                self._gui.post(lambda: self._withdraw_question(pending))
                return None
        return None if request.cancel.cancelled else pending.reply

    def _auto_approves(self, request: ApprovalRequest) -> bool:
        with self._lock:
            if request.cancel is not self._task_token:  # a new run: forget the last task's choices
                self._task_token = request.cancel
                self._task_kinds = set()
            # The one approval rule, asked again here rather than trusted from the request's fields
            # (anyone can build a request); the request's irreversible can only add to what it says.
            rule = self.auto_approval.assess(request.action, request.proposal.grounding)
            return self.auto_approval.kinds_cover(
                request.action,
                rule,
                self._settings_kinds | self._task_kinds,
                looping=bool(request.loop_warning),
                said_irreversible=request.irreversible,
            )

    # -- GUI thread --

    def _on_present(self, pending: _Pending) -> None:
        if pending.abandoned:
            return
        if self._pending is not None:  # cannot happen with one engine; never leave a waiter hanging
            self._finish(self._pending, ApprovalDecision.stop(), False)
        self._pending = pending
        request = pending.request
        use_engine_layout(request.frame.monitors)  # the marker lands on the capture's pixel (qt_screens)
        self._typing_place = self._keys_place(request.action)
        self.overlay.show_proposal(request.step, request.action, typing_place=self._typing_place)
        self.panel.present(request, self._typing_place, self.overlay.drawn_rects())
        self._keys_kept_until = None  # the step's own grab now, for as long as it waits
        if self._key_grab is not None and not self._keys_suspended:
            self._key_grab.start()

    def _keys_place(self, action: Action) -> TypingPlace | None:
        """Where the keys of a step without a target point go (the focused window and its caret, X11), for
        the panel and the overlay to keep clear; None for pointer steps and where it is not known."""
        if action.points() or not isinstance(action, TypeText | KeyCombo | HoldAndTap):
            return None
        if QtGui.QGuiApplication.platformName() != "xcb":
            return None
        own = frozenset(int(widget.winId()) for widget in (self.panel, *self.overlay.windows()))
        return typing_place(own)

    def set_keys_suspended(self, suspended: bool) -> None:
        """Give Enter and Esc back while another Holodesk window needs them (the task prompt is open).

        A step that waits keeps waiting; its keys are grabbed again once the window is gone.
        """
        self._keys_suspended = suspended
        if self._key_grab is None:
            return
        if suspended:
            self._keys_kept_until = None
            self._key_grab.stop()
        elif self._pending is not None:
            self._key_grab.start()

    def _on_grabbed_key(self, key: str) -> None:
        if self._pending is not None:
            self.panel.answer_with_key(key)
        elif self._keys_kept_until is not None and key == "esc":
            # A further Esc of the gesture, taken from the user's window: the window runs on from it.
            self._keys_kept_until = time.monotonic() + self.stop_gesture_s

    def _on_ask(self, pending: _PendingQuestion) -> None:
        if pending.abandoned:
            return
        if self._pending is not None:
            self._finish(self._pending, ApprovalDecision.stop(), False)
        if self._question is not None:
            self._withdraw_question(self._question)
        self._question = pending
        self.overlay.clear()
        self.panel.present_question(pending.request)

    def _on_replied(self, reply: str | None) -> None:
        pending = self._question
        if pending is None:
            return
        pending.reply = reply
        self._withdraw_question(pending)  # hidden first, then `done`: the engine may act at once

    def _withdraw_question(self, pending: _PendingQuestion) -> None:
        if self._question is not pending:
            return
        self._question = None
        self.panel.retract()
        QtGui.QGuiApplication.sync()
        pending.done.set()  # a replaced question must not leave its asker waiting

    def _on_decided(self, decision: ApprovalDecision, remember_kind: bool) -> None:
        pending = self._pending
        if pending is not None:
            self._finish(pending, decision, remember_kind)

    def _on_panel_edit(self, action: Action) -> None:
        pending = self._pending
        if pending is not None:
            self.overlay.show_proposal(pending.request.step, action, typing_place=self._typing_place)

    def _finish(self, pending: _Pending, decision: ApprovalDecision, remember_kind: bool) -> None:
        # Hidden and confirmed by the window system first: the engine acts as soon as `done` is set.
        self._withdraw(pending, stopping=decision.decision is Decision.STOP)
        if decision.decision in (Decision.APPROVE, Decision.EDIT, Decision.APPROVE_ALL_EXACT):
            self._before_action(decision.action or pending.request.action)
        pending.decision = decision
        pending.remember_kind = remember_kind
        pending.done.set()

    def _before_action(self, action: Action) -> None:
        if self.before_action is not None:
            try:
                self.before_action(action)
            except Exception:  # the step goes on; only the stop key's grab is at stake
                log.exception("preparing the keys for an action failed")

    def _withdraw(self, pending: _Pending, stopping: bool = False) -> None:
        if self._pending is not pending:
            return
        self._pending = None
        if self._key_grab is not None:
            if stopping and self._key_grab.active:
                self._keep_keys_after_stop()
            else:
                self._key_grab.stop()
        self.panel.retract()
        self.overlay.clear()
        QtGui.QGuiApplication.sync()

    def _keep_keys_after_stop(self) -> None:
        """Keep the answer keys for the stop gesture's window, then give them back (`_give_keys_back`)."""
        now = time.monotonic()
        self._keys_kept_until = now + self.stop_gesture_s
        self._keys_held_limit = now + self.stop_gesture_s + HELD_KEY_WAIT_S
        QtCore.QTimer.singleShot(int(self.stop_gesture_s * 1000) + 1, self._give_keys_back)

    def _give_keys_back(self) -> None:
        if self._keys_kept_until is None or self._key_grab is None or self._pending is not None:
            return  # suspended meanwhile, or a new step holds the keys for itself
        now = time.monotonic()
        waiting = now < self._keys_kept_until or (self._key_grab.held and now < self._keys_held_limit)
        if waiting:
            # Released now, a key that is down would send its release to the user's window.
            later = max(self._keys_kept_until - now, 0.05)
            QtCore.QTimer.singleShot(int(later * 1000) + 1, self._give_keys_back)
            return
        self._keys_kept_until = None
        self._key_grab.stop()
