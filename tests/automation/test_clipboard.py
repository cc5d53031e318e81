"""Clipboard: the right tool per platform, a clear error naming what to install, real xclip round trips."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from holodesk.automation.clipboard import (
    PBCOPY,
    WL_CLIPBOARD,
    XCLIP,
    CommandClipboard,
    PyperclipClipboard,
    system_clipboard,
)
from holodesk.automation.errors import ClipboardError
from holodesk.automation.virtual_display import XvfbServer
from tests.support import x11_probe


def which_from(*available: str) -> Callable[[str], str | None]:
    """A stand-in for shutil.which that finds only the named tools."""
    return lambda name: f"/usr/bin/{name}" if name in available else None


def test_x11_uses_xclip() -> None:
    assert system_clipboard("linux", {"DISPLAY": ":1"}, which_from("xclip", "xsel")) is XCLIP


def test_wayland_prefers_wl_clipboard_and_falls_back_to_xclip_through_xwayland() -> None:
    env = {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}
    assert system_clipboard("linux", env, which_from("wl-copy", "wl-paste", "xclip")) is WL_CLIPBOARD
    assert system_clipboard("linux", env, which_from("xclip")) is XCLIP


def test_macos_uses_pbcopy_and_windows_pyperclip() -> None:
    assert system_clipboard("darwin", {}, which_from("pbcopy", "pbpaste")) is PBCOPY
    assert isinstance(system_clipboard("win32", {}, which_from()), PyperclipClipboard)


@pytest.mark.parametrize(
    ("env", "tools", "advice"),
    [
        ({"DISPLAY": ":1"}, ("xsel",), "install xclip"),  # xsel alone is not enough: it garbles non-Latin-1
        ({"WAYLAND_DISPLAY": "wayland-0"}, ("xclip",), "install wl-clipboard"),
        ({}, ("xclip",), "neither DISPLAY nor WAYLAND_DISPLAY"),
    ],
)
def test_missing_tools_are_a_clear_error(env: dict[str, str], tools: tuple[str, ...], advice: str) -> None:
    with pytest.raises(ClipboardError, match=advice):
        system_clipboard("linux", env, which_from(*tools))


def test_a_failing_tool_is_a_clipboard_error() -> None:
    broken = CommandClipboard("broken", ("false",), ("false",))
    with pytest.raises(ClipboardError, match="exit 1"):
        broken.read_text()
    with pytest.raises(ClipboardError, match="exit 1"):
        broken.write_text("x")
    missing = CommandClipboard("missing", ("no-such-clipboard-tool",), ("no-such-clipboard-tool",))
    with pytest.raises(ClipboardError):
        missing.read_text()


@pytest.mark.display
def test_xclip_round_trips_unicode_and_reports_an_empty_clipboard(xvfb: XvfbServer) -> None:
    x11_probe.drop_clipboard_owner()
    assert XCLIP.read_text() is None
    for text in ("Grüße — 東京", "two\nlines\n", "", "emoji 🙂 and tabs\t"):
        XCLIP.write_text(text)
        assert XCLIP.read_text() == text


# A write tool whose child claims the clipboard only after the tool returned, as xclip's does when the
# machine is busy (its claim is sent once the forked child runs): exaggerated here to half a second.
LATE_WRITER = (
    "sh",
    "-c",
    'f=$(mktemp); cat > "$f"; (sleep 0.5; xclip -selection clipboard -i "$f"; rm -f "$f") >/dev/null 2>&1 &',
)


@pytest.mark.display
def test_a_write_returns_only_once_the_clipboard_holds_the_text(xvfb: XvfbServer) -> None:
    XCLIP.write_text("what was there before")
    late = CommandClipboard("late-xclip", XCLIP.read_command, LATE_WRITER, XCLIP.empty_markers, confirm_write=True)
    late.write_text("the new text")
    assert XCLIP.read_text() == "the new text"


@pytest.mark.display
def test_a_write_the_clipboard_never_takes_is_an_error(xvfb: XvfbServer) -> None:
    XCLIP.write_text("what was there before")
    never = CommandClipboard(
        "never", XCLIP.read_command, ("sh", "-c", "cat > /dev/null"), XCLIP.empty_markers, confirm_write=True
    )
    with pytest.raises(ClipboardError, match="did not hold the new text within"):
        never.write_text("lost")
    assert XCLIP.read_text() == "what was there before"
