"""Pasting on Wayland through Holodesk's own owner of XWayland's CLIPBOARD, on a real GNOME stack.

A native Wayland Qt field (tests/support/wayland_target.py) pastes with ctrl+v through mutter's
XWayland bridge. The field's own log says what arrived; the user's clipboard is read back with
xclip on XWayland's display, a reader independent of the module. A field that is busy when the key
arrives still gets the offered text (the user's comes back only after the paste asked), a
clipboard that held nothing holds nothing afterwards (mutter keeps a copy of every owner's text: it
must not outlive the paste), a focus that pastes nothing is a failed step in words, and a text too
large for one X request is refused by the backend's check, which the performer runs before approval.
"""

from __future__ import annotations

import time

import pytest

from holodesk.automation.actions import MAX_TEXT_LENGTH, Click, KeyCombo, Point, TypeText
from holodesk.automation.clipboard import XCLIP
from holodesk.automation.errors import ClipboardError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.input.primitives import PastedText
from holodesk.automation.input.x11.selection import SelectionOffer
from holodesk.automation.wayland.session import WaylandSession
from tests.automation.wayland.conftest import WaylandTarget
from tests.support.user_clipboard import serve_user_text
from tests.support.waiting import wait_until

pytestmark = pytest.mark.display

USER_CLIPBOARD = "what the user copied ✓"
# Not on the US layout, so it is pasted, not typed.
PASTED = "Grüße — 東京 🙂"
WAIT_S = 30.0


def set_user_clipboard() -> None:
    """The user's own clipboard text, served on XWayland by a new xclip known to own it (serve_user_text)."""
    serve_user_text(USER_CLIPBOARD)


def empty_field(input_performer: InputPerformer, target: WaylandTarget) -> None:
    """Focus the field and empty it: afterwards its log ends with an empty text."""
    left, top, width, height = target.ready["layout"]["field"]
    assert input_performer.execute(Click(Point(left + width // 2, top + height // 2))).ok
    assert input_performer.execute(TypeText("x")).ok
    target.wait_for("text", WAIT_S)
    assert input_performer.execute(KeyCombo(("ctrl", "a"))).ok
    assert input_performer.execute(KeyCombo(("backspace",))).ok
    target.wait_for("text", WAIT_S, text="")


# The longest text an action carries, of 3- and 4-byte characters: 35,000 bytes in one X request.
LONGEST = "東京🙂😀" * (MAX_TEXT_LENGTH // 4)


@pytest.mark.parametrize("text", [PASTED, LONGEST], ids=["short", "longest"])
def test_the_field_gets_the_text_and_the_users_clipboard_comes_back(
    text: str, session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    empty_field(input_performer, wayland_target)
    set_user_clipboard()
    result = input_performer.execute(TypeText(text))
    assert result.ok, result.detail
    wayland_target.wait_for("text", WAIT_S, text=text)
    assert "pasted through the clipboard with ctrl+v" in result.detail, result.detail
    assert "taken from CLIPBOARD on XWayland by window 0x" in result.detail, result.detail
    assert XCLIP.read_text() == USER_CLIPBOARD


def test_a_busy_field_still_gets_the_text_not_the_users(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    """The field handles ctrl+v two seconds late: the user's text must not be back by then."""
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    empty_field(input_performer, wayland_target)
    set_user_clipboard()
    wayland_target.process.send("stall 2")
    wayland_target.wait_for("stalled", WAIT_S)
    result = input_performer.execute(TypeText(PASTED))
    assert result.ok, result.detail
    texts = [record["text"] for record in wayland_target.records_until("text", WAIT_S) if record["event"] == "text"]
    assert texts == [PASTED]
    assert XCLIP.read_text() == USER_CLIPBOARD


def test_a_paste_nobody_takes_fails_in_words_and_the_users_clipboard_comes_back(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland, paste_timeout_s=1.0))
    empty_field(input_performer, wayland_target)
    set_user_clipboard()
    wayland_target.process.send("focus pad")  # a widget that pastes nothing has the keyboard focus
    wayland_target.wait_for("focus", WAIT_S, widget="pad")
    try:
        result = input_performer.execute(TypeText(PASTED))
        assert not result.ok, result.detail
        assert "no program asked for the text within 1 s of the paste key: the paste was not taken" in result.detail
        assert "pasted through" not in result.detail
        assert XCLIP.read_text() == USER_CLIPBOARD
        time.sleep(0.5)  # nothing is expected: give a late paste the time to show
        assert [record for record in wayland_target.drain() if record["event"] == "text"] == []
    finally:
        wayland_target.process.send("focus field")
        wayland_target.wait_for("focus", WAIT_S, widget="field")


def test_a_text_too_large_for_one_x_request_is_refused_by_the_check_before_anything_is_sent(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    """An action's text (at most MAX_TEXT_LENGTH characters, 4 bytes each at most) fits in one request
    on XWayland; a larger pasted text is refused by the check the performer runs before approval."""
    wayland, _ = session
    backend = PortalInput(wayland)
    empty_field(InputPerformer(backend), wayland_target)
    set_user_clipboard()
    huge = "é" * 140_000  # 280,000 bytes of UTF-8; one request carries at most 262,116 on XWayland
    with pytest.raises(ClipboardError, match=r"280000 bytes in UTF-8, more than one X request carries here"):
        backend.check(PastedText(huge, ("ctrl", "v")))
    InputPerformer(backend).validate(TypeText("🙂" * MAX_TEXT_LENGTH))  # the largest action's text passes
    assert XCLIP.read_text() == USER_CLIPBOARD
    # A fence: whatever the refused check might have sent would have arrived before it.
    assert InputPerformer(backend).execute(TypeText("!")).ok
    records = wayland_target.records_until("text", WAIT_S, text="!")
    assert [record["text"] for record in records if record["event"] == "text"] == ["!"]


def test_a_pasted_text_does_not_stay_on_a_clipboard_that_held_nothing(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    """A password pasted while the clipboard had no owner must not be left there for the next paste."""
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland))
    empty_field(input_performer, wayland_target)
    nobody = SelectionOffer("", ("CLIPBOARD",))  # claimed and given up: the clipboard has no owner now
    nobody.start()
    nobody.close()
    wait_until(lambda: XCLIP.read_text() is None, WAIT_S, "the clipboard having no owner")
    result = input_performer.execute(TypeText(PASTED))
    assert result.ok, result.detail
    wayland_target.wait_for("text", WAIT_S, text=PASTED)
    assert XCLIP.read_text() is None
    assert input_performer.execute(KeyCombo(("ctrl", "v"))).ok  # pastes nothing, so the fence comes right after
    assert input_performer.execute(TypeText("!")).ok
    records = wayland_target.records_until("text", WAIT_S, text=PASTED + "!")
    assert [record["text"] for record in records if record["event"] == "text"] == [PASTED + "!"]
