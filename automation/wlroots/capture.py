"""Screenshots on wlroots desktops (sway) through the screencopy protocol, with grim.

ScreenCapture's interface (automation.backends.DesktopCapture): `grab(monitor)` runs grim on that
monitor's output (`grim -o NAME`), `grab(None)` on the whole desktop, and returns the picture as a
BGRA ScreenFrame in screen space. Each grab asks the compositor for the picture it shows now, so no
older picture is kept to go stale. Monitors come from sway's IPC (automation.wlroots.sway_outputs).
A picture whose size is not its monitor's (a scale factor other than 1: grim gives physical pixels,
sway's rectangles are logical) is refused in words rather than mapped wrongly.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import time

import numpy as np
from PIL import Image

from holodesk.automation.coords import Monitor, virtual_desktop
from holodesk.automation.errors import CaptureError
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.wlroots.sway_outputs import sway_monitors

GRIM = "grim"
GRIM_PACKAGE = "grim"  # Debian's package name


class GrimCapture:
    """Captures a sway desktop through grim; nothing to open or close."""

    def __init__(self, environ: dict[str, str] | None = None, timeout_s: float = 20.0) -> None:
        self._environ = environ
        self.timeout_s = timeout_s

    def monitors(self) -> list[Monitor]:
        return list(sway_monitors(self._environ))

    def grab(self, monitor: int | None) -> ScreenFrame:
        if shutil.which(GRIM) is None:
            raise CaptureError(f"screenshots on a wlroots desktop need grim: sudo apt install {GRIM_PACKAGE}")
        monitors = tuple(self.monitors())
        if not monitors:
            raise CaptureError("sway reports no active output to capture")
        if monitor is None:
            chosen, region, arguments = None, virtual_desktop(monitors), []
        elif 1 <= monitor <= len(monitors):
            chosen = monitors[monitor - 1]
            region, arguments = chosen.rect, ["-o", chosen.name]
        else:
            raise CaptureError(f"there is no monitor {monitor}; sway has {len(monitors)}")
        pixels = self._grim(arguments)
        if (pixels.shape[1], pixels.shape[0]) != (region.width, region.height):
            raise CaptureError(
                f"grim's picture is {pixels.shape[1]}x{pixels.shape[0]} but the screen is {region.width}x"
                f"{region.height}: an output changed meanwhile, or its scale factor is not 1 (not supported on "
                "wlroots yet)"
            )
        return ScreenFrame(pixels, region, chosen, monitors, captured_at=time.monotonic())

    def _grim(self, arguments: list[str]) -> np.ndarray:
        env = dict(os.environ if self._environ is None else self._environ)
        try:
            # PNG: lossless; grim's default ppm would do too, PNG is what Pillow reads everywhere.
            done = subprocess.run(
                [GRIM, "-t", "png", "-l", "0", *arguments, "-"], env=env, capture_output=True, timeout=self.timeout_s
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CaptureError(f"grim: {exc}") from exc
        if done.returncode != 0:
            # e.g. "compositor doesn't support wlr-screencopy-unstable-v1" (GNOME, KDE)
            raise CaptureError(f"grim failed: {done.stderr.decode(errors='replace').strip() or done.returncode}")
        rgba = np.asarray(Image.open(io.BytesIO(done.stdout)).convert("RGBA"))
        return np.ascontiguousarray(rgba[:, :, [2, 1, 0, 3]])  # BGRA, as ScreenFrame holds it

    def close(self) -> None:
        """Nothing to give back: each grab's grim connection ends with it."""
