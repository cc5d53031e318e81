"""One private desktop for a parallel eval worker: its own Xvfb, window manager and runtime folder.

A worker of `holodesk eval miniwob --workers N` (or a Ray actor's worker) starts one of these and
runs everything of its own on it: Chromium, screen capture, the input backend, the clipboard (X
selections belong to a display) and the held-input marker (kept in the runtime folder). Nothing is
shared with another worker: each display is its own X server, picked free by Xvfb itself.

Openbox is the window manager, as on the tests' desktops: without one, focus follows the pointer
and no window is ever raised; the desktop waits until openbox has claimed the screen before it is
handed out, so Chromium's window is managed from its first map.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.eval.desktop_parts import Part
from holodesk.automation.virtual_display import XvfbServer, start_xvfb

WINDOW_MANAGER = "openbox"
MISSING_WINDOW_MANAGER = (
    "parallel MiniWoB workers need the openbox window manager: install Debian's `openbox` (apt-get install openbox)"
)
WINDOW_MANAGER_TIMEOUT_S = 15.0
# The smallest screen a worker gets: the size the single-desktop eval's tests use.
MIN_SCREEN = (1024, 768)


class DesktopError(HolodeskAppError):
    """The private desktop could not be started; the message says what is missing or what failed."""


def screen_size_for(window_width: int, window_height: int) -> tuple[int, int]:
    """A screen that holds a window of this size with room for its frame (multiples of 8, as X likes)."""
    width = max(MIN_SCREEN[0], window_width + 64)
    height = max(MIN_SCREEN[1], window_height + 64)
    return 8 * math.ceil(width / 8), 8 * math.ceil(height / 8)


class PrivateDesktop:
    """Xvfb + openbox + a private runtime folder; `env()` is the environment for programs on it."""

    def __init__(self, width: int, height: int) -> None:
        if shutil.which(WINDOW_MANAGER) is None:
            raise DesktopError(MISSING_WINDOW_MANAGER)
        self.runtime_dir = Path(tempfile.mkdtemp(prefix="holodesk-desktop-"))  # 0700, ours alone
        self._window_manager: subprocess.Popen[bytes] | None = None
        try:
            self.server: XvfbServer = start_xvfb(width, height)
        except Exception as exc:  # XvfbError, or OSError from a broken binary
            shutil.rmtree(self.runtime_dir, ignore_errors=True)
            raise DesktopError(f"Xvfb did not start: {exc}") from exc
        try:
            self._window_manager = subprocess.Popen(
                [WINDOW_MANAGER],
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self._wait_for_window_manager()
        except BaseException:  # no half-started desktop left behind, Ctrl+C too; re-raised
            self.close()
            raise

    @property
    def display(self) -> str:
        return self.server.display

    def parts(self) -> list[Part]:
        """Its processes, for the worker to watch (app/eval/desktop_parts.py)."""
        found = [Part("Xvfb", self.server.process.pid, self.server.process)]
        if self._window_manager is not None:
            found.append(Part("openbox", self._window_manager.pid, self._window_manager))
        return found

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default: this process's environment) on this desktop: its DISPLAY and runtime folder."""
        env = self.server.env(base)
        env["XDG_RUNTIME_DIR"] = str(self.runtime_dir)
        return env

    def _wait_for_window_manager(self) -> None:
        """Return once openbox has set _NET_SUPPORTING_WM_CHECK on the root window (it manages the screen)."""
        from Xlib import X
        from Xlib import display as xdisplay

        connection = xdisplay.Display(self.display)
        try:
            root = connection.screen().root
            check = connection.intern_atom("_NET_SUPPORTING_WM_CHECK")
            deadline = time.monotonic() + WINDOW_MANAGER_TIMEOUT_S
            while root.get_full_property(check, X.AnyPropertyType) is None:
                if self._window_manager is not None and self._window_manager.poll() is not None:
                    raise DesktopError(f"openbox exited at once (status {self._window_manager.returncode})")
                if time.monotonic() > deadline:
                    raise DesktopError(
                        f"openbox did not take the screen {self.display} within {WINDOW_MANAGER_TIMEOUT_S:g} s"
                    )
                time.sleep(0.05)
        finally:
            connection.close()

    def close(self) -> None:
        """Stop openbox and Xvfb and remove the runtime folder; never raises."""
        if self._window_manager is not None and self._window_manager.poll() is None:
            self._window_manager.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._window_manager.wait(timeout=5)
            if self._window_manager.poll() is None:
                self._window_manager.kill()
                self._window_manager.wait(timeout=5)
        with contextlib.suppress(Exception):
            self.server.stop()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    def __enter__(self) -> PrivateDesktop:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
