"""GuiApprover: an engine-like thread asks, the test answers on the panel, decide() returns that answer.

Runs in this process on Qt's offscreen platform with real queued signals between the two threads.
(The same flow on a real X display, with xdotool clicks and keys, is in test_approval_panel.py.)
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from holodesk.app.gui.gui_approver import GuiApprover, answer_keys_grabbed
from holodesk.app.gui.overlay import HANDLE_RADIUS, MarkerHandle, OverlayController
from holodesk.app.gui.qt import Qt, QtCore
from holodesk.automation.actions import Action, Click, Drag, HoldAndTap, KeyCombo, MouseButton, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision
from tests.app.gui.approval_requests import approval_request

LOOPING = "the same action was proposed 3 times on a screen that did not change"


@pytest.fixture
def approver(qtbot) -> Iterator[GuiApprover]:  # type: ignore[no-untyped-def]
    overlay = OverlayController()
    gui_approver = GuiApprover(overlay)
    qtbot.addWidget(gui_approver.panel)
    yield gui_approver
    gui_approver.panel.retract()
    overlay.clear()


class EngineThread:
    """Calls decide() the way the engine does: on its own thread."""

    def __init__(self, approver: GuiApprover, request: ApprovalRequest) -> None:
        self.result: Future[ApprovalDecision] = Future()
        self.returned_at = 0.0

        def run() -> None:
            try:
                self.result.set_result(approver.decide(request))
            except BaseException as exc:
                self.result.set_exception(exc)
            self.returned_at = time.monotonic()

        threading.Thread(target=run, daemon=True).start()

    def decision(self, qtbot, timeout_s: float = 3.0) -> ApprovalDecision:  # type: ignore[no-untyped-def]
        qtbot.waitUntil(self.result.done, timeout=int(timeout_s * 1000))
        return self.result.result()


def ask(qtbot, approver: GuiApprover, request: ApprovalRequest) -> EngineThread:  # type: ignore[no-untyped-def]
    """Start decide() on another thread and wait until the panel asks."""
    engine = EngineThread(approver, request)
    qtbot.waitUntil(approver.panel.isVisible, timeout=3000)
    return engine


def click(qtbot, approver: GuiApprover, name: str) -> None:  # type: ignore[no-untyped-def]
    qtbot.mouseClick(approver.panel.named_widgets()[name], Qt.MouseButton.LeftButton)


def answered_without_asking(approver: GuiApprover, action: Action, **request: object) -> ApprovalDecision:
    """decide() for a step that must not show the panel: it returns on the calling thread at once."""
    result: list[ApprovalDecision] = []
    thread = threading.Thread(target=lambda: result.append(approver.decide(approval_request(action, **request))))
    thread.start()
    thread.join(1.0)
    assert result, "decide() waited for the user on a step that should have gone through"
    assert not approver.panel.isVisible()
    return result[0]


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        (lambda qtbot, a: click(qtbot, a, "approve"), Decision.APPROVE),
        (lambda qtbot, a: click(qtbot, a, "skip"), Decision.SKIP),
        (lambda qtbot, a: click(qtbot, a, "stop"), Decision.STOP),
        (lambda qtbot, a: qtbot.keyClick(a.panel, Qt.Key.Key_Return), Decision.APPROVE),
        (lambda qtbot, a: qtbot.keyClick(a.panel, Qt.Key.Key_Escape), Decision.STOP),
    ],
    ids=["approve", "skip", "stop", "enter", "escape"],
)
def test_the_users_answer_is_returned_on_the_engine_thread(
    qtbot,  # type: ignore[no-untyped-def]
    approver: GuiApprover,
    answer: Callable[..., None],
    decision: Decision,
) -> None:
    engine = ask(qtbot, approver, approval_request(Click(Point(200, 150)), step=7))
    assert approver.overlay.showing
    assert approver.overlay.action == Click(Point(200, 150))
    assert not engine.result.done()
    answer(qtbot, approver)
    assert engine.decision(qtbot) == ApprovalDecision(decision)
    # Withdrawn before decide() returned: nothing of ours is on screen when the action runs.
    assert not approver.panel.isVisible()
    assert not approver.overlay.showing


def test_an_edit_returns_the_edited_action(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    engine = ask(qtbot, approver, approval_request(TypeText("helo")))
    click(qtbot, approver, "edit")
    approver.panel.named_widgets()["text"].setPlainText("hello")
    click(qtbot, approver, "approve")
    assert engine.decision(qtbot) == ApprovalDecision.edit(TypeText("hello"))


def test_dragging_the_marker_edits_the_target(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    engine = ask(qtbot, approver, approval_request(Click(Point(200, 150))))
    handles = [w for w in approver.overlay.windows() if isinstance(w, MarkerHandle)]
    assert len(handles) == 1
    handle = handles[0]
    grip = QtCore.QPoint(4, HANDLE_RADIUS)  # on the ring, left of the hole
    with qtbot.waitSignal(approver.overlay.target_edited, timeout=2000) as edited:
        qtbot.mousePress(handle, Qt.MouseButton.LeftButton, pos=grip)
        qtbot.mouseRelease(handle, Qt.MouseButton.LeftButton, pos=grip + QtCore.QPoint(31, -17))
    assert edited.args[0] == Click(Point(231, 133))
    assert approver.panel.named_widgets()["action"].text() == "Click at (231, 133)"
    assert approver.overlay.action == Click(Point(231, 133))
    click(qtbot, approver, "approve")
    assert engine.decision(qtbot) == ApprovalDecision.edit(Click(Point(231, 133)))


def test_a_stop_while_waiting_is_answered_within_100_ms(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    cancel = CancelToken()
    engine = ask(qtbot, approver, approval_request(Click(Point(10, 10)), cancel=cancel))
    stopped_at = time.monotonic()
    cancel.cancel()
    assert engine.decision(qtbot) == ApprovalDecision.stop()
    assert engine.returned_at - stopped_at < 0.1
    qtbot.waitUntil(lambda: not approver.panel.isVisible() and not approver.overlay.showing, timeout=1000)


def test_a_stop_is_answered_even_when_the_gui_thread_is_busy(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    cancel = CancelToken()
    engine = ask(qtbot, approver, approval_request(Click(Point(10, 10)), cancel=cancel))
    threading.Timer(0.05, cancel.cancel).start()
    # The GUI thread (this one) blocks meanwhile, processing no events: the answer comes anyway.
    assert engine.result.result(timeout=30) == ApprovalDecision.stop()
    qtbot.waitUntil(lambda: not approver.panel.isVisible(), timeout=1000)


def test_an_already_stopped_run_is_not_asked(approver: GuiApprover) -> None:
    cancel = CancelToken()
    cancel.cancel()
    assert answered_without_asking(approver, Click(Point(1, 1)), cancel=cancel) == ApprovalDecision.stop()


def test_decide_on_the_gui_thread_is_refused(approver: GuiApprover) -> None:
    with pytest.raises(RuntimeError, match="engine's thread"):
        approver.decide(approval_request(Click(Point(1, 1))))


def test_kinds_from_the_settings_go_through_unless_looping(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    approver.set_auto_approve_kinds({"click"})
    with qtbot.waitSignal(approver.auto_approved, timeout=1000) as told:
        assert answered_without_asking(approver, Click(Point(5, 5)), step=3) == ApprovalDecision.approve()
    assert told.args == [3, "click at (5, 5)"]

    engine = ask(qtbot, approver, approval_request(KeyCombo(("ctrl", "c"))))  # another kind is asked
    click(qtbot, approver, "skip")
    assert engine.decision(qtbot) == ApprovalDecision.skip()

    engine = ask(qtbot, approver, approval_request(Click(Point(5, 5)), loop_warning=LOOPING))
    assert approver.panel.named_widgets()["warning"].isVisible()
    click(qtbot, approver, "stop")
    assert engine.decision(qtbot) == ApprovalDecision.stop()


def test_a_step_that_types_and_presses_enter_is_asked_whatever_kinds_go_through(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    approver.set_auto_approve_kinds({"type", "key"})
    assert answered_without_asking(approver, TypeText("hello")) == ApprovalDecision.approve()
    for action in (
        TypeText("curl -s http://127.0.0.1:9/x | sh", press_enter=True),
        TypeText("rm -rf build\nls"),  # the line break is pressed as Enter
        KeyCombo(("enter",)),
    ):
        engine = ask(qtbot, approver, approval_request(action))
        click(qtbot, approver, "skip")
        assert engine.decision(qtbot) == ApprovalDecision.skip()


def test_approve_this_kind_for_the_rest_of_the_task(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    task = CancelToken()  # the engine makes one token per run
    engine = ask(qtbot, approver, approval_request(Click(Point(5, 5)), cancel=task))
    click(qtbot, approver, "remember")
    click(qtbot, approver, "approve")
    assert engine.decision(qtbot) == ApprovalDecision.approve()
    assert approver.task_auto_approve_kinds == {"click"}

    # Later clicks of the same task go through; a loop warning is still asked about.
    assert answered_without_asking(approver, Click(Point(9, 9)), cancel=task) == ApprovalDecision.approve()
    engine = ask(qtbot, approver, approval_request(Click(Point(9, 9)), cancel=task, loop_warning=LOOPING))
    click(qtbot, approver, "skip")
    assert engine.decision(qtbot) == ApprovalDecision.skip()
    assert answered_without_asking(approver, Click(Point(9, 9)), cancel=task) == ApprovalDecision.approve()

    # A new task starts with nothing approved.
    engine = ask(qtbot, approver, approval_request(Click(Point(9, 9)), cancel=CancelToken()))
    assert approver.task_auto_approve_kinds == frozenset()
    click(qtbot, approver, "approve")
    assert engine.decision(qtbot) == ApprovalDecision.approve()


def test_nothing_is_approved_without_asking_by_default(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    for action in (Click(Point(1, 1)), TypeText("x"), KeyCombo(("enter",))):
        engine = ask(qtbot, approver, approval_request(action))
        click(qtbot, approver, "approve")
        assert engine.decision(qtbot) == ApprovalDecision.approve()


@pytest.mark.parametrize(
    ("platform", "environ", "grabbed"),
    [
        ("xcb", {"DISPLAY": ":1", "XDG_SESSION_TYPE": "x11"}, True),
        # XWayland is "xcb" too, but an X grab there never hears keys typed into native windows.
        ("xcb", {"DISPLAY": ":1", "WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, False),
        ("offscreen", {"DISPLAY": ":1"}, False),
    ],
)
def test_enter_and_esc_are_grabbed_only_where_they_reach_holodesk(platform, environ, grabbed) -> None:  # type: ignore[no-untyped-def]
    assert answer_keys_grabbed(platform, environ) is grabbed


def test_the_panel_offers_enter_and_esc_only_where_they_are_grabbed(approver: GuiApprover) -> None:
    buttons = approver.panel.named_widgets()
    # This test runs on Qt's offscreen platform: no grab, so no key hints.
    assert [buttons[name].text() for name in ("approve", "stop")] == ["Approve", "Stop"]
    approver.panel.set_key_hints(True)
    assert [buttons[name].text() for name in ("approve", "stop")] == ["Approve  ⏎", "Stop  Esc"]


def test_ticked_kinds_never_cover_an_enter_in_disguise_or_a_paste(qtbot, approver: GuiApprover) -> None:  # type: ignore[no-untyped-def]
    """The approver asks the approval rule itself: a request that says nothing of Enter (irreversible
    left False) is still shown when its keys are Enter to a terminal, or when it pastes."""
    approver.set_auto_approve_kinds({"type", "key", "hold_and_tap", "click", "drag"})
    assert answered_without_asking(approver, KeyCombo(("ctrl", "a"))) == ApprovalDecision.approve()
    assert answered_without_asking(approver, HoldAndTap(("shift",), ("end",))) == ApprovalDecision.approve()
    for action in (
        KeyCombo(("ctrl", "m")),
        KeyCombo(("ctrl", "j")),
        KeyCombo(("shift", "enter")),
        HoldAndTap(("ctrl",), ("j",)),
        KeyCombo(("ctrl", "shift", "v")),  # a terminal's paste: whatever the clipboard holds
        Click(Point(5, 5), MouseButton.MIDDLE),
        Drag(Point(5, 5), Point(50, 50), MouseButton.MIDDLE),
    ):
        request = dataclasses.replace(approval_request(action), irreversible=False)
        engine = ask(qtbot, approver, request)
        click(qtbot, approver, "skip")
        assert engine.decision(qtbot) == ApprovalDecision.skip()
