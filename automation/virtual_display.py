"""Start and stop private Xvfb servers for tests, and point this process (and pyautogui) at one.

Each server is started with `-displayfd`, so Xvfb picks a free display number itself and parallel
test runs never collide. `-noreset` keeps monitor layouts (xrandr --setmonitor) and clipboard
owners alive when the last client disconnects.
"""

from __future__ import annotations

import importlib
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from holodesk.automation.errors import AutomationError

XVFB_MISSING = (
    "Xvfb is not installed, so the desktop tests cannot start a virtual display. "
    "Install Debian's `xvfb` package (apt-get install xvfb); tests/run.sh installs it."
)


# -noreset: keep monitors set with xrandr (and clipboard owners) when the last client disconnects.
XVFB_OPTIONS = ("-noreset", "-nolisten", "tcp")


class XvfbError(AutomationError):
    """Xvfb could not be started (missing binary, did not report a display in time)."""


@dataclass(frozen=True, slots=True)
class VirtualMonitor:
    """A monitor carved out of the Xvfb screen with `xrandr --setmonitor` (physical pixels)."""

    name: str
    width: int
    height: int
    left: int
    top: int

    def xrandr_geometry(self) -> str:
        # xrandr wants a physical size in millimetres too; any value works, use ~96 dpi.
        width_mm, height_mm = round(self.width * 25.4 / 96), round(self.height * 25.4 / 96)
        return f"{self.width}/{width_mm}x{self.height}/{height_mm}+{self.left}+{self.top}"


@dataclass(frozen=True, slots=True)
class DisplayLayout:
    """What a test display looks like: one X screen of `width` x `height`, optionally split into monitors."""

    width: int
    height: int
    monitors: tuple[VirtualMonitor, ...] = ()

    def __str__(self) -> str:
        if not self.monitors:
            return f"{self.width}x{self.height}"
        return "+".join(f"{m.width}x{m.height}" for m in self.monitors)


FULL_HD = DisplayLayout(1920, 1080)
LAPTOP = DisplayLayout(1366, 768)
# Two monitors of different sizes: a 1920x1080 one with a 1366x768 one to its right, tops aligned, so
# the X screen has a region (x >= 1920, y >= 768) that is on no monitor, where no action may land.
TWO_MONITORS = DisplayLayout(
    3286,
    1080,
    (VirtualMonitor("LEFT", 1920, 1080, 0, 0), VirtualMonitor("RIGHT", 1366, 768, 1920, 0)),
)


class XvfbServer:
    """One running Xvfb. `display` is its name (":7"); `env()` is an environment that uses it."""

    def __init__(self, process: subprocess.Popen[bytes], display: str, width: int, height: int, log_path: str) -> None:
        self.process = process
        self.display = display
        self.width = width
        self.height = height
        self.log_path = log_path
        self.monitors: tuple[VirtualMonitor, ...] = ()

    @property
    def layout(self) -> DisplayLayout:
        return DisplayLayout(self.width, self.height, self.monitors)

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default: this process's environment) with DISPLAY set to this server, X11 only."""
        env = dict(os.environ if base is None else base)
        env["DISPLAY"] = self.display
        env.pop("WAYLAND_DISPLAY", None)
        return env

    def set_monitors(self, monitors: Sequence[VirtualMonitor]) -> None:
        """Split the screen into monitors (the first one takes the server's only output, "screen")."""
        for position, monitor in enumerate(monitors):
            output = "screen" if position == 0 else "none"
            subprocess.run(
                ["xrandr", "--setmonitor", monitor.name, monitor.xrandr_geometry(), output],
                env=self.env(),
                check=True,
                capture_output=True,
                timeout=10,
            )
        self.monitors = tuple(monitors)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                return log.read()[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        with suppress(OSError):
            os.unlink(self.log_path)

    def __repr__(self) -> str:
        return f"XvfbServer({self.display}, {self.width}x{self.height})"


def xvfb_binary() -> str:
    """The Xvfb executable, or an XvfbError saying to install Debian's xvfb."""
    path = shutil.which("Xvfb")
    if path is None:
        raise XvfbError(XVFB_MISSING)
    return path


def start_xvfb(
    width: int = 1920,
    height: int = 1080,
    depth: int = 24,
    timeout_s: float = 15.0,
    extra_options: Sequence[str] = (),
) -> XvfbServer:
    """Start Xvfb with one screen of `width` x `height` and wait until it accepts clients (`extra_options`
    are more Xvfb options, e.g. ("-extension", "DAMAGE") to leave an extension out)."""
    binary = xvfb_binary()
    read_end, write_end = os.pipe()
    log_fd, log_path = tempfile.mkstemp(prefix="xvfb-", suffix=".log")
    try:
        process = subprocess.Popen(
            [
                binary,
                "-displayfd",
                str(write_end),
                "-screen",
                "0",
                f"{width}x{height}x{depth}",
                *XVFB_OPTIONS,
                *extra_options,
            ],
            pass_fds=(write_end,),
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
        )
    finally:
        os.close(write_end)
        os.close(log_fd)
    # Xvfb writes the display number and a newline to the fd once it is ready for clients.
    received = b""
    deadline = time.monotonic() + timeout_s
    try:
        while not received.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            readable, _, _ = select.select([read_end], [], [], max(remaining, 0))
            if not readable:
                break
            chunk = os.read(read_end, 64)
            if not chunk:
                break
            received += chunk
    finally:
        os.close(read_end)
    server = XvfbServer(process, f":{received.decode().strip()}", width, height, log_path)
    if not received.endswith(b"\n"):
        log = server.log_tail()
        server.stop()
        raise XvfbError(f"Xvfb did not report a display within {timeout_s:g} s; its log:\n{log}")
    return server


def point_pyautogui_at_current_display() -> None:
    """Make an already-imported pyautogui send its input to the server $DISPLAY names now.

    pyautogui's X11 backend opens its one Display connection (and reads the keymap through it) when
    it is imported, from $DISPLAY at that moment. Tests that start a new Xvfb in the same process
    reload that backend module: it reconnects to the new $DISPLAY and rebuilds its key table, and
    `pyautogui.platformModule` is the same module object, so every pyautogui call follows. This is
    done for every new server, even under the same name: -displayfd reuses freed display numbers.
    A pyautogui that was never imported needs nothing: its first import reads the current $DISPLAY.
    """
    if not sys.platform.startswith("linux") or "pyautogui" not in sys.modules:
        return
    backend = sys.modules["pyautogui._pyautogui_x11"]
    old_display = backend._display
    importlib.reload(backend)
    # The old server may already be gone; its connection is dead either way.
    with suppress(Exception):
        old_display.close()


@contextmanager
def using_display(server: XvfbServer) -> Iterator[XvfbServer]:
    """Point this process (and children it starts) at `server` for the block, then restore."""
    saved = {name: os.environ.get(name) for name in ("DISPLAY", "WAYLAND_DISPLAY")}
    os.environ["DISPLAY"] = server.display
    # Clipboard and Qt pick Wayland when WAYLAND_DISPLAY is set; the tests want this X server.
    os.environ.pop("WAYLAND_DISPLAY", None)
    point_pyautogui_at_current_display()
    try:
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def xvfb_display(layout: DisplayLayout = FULL_HD) -> Iterator[XvfbServer]:
    """A private Xvfb with the given layout, used as $DISPLAY for the block."""
    server = start_xvfb(layout.width, layout.height)
    try:
        if layout.monitors:
            server.set_monitors(layout.monitors)
        with using_display(server):
            yield server
    finally:
        server.stop()
