"""Plain-text clipboard access without Qt, through each platform's own tool.

The input backends paste text they cannot type and put the user's text back afterwards, so they read,
set and restore the clipboard from a worker thread without a Qt application. Tools by platform:
X11 `xclip -selection clipboard` (not `xsel`, which garbles text outside Latin-1), Wayland
`wl-copy`/`wl-paste`, macOS `pbcopy`/`pbpaste`, Windows pyperclip (a pyautogui dependency).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from holodesk.automation.errors import ClipboardError

# A clipboard owner that does not answer would otherwise hang the step forever.
TOOL_TIMEOUT_S = 3.0
# How long a forking tool's child may take to become the clipboard's owner after the tool returned.
TAKE_TIMEOUT_S = 3.0


class Clipboard(Protocol):
    """Reads and writes plain text on the system clipboard."""

    @property
    def name(self) -> str:
        """A short name for messages ("xclip")."""
        ...

    def read_text(self) -> str | None:
        """The clipboard's text, or None when it holds no text (empty, or an image)."""
        ...

    def write_text(self, text: str) -> None:
        """Replace the clipboard's content with `text`."""
        ...


@dataclass(frozen=True, slots=True)
class CommandClipboard:
    """A clipboard driven by a pair of command-line tools that move UTF-8 through stdin/stdout."""

    name: str
    read_command: tuple[str, ...]
    write_command: tuple[str, ...]
    # Substrings of the read tool's stderr that mean "there is no text", not "the tool failed".
    empty_markers: tuple[str, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()
    # The write tool returns before its forked child owns the clipboard (xclip sends its claim only
    # once the child runs, so on a loaded machine a read straight after can still see the old owner):
    # the write is confirmed by reading the text back.
    confirm_write: bool = False

    def _env(self) -> dict[str, str]:
        return {**os.environ, **dict(self.extra_env)}

    def read_text(self) -> str | None:
        try:
            done = subprocess.run(
                self.read_command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=TOOL_TIMEOUT_S,
                env=self._env(),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClipboardError(f"reading the clipboard with {self.read_command[0]} failed: {exc}") from exc
        if done.returncode != 0:
            message = done.stderr.decode("utf-8", "replace").strip()
            if any(marker in message for marker in self.empty_markers):
                return None
            raise ClipboardError(
                f"reading the clipboard with {self.read_command[0]} failed (exit {done.returncode}): {message}"
            )
        return done.stdout.decode("utf-8", "replace")

    def write_text(self, text: str) -> None:
        # xclip and wl-copy fork a child that keeps serving the clipboard after the command returns;
        # the child inherits stdout/stderr, so pipes there would never reach EOF and run() would hang.
        # stderr goes to a temporary file instead, which the child may keep open harmlessly.
        with tempfile.TemporaryFile() as errors:
            try:
                done = subprocess.run(
                    self.write_command,
                    input=text.encode("utf-8"),
                    stdout=subprocess.DEVNULL,
                    stderr=errors,
                    timeout=TOOL_TIMEOUT_S,
                    env=self._env(),
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ClipboardError(f"setting the clipboard with {self.write_command[0]} failed: {exc}") from exc
            if done.returncode != 0:
                errors.seek(0)
                message = errors.read().decode("utf-8", "replace").strip()
                raise ClipboardError(
                    f"setting the clipboard with {self.write_command[0]} failed (exit {done.returncode}): {message}"
                )
        if self.confirm_write:
            self._wait_until_held(text)

    def _wait_until_held(self, text: str) -> None:
        """Return once the clipboard reads back `text`; ClipboardError, in words, after TAKE_TIMEOUT_S."""
        deadline = time.monotonic() + TAKE_TIMEOUT_S
        while True:
            held = self.read_text()
            if held == text or (held is None and not text):
                return
            if time.monotonic() > deadline:
                raise ClipboardError(
                    f"{self.write_command[0]} returned, but the clipboard did not hold the new text within "
                    f"{TAKE_TIMEOUT_S:g} s (another program may have taken it over)"
                )
            time.sleep(0.02)


class PyperclipClipboard:
    """Windows: pyperclip talks to the Win32 clipboard directly."""

    name = "pyperclip"

    def read_text(self) -> str | None:
        import pyperclip

        try:
            text = pyperclip.paste()
        except pyperclip.PyperclipException as exc:
            raise ClipboardError(f"reading the clipboard failed: {exc}") from exc
        return text or None

    def write_text(self, text: str) -> None:
        import pyperclip

        try:
            pyperclip.copy(text)
        except pyperclip.PyperclipException as exc:
            raise ClipboardError(f"setting the clipboard failed: {exc}") from exc


XCLIP = CommandClipboard(
    name="xclip",
    read_command=("xclip", "-selection", "clipboard", "-o"),
    write_command=("xclip", "-selection", "clipboard", "-i"),
    # What xclip says when nothing owns the clipboard or the owner offers no text.
    empty_markers=("not available", "no owner"),
    confirm_write=True,
)
# The X primary selection: what xterm-style terminals paste with shift+insert.
XCLIP_PRIMARY = CommandClipboard(
    name="xclip-primary",
    read_command=("xclip", "-selection", "primary", "-o"),
    write_command=("xclip", "-selection", "primary", "-i"),
    empty_markers=XCLIP.empty_markers,
    confirm_write=True,
)
WL_CLIPBOARD = CommandClipboard(
    name="wl-clipboard",
    read_command=("wl-paste", "--no-newline", "--type", "text"),
    write_command=("wl-copy", "--type", "text/plain;charset=utf-8"),
    empty_markers=("Nothing is copied", "No selection", "No suitable type"),
    confirm_write=True,
)
# pbcopy/pbpaste pick their text encoding from the locale; without a UTF-8 one they mangle non-ASCII.
PBCOPY = CommandClipboard(
    name="pbcopy",
    read_command=("pbpaste",),
    write_command=("pbcopy",),
    extra_env=(("LANG", "en_US.UTF-8"), ("LC_CTYPE", "UTF-8")),
)


def system_clipboard(
    platform: str = sys.platform,
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] = shutil.which,
) -> Clipboard:
    """The clipboard tool for this platform and session, or a ClipboardError saying what to install."""
    env = os.environ if env is None else env
    if platform == "win32":
        return PyperclipClipboard()
    if platform == "darwin":
        if which("pbcopy") and which("pbpaste"):
            return PBCOPY
        raise ClipboardError("pbcopy/pbpaste were not found; they ship with macOS, check PATH")
    wayland = bool(env.get("WAYLAND_DISPLAY"))
    x11 = bool(env.get("DISPLAY"))
    if wayland and which("wl-copy") and which("wl-paste"):
        return WL_CLIPBOARD
    # On Wayland, XWayland's clipboard is bridged to native apps, so xclip is a working fallback.
    if x11 and which("xclip"):
        return XCLIP
    if wayland:
        raise ClipboardError(
            "no clipboard tool for this Wayland session: install wl-clipboard (Debian/Ubuntu: apt install wl-clipboard)"
        )
    if x11:
        raise ClipboardError(
            "no clipboard tool for X11: install xclip (Debian/Ubuntu: apt install xclip); "
            "xsel is not used because it garbles text outside Latin-1"
        )
    raise ClipboardError("no display to reach a clipboard on: neither DISPLAY nor WAYLAND_DISPLAY is set")


def read_text() -> str | None:
    """The system clipboard's text, or None when it holds no text."""
    return system_clipboard().read_text()


def write_text(text: str) -> None:
    """Put `text` on the system clipboard."""
    system_clipboard().write_text(text)
