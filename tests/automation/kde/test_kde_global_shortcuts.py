"""Holodesk's global shortcuts (automation/wayland/shortcuts.py) on the real KDE portal, pressed through KWin.

KDE 5.27's portal implements GlobalShortcuts (through KWin's kglobalaccel) and binds what it is asked
for with no dialog. The keys are pressed as a user's would arrive: through KWin's input, here the
portal's RemoteDesktop keyboard (evdev keycodes), and the press must come back to Holodesk as the
portal's Activated signal for that shortcut's id.
"""

from __future__ import annotations

import threading

import pytest

from bench.rigs.kwin_stack import KwinStack
from holodesk.automation.wayland.portal import PortalSession
from holodesk.automation.wayland.shortcuts import GlobalShortcutsSession, ShortcutRequest, probe_global_shortcuts

pytestmark = [pytest.mark.display, pytest.mark.kde]

PROMPT = ShortcutRequest("prompt", "Open the task prompt", "CTRL+ALT+h")
STOP = ShortcutRequest("stop", "Stop the running task")  # no preferred keys: KDE leaves it unbound
KEY_LEFTCTRL, KEY_LEFTALT, KEY_H, KEY_J = 29, 56, 35, 36


def press_ctrl_alt(portal: PortalSession, key: int) -> None:
    for code in (KEY_LEFTCTRL, KEY_LEFTALT, key):
        portal.keyboard_keycode(code, True)
    for code in (key, KEY_LEFTALT, KEY_LEFTCTRL):
        portal.keyboard_keycode(code, False)


def test_a_bound_shortcut_pressed_in_kwin_reaches_holodesk(kwin_stack: KwinStack, kde_portal: PortalSession) -> None:
    assert probe_global_shortcuts(kwin_stack.bus_address) >= 1
    activations: list[str] = []
    arrived = threading.Event()

    def on_activated(shortcut_id: str) -> None:
        activations.append(shortcut_id)
        arrived.set()

    session = GlobalShortcutsSession.open(
        [PROMPT, STOP], on_activated, bus_address=kwin_stack.bus_address, dialog_timeout_s=30
    )
    try:
        assert {s.id: s.trigger for s in session.bound} == {"prompt": "Ctrl+Alt+H", "stop": ""}
        assert session.unbound(["prompt", "stop"]) == ["stop"]  # what Holodesk then tells the user
        press_ctrl_alt(kde_portal, KEY_J)  # bound to nothing: must not fire
        press_ctrl_alt(kde_portal, KEY_H)  # after it, so its activation shows j's would have come
        assert arrived.wait(10.0), f"Ctrl+Alt+H did not reach Holodesk within 10 s{kwin_stack.log_tail()}"
        assert activations == ["prompt"]
    finally:
        session.close()
