"""Holodesk's portal session on headless KWin: granted without a dialog, and its input read back by a real window.

The session is automation/wayland/portal.py's, unchanged; the clicks and keys go through the KDE
portal's RemoteDesktop (NotifyPointerMotionAbsolute, NotifyPointerButton, NotifyKeyboardKeysym)
into KWin, and the native Wayland Qt window (tests/support/wayland_target.py) reports what it got.
"""

from __future__ import annotations

import pytest

from bench.rigs.kwin_stack import KwinStack
from holodesk.automation.wayland.portal import DEVICE_KEYBOARD, DEVICE_POINTER, PortalSession
from tests.automation.kde.conftest import KdeTarget, click

pytestmark = [pytest.mark.display, pytest.mark.kde]

RETURN = 0xFF0D


def test_the_session_grants_keyboard_pointer_and_the_output_without_a_dialog(
    kwin_stack: KwinStack, kde_portal: PortalSession
) -> None:
    # KDE 5.27 asks nothing of a program outside a sandbox (it shows a notification instead), so the
    # session started with no test answering anything; version 1 portals give no restore token.
    assert kde_portal.devices == DEVICE_KEYBOARD | DEVICE_POINTER
    assert [(s.position, s.size) for s in kde_portal.streams] == [((0, 0), kwin_stack.output_size)]
    assert kde_portal.restore_token is None


@pytest.mark.parametrize(("x", "y", "widget"), [(1180, 700, "window"), (250, 200, "pad"), (150, 440, "field")])
def test_a_click_lands_where_it_was_sent(
    kde_portal: PortalSession, kde_target: KdeTarget, x: int, y: int, widget: str
) -> None:
    click(kde_portal, x, y)
    press = kde_target.wait_for("press", 5.0)
    release = kde_target.wait_for("release", 5.0)
    assert (press["x"], press["y"], press["widget"], press["button"]) == (x, y, widget, "LeftButton")
    assert (release["x"], release["y"]) == (x, y)


def test_keysyms_type_text_the_field_reads_back(kde_portal: PortalSession, kde_target: KdeTarget) -> None:
    layout = kde_target.ready["layout"]["field"]
    click(kde_portal, layout[0] + 20, layout[1] + layout[3] // 2)  # the field takes the focus
    kde_target.wait_for("release", 5.0, widget="field")
    kde_target.clear()
    text = "Hello, KWin! 0-9 (ok) ~_+"
    for character in text:
        kde_portal.keyboard_keysym(ord(character), True)
        kde_portal.keyboard_keysym(ord(character), False)
    kde_target.wait_for("text", 10.0, text=text)
    kde_portal.keyboard_keysym(RETURN, True)
    kde_portal.keyboard_keysym(RETURN, False)
    assert kde_target.wait_for("enter", 5.0)["text"] == text
