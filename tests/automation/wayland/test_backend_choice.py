"""Backend choice, keysyms and the restore-token file: the parts that need no desktop."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from holodesk.app.common.hotkey_path import HotkeyPath, is_wayland_session, plan_hotkeys
from holodesk.automation.backends import (
    WLROOTS_NOTICE,
    BackendChoice,
    BackendSettingError,
    choose_backend,
    create_backends,
    unknown_desktop_notice,
)
from holodesk.automation.errors import ActionError
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from holodesk.automation.input.wlroots.pointer import WlrootsPointer
from holodesk.automation.primary_selection import PasteUnreadable, read_primary_selection
from holodesk.automation.wayland.keysyms import char_keysym, key_keysym, text_keysyms
from holodesk.automation.wayland.portal import PortalError, parse_streams
from holodesk.automation.wayland.session import RestoreTokenStore
from holodesk.automation.wlroots.capture import GrimCapture


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_SESSION_TYPE": "wayland", "WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, "wayland"),
        ({"XDG_SESSION_TYPE": "x11", "DISPLAY": ":0"}, "x11"),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "wayland"),
        ({"DISPLAY": ":99"}, "x11"),  # Xvfb, CI
        ({"XDG_SESSION_TYPE": "wayland"}, "wayland"),
        ({"XDG_SESSION_TYPE": "wayland", "DISPLAY": ":99"}, "x11"),  # Xvfb started from a Wayland terminal
        ({"XDG_SESSION_TYPE": "wayland", "HOLODESK_BACKEND": "X11"}, "x11"),
        ({"DISPLAY": ":0", "HOLODESK_BACKEND": "wayland"}, "wayland"),
        ({"WAYLAND_DISPLAY": "wayland-1", "SWAYSOCK": "/run/user/1000/sway-ipc.1000.9.sock"}, "wlroots"),
        ({"WAYLAND_DISPLAY": "wayland-1", "XDG_CURRENT_DESKTOP": "sway"}, "wlroots"),
        ({"WAYLAND_DISPLAY": "wayland-1", "XDG_CURRENT_DESKTOP": "Hyprland"}, "wlroots"),
        ({"XDG_SESSION_TYPE": "wayland", "XDG_CURRENT_DESKTOP": "river"}, "wlroots"),
        ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "ubuntu:GNOME"}, "wayland"),
        ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "KDE", "SWAYSOCK": "/tmp/s"}, "wayland"),
        ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "weston"}, "wayland"),  # unknown: the portal
        ({"WAYLAND_DISPLAY": "wayland-1", "SWAYSOCK": "/tmp/s", "HOLODESK_BACKEND": "wayland"}, "wayland"),
        ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "weston", "HOLODESK_BACKEND": "WLRoots"}, "wlroots"),
        ({"DISPLAY": ":0", "SWAYSOCK": "/tmp/s"}, "x11"),  # sway's socket without a Wayland session
        ({"XDG_SESSION_TYPE": "x11", "XDG_CURRENT_DESKTOP": "sway"}, "x11"),
    ],
)
def test_the_session_decides_the_backend(environ: dict[str, str], expected: str) -> None:
    choice = choose_backend(environ, platform="linux")
    assert choice.name == expected
    assert choice.reason  # doctor prints it


def test_a_bad_override_is_reported_not_replaced() -> None:
    with pytest.raises(
        BackendSettingError, match="HOLODESK_BACKEND must be 'x11', 'wayland' or 'wlroots', got 'weston'"
    ):
        choose_backend({"HOLODESK_BACKEND": "weston", "WAYLAND_DISPLAY": "w"}, platform="linux")


def test_the_choice_names_the_desktop_it_found() -> None:
    sway = choose_backend({"WAYLAND_DISPLAY": "wayland-1", "SWAYSOCK": "/tmp/s"}, platform="linux")
    assert (sway.desktop, sway.reason) == ("sway", "XDG_SESSION_TYPE=unset, WAYLAND_DISPLAY=wayland-1; wlroots "
                                           "desktop (SWAYSOCK set): no RemoteDesktop portal")  # fmt: skip
    gnome = choose_backend({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "ubuntu:GNOME"}, platform="linux")
    assert (gnome.desktop, gnome.reason) == (
        "ubuntu",
        "XDG_SESSION_TYPE=unset, WAYLAND_DISPLAY=wayland-0; desktop ubuntu",
    )
    unnamed = choose_backend({"WAYLAND_DISPLAY": "wayland-0"}, platform="linux")
    assert unnamed.desktop == "" and "XDG_CURRENT_DESKTOP unset" in unnamed.reason


def test_each_path_builds_its_parts_and_says_what_the_user_must_know(tmp_path: Path) -> None:
    """Nothing is opened here (no portal, no grim): only what was built and what was said."""
    notices: list[str] = []
    wlroots = create_backends(notices.append, choice=BackendChoice("wlroots", "test", "sway"))
    assert isinstance(wlroots.capture, GrimCapture) and isinstance(wlroots.performer.backend, WtypeKeyboard)
    assert isinstance(wlroots.performer.backend.pointer, WlrootsPointer)  # one backend: keyboard and pointer
    assert notices == [WLROOTS_NOTICE]
    notices.clear()
    create_backends(notices.append, choice=BackendChoice("wayland", "test", "GNOME"), token_path=tmp_path / "t")
    assert notices == []  # a known portal desktop: the portal's own consent explanation comes at the first grab
    create_backends(notices.append, choice=BackendChoice("wayland", "test", "mystery"), token_path=tmp_path / "t")
    assert notices == [unknown_desktop_notice("mystery")]
    assert "mystery" in notices[0] and "HOLODESK_BACKEND=wlroots" in notices[0]


def test_a_wlroots_session_is_a_wayland_session_for_hotkeys_and_the_primary_selection() -> None:
    """The modules that ask 'is this Wayland?' through the backend choice count wlroots as Wayland."""
    sway = {"WAYLAND_DISPLAY": "wayland-1", "SWAYSOCK": "/tmp/s", "XDG_CURRENT_DESKTOP": "sway"}
    assert is_wayland_session(sway, "linux")
    plan = plan_hotkeys(probe=lambda: (_ for _ in ()).throw(PortalError("no GlobalShortcuts")), environ=sway,
                        platform="linux")  # fmt: skip
    assert plan.path is HotkeyPath.TRIGGER  # not pynput, which cannot hear a Wayland keyboard
    with pytest.raises(PasteUnreadable, match="cannot read it in this session \\(a Wayland session\\)"):
        read_primary_selection(sway, "linux")


def test_other_platforms_keep_mss_and_pyautogui() -> None:
    assert choose_backend({"WAYLAND_DISPLAY": "x"}, platform="darwin").name == "x11"


def test_keysyms_of_keys_and_text() -> None:
    assert key_keysym("Return") == 0xFF0D
    assert key_keysym("ctrl") == 0xFFE3
    assert key_keysym("F12") == 0xFFC9
    assert key_keysym("a") == ord("a")
    assert text_keysyms("Aü\n\t") == [0x41, 0xFC, 0xFF0D, 0xFF09]
    assert char_keysym("東") == 0x01000000 + ord("東")
    assert char_keysym("—") == 0x01002014
    with pytest.raises(ActionError, match="U\\+0007 cannot be typed"):
        text_keysyms("bell\a")
    with pytest.raises(ActionError, match="firmware"):
        key_keysym("fn")


def test_streams_from_the_portal_answer() -> None:
    raw = ("a(ua{sv})", [(42, {"position": ("(ii)", (0, 0)), "size": ("(ii)", (1280, 800))})])
    (stream,) = parse_streams(raw)
    assert (stream.node_id, stream.position, stream.size) == (42, (0, 0), (1280, 800))
    with pytest.raises(PortalError, match="shared no screen"):
        parse_streams([])
    with pytest.raises(PortalError, match="no usable size"):
        parse_streams([(7, {})])


def test_restore_token_file_is_private(tmp_path: Path) -> None:
    store = RestoreTokenStore(tmp_path / "state" / "token")
    assert store.load() is None
    store.save("abc-123")
    assert store.load() == "abc-123"
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    store.clear()
    assert store.load() is None
