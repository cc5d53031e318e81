"""The user's own text on an X selection for a test, served by a real xclip that is known to own it.

xclip forks, and its child claims the selection some time after the command returns. Reading the
text back proves nothing when the selection already held that text (the xclip a test or a restore
left still answers): the new claim could then land during the test's paste, where it looks like
another program taking the selection over. So the owner's window must change first, then the text
reads back.
"""

from __future__ import annotations

from Xlib import X
from Xlib.display import Display

from holodesk.automation.clipboard import XCLIP, XCLIP_PRIMARY
from tests.support.waiting import wait_until


def selection_owner(selection: str = "CLIPBOARD") -> int:
    """The window owning `selection` on $DISPLAY (0: none), asked on a connection of the test's own."""
    display = Display()
    try:
        owner = display.get_selection_owner(display.intern_atom(selection))
        return 0 if owner == X.NONE else int(owner.id)
    finally:
        display.close()


def serve_user_text(text: str, selection: str = "CLIPBOARD", timeout_s: float = 60.0) -> None:
    """`text` on `selection` (CLIPBOARD or PRIMARY), served by a new xclip that owns it on return."""
    tool = XCLIP_PRIMARY if selection == "PRIMARY" else XCLIP
    before = selection_owner(selection)
    tool.write_text(text)
    wait_until(lambda: selection_owner(selection) not in (before, 0), timeout_s, f"xclip taking {selection}")
    wait_until(lambda: tool.read_text() == text, timeout_s, f"xclip serving the user's {selection} text")
