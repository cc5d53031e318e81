"""The approval rule's table (automation/approval_rules.py): every Enter disguise and every paste is
shown under every box; each action of the vocabulary gets what the module's table says of it.

The Enter disguises are built the ways the vocabulary spells them (parsed combinations, aliases,
upper case), so a spelling the key names fold differently would show here. Then the rule through the
engine: a middle click under "approve all" reaches the approver with the text it would paste,
visible and escaped; an unreadable selection, or one changed after it was shown, refuses the step.
"""

from __future__ import annotations

import pytest

from holodesk.automation.actions import (
    Action,
    Click,
    Drag,
    HoldAndTap,
    KeyCombo,
    MouseButton,
    Move,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    Wait,
)
from holodesk.automation.approval_rules import approval_rule, paste_in_words, pastes, presses_enter
from holodesk.automation.display_text import bounded_prose
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import EngineSettings, Outcome
from holodesk.automation.keys import parse_combination
from holodesk.automation.primary_selection import PasteUnreadable, read_primary_selection
from holodesk.automation.proposal import Grounding
from tests.automation.test_engine import FakeScreen, RecordingPerformer
from tests.automation.test_engine_approval_rules import EXACT, ApproveAll, GroundedPolicy

FILE_SAYS_REVERSIBLE = Grounding(exact=True, how="found exactly where recorded", source="r", irreversible=False)
P = Point(10, 10)

ENTER_DISGUISES: list[Action] = [
    KeyCombo(parse_combination("enter")),
    KeyCombo(parse_combination("Return")),
    KeyCombo(parse_combination("KP_Enter")),
    KeyCombo(("kp_enter",)),
    KeyCombo(("ret",)),
    KeyCombo(parse_combination("shift+enter")),
    KeyCombo(parse_combination("ctrl+enter")),
    KeyCombo(parse_combination("alt+Return")),
    KeyCombo(parse_combination("ctrl+m")),
    KeyCombo(parse_combination("ctrl+M")),
    KeyCombo(parse_combination("Control+j")),
    KeyCombo(parse_combination("ctrl+shift+j")),
    KeyCombo(parse_combination("ctrl+o")),  # bash's operate-and-get-next runs the line
    KeyCombo(("ctrl", "m"), repeat=3),
    HoldAndTap(("ctrl",), ("m",)),
    HoldAndTap(("ctrl",), ("a", "j")),
    HoldAndTap(("control_l",), ("o",)),
    HoldAndTap(("shift",), ("return",)),
    HoldAndTap(("alt",), ("x", "kp_enter")),
    TypeText("", press_enter=True),
    TypeText("ls", press_enter=True),
    TypeText("echo one\necho two"),
    TypeText("echo one\r\n"),
    TypeText("echo one\r"),
]

NOT_ENTER: list[Action] = [
    KeyCombo(parse_combination("ctrl+a")),
    KeyCombo(parse_combination("m")),
    KeyCombo(parse_combination("j")),
    KeyCombo(parse_combination("shift+m")),
    KeyCombo(parse_combination("alt+j")),
    KeyCombo(parse_combination("ctrl+shift+t")),
    KeyCombo(parse_combination("tab")),
    HoldAndTap(("shift",), ("m", "j")),  # capital M and J: letters, not Enter
    HoldAndTap(("ctrl",), ("a", "c")),
    TypeText("echo one; echo two"),
]


@pytest.mark.parametrize("action", ENTER_DISGUISES, ids=lambda a: a.describe())
def test_every_enter_disguise_is_irreversible_and_shown_under_every_box(action: Action) -> None:
    assert presses_enter(action)
    for grounding in (EXACT, FILE_SAYS_REVERSIBLE, None):
        rule = approval_rule(action, grounding)
        assert (rule.may_approve_all, rule.per_kind_may_cover, rule.irreversible) == (False, False, True)
        assert rule.why_asked == "irreversible (it presses Enter): always shown"


@pytest.mark.parametrize("action", NOT_ENTER, ids=lambda a: a.describe())
def test_keys_that_are_not_enter_are_not_called_enter(action: Action) -> None:
    assert not presses_enter(action)
    rule = approval_rule(action, EXACT)
    # They type: routine "approve all" never covers them, a kind ticked in the tray may.
    assert (rule.may_approve_all, rule.per_kind_may_cover, rule.irreversible) == (False, True, False)


@pytest.mark.parametrize(
    "action",
    [
        Click(P, MouseButton.MIDDLE),
        Click(P, MouseButton.MIDDLE, count=2),
        Drag(P, Point(50, 50), MouseButton.MIDDLE),  # pastes at its release
    ],
    ids=lambda a: a.describe(),
)
def test_a_paste_is_shown_under_every_box_with_its_text(action: Action) -> None:
    assert pastes(action)
    for grounding in (EXACT, FILE_SAYS_REVERSIBLE, None):
        rule = approval_rule(action, grounding, "echo PWNED\n")
        assert (rule.may_approve_all, rule.per_kind_may_cover, rule.irreversible) == (False, False, True)
        assert "echo·PWNED⏎" in rule.why_asked and "1 line break pressed as Enter" in rule.why_asked


@pytest.mark.parametrize(
    "action",
    [
        KeyCombo(parse_combination("ctrl+v")),
        KeyCombo(parse_combination("ctrl+shift+v")),
        KeyCombo(parse_combination("shift+Insert")),
        HoldAndTap(("ctrl",), ("a", "v")),
        HoldAndTap(("ctrl", "shift"), ("v",)),
    ],
    ids=lambda a: a.describe(),
)
def test_keys_that_paste_are_never_covered_by_a_ticked_kind(action: Action) -> None:
    for grounding in (EXACT, None):
        rule = approval_rule(action, grounding)
        assert (rule.may_approve_all, rule.per_kind_may_cover) == (False, False)
        assert rule.why_asked == "it pastes whatever the clipboard or selection holds: always shown"


# (action, routine "approve all" may cover it when found exactly, a ticked kind may cover it)
VOCABULARY: list[tuple[Action, bool, bool]] = [
    (Click(P), True, True),
    (Click(P, MouseButton.RIGHT), True, True),  # a context menu
    (Click(P, count=2), False, True),  # selects a word, or opens the item
    (Click(P, count=3), False, True),
    (Click(P, MouseButton.RIGHT, count=2), False, True),
    (Drag(P, Point(50, 50)), False, True),  # drops what it drags
    (Drag(P, Point(50, 50), MouseButton.RIGHT), False, True),
    (Move(P), True, True),
    (Scroll(ScrollDirection.DOWN, at=P), True, True),  # may change a value under the pointer: undone by scrolling back
    (Scroll(ScrollDirection.DOWN), False, True),  # wherever the pointer happens to be
    (TypeText("abc"), False, True),
    (TypeText("abc", at=P), False, True),
    (KeyCombo(("ctrl", "s")), False, True),
    (HoldAndTap(("shift",), ("end",)), False, True),
    (Wait(1.0), True, True),
]


@pytest.mark.parametrize(("action", "approve_all", "per_kind"), VOCABULARY, ids=lambda v: str(v))
def test_each_action_of_the_vocabulary_follows_the_table(action: Action, approve_all: bool, per_kind: bool) -> None:
    rule = approval_rule(action, EXACT)
    assert (rule.may_approve_all, rule.per_kind_may_cover, rule.irreversible) == (approve_all, per_kind, False)
    moved = approval_rule(action, Grounding(exact=False, how="found by template", source="r"))
    assert not moved.may_approve_all and moved.per_kind_may_cover is per_kind
    assert not approval_rule(action, None).may_approve_all  # the model's own step


def test_paste_words_picture_control_characters_and_line_breaks() -> None:
    words = paste_in_words("clear\x1b[2J\x07\necho hi\u202e a\\n\xa0\t\x7f\n")
    assert words == (
        "it pastes the primary selection (27 characters, its 2 line breaks pressed as Enter): "
        "clear␛[2J␇⏎echo·hi⟨U+202E⟩·a\\n⟨U+00A0⟩⇥␡⏎"  # the backslash-n the text holds stays one backslash
    )
    assert paste_in_words("") == "the primary selection is empty: it pastes nothing"
    long = paste_in_words("x" * 500 + "\n; rm -rf ~\n")
    assert len(long) < 300 and long.endswith("x⏎;·rm·-rf·~⏎") and "…[353 more]…" in long


def test_paste_words_survive_the_front_ends_escaping_unchanged() -> None:
    """The panel and the terminal show the words through bounded_prose: nothing in them is escaped again."""
    words = paste_in_words("echo PWNED\n\x1b[31m\u202e")
    assert bounded_prose(words, 300) == words


def test_a_wayland_session_refuses_to_read_the_selection_in_words() -> None:
    with pytest.raises(PasteUnreadable, match="cannot read it in this session \\(a Wayland session\\)"):
        read_primary_selection({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}, "linux")


def engine_run(actions: list[Action], read_paste) -> tuple[ApproveAll, RecordingPerformer, Outcome, str]:  # type: ignore[no-untyped-def]
    screen = FakeScreen()
    performer = RecordingPerformer(screen)
    approver = ApproveAll()
    policy = GroundedPolicy([(action, EXACT) for action in actions])
    engine = StepEngine(policy, approver, performer, screen, EngineSettings(monitor=2), read_paste=read_paste)
    result = engine.run("replay")
    return approver, performer, result.outcome, result.detail


def test_approve_all_never_covers_a_middle_click_and_the_approver_reads_what_it_pastes() -> None:
    middle = Click(Point(20, 20), MouseButton.MIDDLE)
    approver, performer, outcome, detail = engine_run([Click(P), Click(Point(15, 15)), middle], lambda: "echo PWNED\n")
    assert outcome is Outcome.DONE, detail
    assert [r.action for r in approver.shown] == [Click(P), middle]  # the second exact click was covered
    request = approver.shown[1]
    assert request.paste_text == "echo PWNED\n" and request.irreversible and not request.may_approve_all
    assert "echo·PWNED⏎" in request.adjustment and "echo·PWNED⏎" in request.why_asked
    assert len(performer.executed) == 3


def test_an_unreadable_selection_refuses_the_middle_click_in_words() -> None:
    def unreadable() -> str:
        raise PasteUnreadable("a middle click pastes the primary selection, which could not be read (xclip: gone)")

    approver, performer, outcome, detail = engine_run([Click(P), Click(Point(20, 20), MouseButton.MIDDLE)], unreadable)
    assert outcome is Outcome.FAILED and "could not be read (xclip: gone)" in detail
    assert len(approver.shown) == 1 and len(performer.executed) == 1  # the paste was never asked, never done


def test_a_selection_changed_after_it_was_shown_is_not_pasted() -> None:
    texts = iter(["ls\n", "rm -rf ~\n"])
    approver, performer, outcome, detail = engine_run([Click(Point(20, 20), MouseButton.MIDDLE)], lambda: next(texts))
    assert outcome is Outcome.FAILED and "changed after it was shown" in detail
    assert approver.shown[0].paste_text == "ls\n" and performer.executed == []
