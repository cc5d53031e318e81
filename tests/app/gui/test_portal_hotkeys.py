"""What the tray app asks the desktop for, and how it tells the user what the desktop bound."""

from __future__ import annotations

from holodesk.app.gui.portal_hotkeys import PortalHotkeys, bound_in_words, shortcut_requests
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


def test_each_routine_hotkey_is_one_more_shortcut_and_its_activation_names_the_routine(qtbot) -> None:
    requests = shortcut_requests("<ctrl>+<alt>+h", "<esc>", 2, {"<ctrl>+<alt>+1": "go"})
    assert requests[2] == ShortcutRequest("routine:go", "Holodesk: run the routine 'go'", "CTRL+ALT+1")
    hotkeys = PortalHotkeys(bus_address="unused")
    with qtbot.waitSignal(hotkeys.routine_requested, timeout=1000) as fired:
        hotkeys._on_activated("routine:go")  # as the portal's Activated signal arrives
    assert fired.args == ["go"]
    words = bound_in_words((BoundShortcut("prompt", "Open", "Ctrl+Alt+H"), BoundShortcut("routine:go", "Run", "")))
    assert "Holodesk: run the routine 'go': no keys yet" in words
