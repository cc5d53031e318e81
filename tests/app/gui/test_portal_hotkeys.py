"""What the tray app asks the desktop for, and how it tells the user what the desktop bound."""

from __future__ import annotations

from holodesk.app.gui.portal_hotkeys import bound_in_words, shortcut_requests
from holodesk.automation.wayland.shortcuts import BoundShortcut, ShortcutRequest


def test_the_prompt_hotkey_is_proposed_and_esc_twice_is_not() -> None:
    assert shortcut_requests("<ctrl>+<alt>+h", "<esc>", 2) == [
        ShortcutRequest("prompt", "Holodesk: open the task prompt", "CTRL+ALT+h"),
        ShortcutRequest("stop", "Holodesk: stop the running task", None),
    ]


def test_a_single_press_stop_key_is_proposed() -> None:
    assert shortcut_requests("<ctrl>+<alt>+h", "<pause>", 1)[1].preferred_trigger == "Pause"


def test_unbound_shortcuts_come_with_the_command_to_bind_instead() -> None:
    words = bound_in_words((BoundShortcut("prompt", "Open", "Ctrl+Alt+H"), BoundShortcut("stop", "Stop", "")))
    assert "Holodesk: open the task prompt: Ctrl+Alt+H" in words
    assert "Holodesk: stop the running task: no keys yet" in words
    assert "`holodesk trigger stop`" in words
    assert "`holodesk trigger`" not in words.replace("`holodesk trigger stop`", "")
