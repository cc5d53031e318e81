"""Which hotkey path a session gets, and why: the decision the tray app and doctor share."""

from __future__ import annotations

import pytest

from holodesk.app.common.hotkey_path import TRIGGER_ADVICE, HotkeyPath, is_wayland_session, plan_hotkeys
from holodesk.automation.wayland.shortcuts import NO_INTERFACE_WORDS, ShortcutsUnavailable

WAYLAND = {"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}


def test_forcing_the_x11_capture_does_not_make_a_wayland_session_x11() -> None:
    assert is_wayland_session({**WAYLAND, "HOLODESK_BACKEND": "x11"}, "linux")
    assert not is_wayland_session({"XDG_SESSION_TYPE": "x11", "DISPLAY": ":0"}, "linux")


def test_x11_and_other_systems_use_pynput_without_asking_the_portal() -> None:
    def probe() -> int:
        raise AssertionError("the portal must not be asked outside Wayland")

    assert plan_hotkeys(probe, {"DISPLAY": ":0"}, "linux").path is HotkeyPath.PYNPUT
    plan = plan_hotkeys(probe, {}, "darwin")
    assert plan.path is HotkeyPath.PYNPUT and "darwin" in plan.reason


def test_wayland_with_the_portal_interface_uses_it() -> None:
    plan = plan_hotkeys(lambda: 1, WAYLAND, "linux")
    assert plan.path is HotkeyPath.PORTAL
    assert "GlobalShortcuts (version 1)" in plan.reason


def test_wayland_without_it_falls_back_to_holodesk_trigger_with_the_reason() -> None:
    def probe() -> int:
        raise ShortcutsUnavailable(NO_INTERFACE_WORDS)

    plan = plan_hotkeys(probe, WAYLAND, "linux")
    assert plan.path is HotkeyPath.TRIGGER
    assert plan.reason == f"Wayland session and {NO_INTERFACE_WORDS}"


@pytest.mark.parametrize("command", ["`holodesk trigger`", "`holodesk trigger stop`"])
def test_the_advice_names_the_real_commands(command: str) -> None:
    assert command in TRIGGER_ADVICE
