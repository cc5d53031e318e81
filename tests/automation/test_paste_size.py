"""A pasted text too large for one X request is refused by the X11 backend's check, before approval.

Holodesk hands a pasted text over in one X request (automation.input.x11.selection serves no INCR).
On Xvfb one request carries 262,116 bytes: an action's text (at most MAX_TEXT_LENGTH characters, 4
bytes each at most) fits, and a larger PastedText is refused by `check`, which the performer runs
before the user is asked; the user's clipboard, read back with xclip, is untouched.
"""

from __future__ import annotations

import pytest

from holodesk.automation.actions import MAX_TEXT_LENGTH
from holodesk.automation.clipboard import XCLIP
from holodesk.automation.input.primitives import PastedText
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.selection import SelectionError
from holodesk.automation.virtual_display import XvfbServer
from tests.support.user_clipboard import serve_user_text

pytestmark = pytest.mark.display

USER_CLIPBOARD = "what the user copied ✓"


def test_the_check_refuses_a_pasted_text_larger_than_one_request_and_lets_an_actions_text_through(
    xvfb: XvfbServer,
) -> None:
    serve_user_text(USER_CLIPBOARD)
    backend = X11Input(x11_typing=False)
    with pytest.raises(SelectionError, match=r"280000 bytes in UTF-8, more than one X request carries here"):
        backend.check(PastedText("é" * 140_000, ("ctrl", "v")))
    backend.check(PastedText("🙂" * MAX_TEXT_LENGTH, ("ctrl", "v")))
    assert XCLIP.read_text() == USER_CLIPBOARD
