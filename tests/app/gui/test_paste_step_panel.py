"""The approval panel on a step that pastes, and the approve-all box on steps it never covers (issue 49).

A middle click's headline says that it pastes, with the text it pastes on the line under the headline
(not in the small context line above it); the control characters of that text are shown with pictures
the panel's font has; and the "approve every step of this kind" box is not offered on a step of a
kind it never covers (a paste, ctrl+m, typing that presses Enter), with the reason shown.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from holodesk.app.gui.approval_panel import ApprovalPanel
from holodesk.automation.actions import Action, Click, KeyCombo, MouseButton, Point, TypeText
from holodesk.automation.approval_rules import paste_in_words
from holodesk.automation.engine_protocols import ApprovalRequest
from tests.app.gui.approval_requests import approval_request

PASTED = "echo hi\x1b[0m\n"


@pytest.fixture
def panel(qtbot) -> Iterator[ApprovalPanel]:  # type: ignore[no-untyped-def]
    shown = ApprovalPanel()
    qtbot.addWidget(shown)
    yield shown
    shown.retract()


def middle_click(text: str = PASTED) -> ApprovalRequest:
    """A middle click as the engine asks it: the paste's words appended to the adjustment line."""
    words = paste_in_words(text)
    request = approval_request(Click(Point(120, 80), button=MouseButton.MIDDLE))
    return dataclasses.replace(
        request, paste_text=text, adjustment=f"Moved off the corner; {words[:1].upper() + words[1:]}"
    )


def test_a_middle_clicks_headline_says_it_pastes_and_the_text_is_under_it(panel: ApprovalPanel) -> None:
    panel.present(middle_click())
    widgets = panel.named_widgets()
    assert widgets["action"].text() == "Middle click at (120, 80): pastes the selection"
    paste = widgets["paste"]
    assert paste.isVisible() and paste.text().startswith("It pastes the primary selection (12 characters")
    assert "echo·hi" in paste.text()
    assert paste.geometry().top() > widgets["action"].geometry().bottom()  # under the headline
    # The context line above keeps what else it said, without the paste's words twice.
    assert widgets["context"].text() == "Moved off the corner"


def test_the_pasted_controls_are_drawn_with_what_the_font_has(panel: ApprovalPanel) -> None:
    panel.present(middle_click())
    paste = panel.named_widgets()["paste"]
    metrics = paste.fontMetrics()
    missing = [c for c in paste.text() if 0x2400 <= ord(c) <= 0x2426 and not metrics.inFontUcs4(ord(c))]
    assert not missing, f"the panel's font has no {missing}: drawn as boxes"
    if not metrics.inFontUcs4(0x241B):  # DejaVu Sans, the usual default, has no ␛
        assert "⟨Escape⟩[0m" in paste.text()


@pytest.mark.parametrize(
    "action",
    [KeyCombo(("ctrl", "m")), KeyCombo(("enter",)), TypeText("ls", press_enter=True)],
    ids=["ctrl+m", "enter", "typing+enter"],
)
def test_the_box_is_not_offered_on_a_step_it_never_covers(panel: ApprovalPanel, action: Action) -> None:
    panel.present(approval_request(action))
    widgets = panel.named_widgets()
    assert not widgets["remember"].isEnabled()
    assert widgets["remember_note"].isVisible()
    assert widgets["remember_note"].text().startswith("Not offered on this step.")


def test_the_box_is_not_offered_on_a_paste_and_is_on_a_plain_click(panel: ApprovalPanel) -> None:
    panel.present(middle_click())
    widgets = panel.named_widgets()
    assert not widgets["remember"].isEnabled()
    assert "pastes the selection" in widgets["remember_note"].text()
    panel.present(approval_request(Click(Point(120, 80))))
    assert widgets["remember"].isEnabled() and not widgets["remember_note"].isVisible()
    assert not widgets["paste"].isVisible()
