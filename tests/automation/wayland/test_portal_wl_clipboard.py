"""Pasting on Wayland through wl-clipboard (wl-copy, wl-paste), the tools a session without xclip has.

On the real GNOME stack, the portal backend is given the wl-clipboard tools (as `wayland_clipboard`
picks them where XWayland's xclip is missing). A native Wayland Qt field (tests/support/wayland_target.py)
pastes with ctrl+v; its own log says what arrived, and wl-paste reads the user's clipboard back.
wl-clipboard cannot tell when the program took the text, so the backend waits a fixed time before
putting the user's text back: the field here handles ctrl+v a second late (`stall`), and with the wait
longer than that it gets the offered text, not the user's, which it would without the wait.
"""

from __future__ import annotations

import shutil

import pytest

from holodesk.automation.actions import TypeText
from holodesk.automation.clipboard import WL_CLIPBOARD
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.session import WaylandSession
from tests.automation.wayland.conftest import WaylandTarget
from tests.automation.wayland.test_portal_paste import PASTED, USER_CLIPBOARD, WAIT_S, empty_field
from tests.support.waiting import wait_until

pytestmark = pytest.mark.display

STALL_S = 1.0  # how late the field handles the paste key
SETTLE_S = 3.0  # the backend's fixed wait before the user's text comes back: longer than the stall


@pytest.fixture(scope="module", autouse=True)
def _wl_clipboard_installed() -> None:
    if shutil.which("wl-copy") is None or shutil.which("wl-paste") is None:
        pytest.fail("wl-clipboard is not installed (Debian: apt install wl-clipboard; tests/run.sh does)")


def set_user_clipboard() -> None:
    WL_CLIPBOARD.write_text(USER_CLIPBOARD)
    wait_until(lambda: WL_CLIPBOARD.read_text() == USER_CLIPBOARD, WAIT_S, "wl-copy serving the user's clipboard")


def test_a_late_paste_gets_the_text_and_the_users_clipboard_comes_back_after_the_wait(
    session: tuple[WaylandSession, list[str]], wayland_target: WaylandTarget
) -> None:
    wayland, _ = session
    input_performer = InputPerformer(PortalInput(wayland, clipboard=WL_CLIPBOARD, paste_settle_s=SETTLE_S))
    empty_field(input_performer, wayland_target)
    set_user_clipboard()
    wayland_target.process.send(f"stall {STALL_S:g}")
    wayland_target.wait_for("stalled", WAIT_S)
    result = input_performer.execute(TypeText(PASTED))
    assert result.ok, result.detail
    texts = [record["text"] for record in wayland_target.records_until("text", WAIT_S) if record["event"] == "text"]
    assert texts == [PASTED]
    assert "pasted through the clipboard with ctrl+v" in result.detail, result.detail
    assert f"the previous content was put back after a fixed {SETTLE_S:g} s" in result.detail, result.detail
    assert WL_CLIPBOARD.read_text() == USER_CLIPBOARD
