"""The model asks the user (`ask_user`): the panel shows the question, the reply goes back to the engine.

In this process on Qt's offscreen platform, with real queued signals between an engine-like thread
and the GUI thread; the whole round trip in the tray app is in tests/e2e/test_tray_app.py.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from holodesk.app.gui.gui_approver import GuiApprover
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import Qt
from holodesk.automation.actions import AskUser
from holodesk.automation.cancel import CancelToken
from holodesk.automation.engine_protocols import QuestionRequest
from holodesk.automation.proposal import Proposal
from tests.automation.frames import solid_frame


@pytest.fixture
def approver(qtbot) -> Iterator[GuiApprover]:  # type: ignore[no-untyped-def]
    overlay = OverlayController()
    gui_approver = GuiApprover(overlay)
    qtbot.addWidget(gui_approver.panel)
    yield gui_approver
    gui_approver.panel.retract()


def question(text: str = "Which folder should I save it in?", cancel: CancelToken | None = None) -> QuestionRequest:
    frame = solid_frame(800, 600)
    proposal = Proposal(AskUser(text), "raw", 800, 600, note="I need the folder", thought="")
    return QuestionRequest(3, "save the report", text, proposal, frame, cancel or CancelToken())


def asked(qtbot, approver: GuiApprover, request: QuestionRequest) -> Future[str | None]:  # type: ignore[no-untyped-def]
    reply: Future[str | None] = Future()
    threading.Thread(target=lambda: reply.set_result(approver.answer_question(request)), daemon=True).start()
    qtbot.waitUntil(approver.panel.isVisible, timeout=3000)
    return reply


def test_the_question_is_shown_with_a_reply_field_and_the_reply_goes_back(qtbot, approver):
    reply = asked(qtbot, approver, question())
    widgets = approver.panel.named_widgets()
    assert widgets["action"].text() == "Which folder should I save it in?"
    assert widgets["note"].text() == "I need the folder"
    assert widgets["reply"].isVisible() and widgets["send"].isVisible() and widgets["stop"].isVisible()
    assert not any(widgets[name].isVisible() for name in ("approve", "edit", "skip", "remember"))
    assert not widgets["send"].isEnabled()  # nothing typed yet
    qtbot.keyClicks(widgets["reply"], "  the Reports folder ")
    assert widgets["send"].isEnabled()
    # Enter answers on its release, as approval does (the press alone must not answer).
    qtbot.keyPress(widgets["reply"], Qt.Key.Key_Return)
    assert not reply.done()
    qtbot.keyRelease(widgets["reply"], Qt.Key.Key_Return)
    qtbot.waitUntil(reply.done, timeout=3000)
    assert reply.result() == "the Reports folder"
    assert not approver.panel.isVisible()


def test_escape_stops_instead_of_answering(qtbot, approver):
    reply = asked(qtbot, approver, question())
    reply_field = approver.panel.named_widgets()["reply"]
    qtbot.keyClicks(reply_field, "half an answer")
    qtbot.keyPress(reply_field, Qt.Key.Key_Escape)
    qtbot.keyRelease(reply_field, Qt.Key.Key_Escape)
    qtbot.waitUntil(reply.done, timeout=3000)
    assert reply.result() is None
    assert not approver.panel.isVisible()


def test_an_empty_reply_is_not_sent(qtbot, approver):
    reply = asked(qtbot, approver, question())
    widgets = approver.panel.named_widgets()
    qtbot.keyClicks(widgets["reply"], "   ")
    qtbot.mouseClick(widgets["send"], Qt.MouseButton.LeftButton)
    qtbot.keyPress(widgets["reply"], Qt.Key.Key_Return)
    qtbot.keyRelease(widgets["reply"], Qt.Key.Key_Return)
    qtbot.wait(100)
    assert not reply.done() and approver.panel.isVisible()
    qtbot.mouseClick(widgets["stop"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(reply.done, timeout=3000)
    assert reply.result() is None


def test_a_stop_from_elsewhere_withdraws_the_question(qtbot, approver):
    cancel = CancelToken()
    reply = asked(qtbot, approver, question(cancel=cancel))
    cancel.cancel()
    qtbot.waitUntil(reply.done, timeout=1000)
    assert reply.result() is None
    qtbot.waitUntil(lambda: not approver.panel.isVisible(), timeout=1000)


def test_the_panel_asks_for_approval_normally_after_a_question(qtbot, approver):
    from holodesk.automation.actions import Click, Point
    from tests.app.gui.approval_requests import approval_request

    reply = asked(qtbot, approver, question())
    qtbot.keyClicks(approver.panel.named_widgets()["reply"], "yes")
    qtbot.mouseClick(approver.panel.named_widgets()["send"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(reply.done, timeout=3000)
    decision: Future[object] = Future()
    request = approval_request(Click(Point(100, 100)))
    threading.Thread(target=lambda: decision.set_result(approver.decide(request)), daemon=True).start()
    qtbot.waitUntil(approver.panel.isVisible, timeout=3000)
    widgets = approver.panel.named_widgets()
    assert widgets["approve"].isVisible() and not widgets["reply"].isVisible()
    assert widgets["action"].text().startswith("Click")
    qtbot.mouseClick(widgets["approve"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(decision.done, timeout=3000)


def test_the_headline_follows_the_text_being_edited(qtbot, approver):
    from holodesk.automation.actions import KeyCombo, TypeText
    from tests.app.gui.approval_requests import approval_request

    panel = approver.panel
    panel.present(approval_request(TypeText("echo hello from holodesk")))
    widgets = panel.named_widgets()
    widgets["text"].setPlainText("echo bye")
    # Text to type is shown as everywhere on the panel: its length, whitespace made visible.
    assert widgets["action"].text().replace("\u200b", "") == "Type 8 characters into the focused field:\necho·bye"
    panel.present(approval_request(KeyCombo(("ctrl", "s"))))
    widgets["keys"].setText("ctrl+shift+")  # half-typed: the headline keeps the last valid keys
    assert widgets["action"].text() == "Press ctrl+s"
    widgets["keys"].setText("ctrl+shift+s")
    assert widgets["action"].text() == "Press ctrl+shift+s"
    panel.retract()


def test_a_question_after_a_step_shows_nothing_of_that_step(qtbot) -> None:  # type: ignore[no-untyped-def]
    from holodesk.app.gui.approval_panel import ApprovalPanel
    from holodesk.automation.actions import Click, Point
    from tests.app.gui.approval_requests import approval_request

    panel = ApprovalPanel()
    qtbot.addWidget(panel)
    step = approval_request(Click(Point(5, 5)), step=2, element="The blue OK button")
    panel.present(dataclasses.replace(step, previous_result="1. Open the mail [done]\n2. Reply [todo]"))
    widgets = panel.named_widgets()
    assert widgets["context"].text() == "Step 1: 1. Open the mail [done]\n2. Reply [todo]"  # lines, not "\n"
    panel.present_question(question())
    assert not widgets["context"].isVisible() and not widgets["element"].isVisible()
    assert widgets["context"].text() == "" and widgets["element"].text() == ""
    panel.retract()
