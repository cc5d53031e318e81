"""Monitors and screen capture with mss, into frames that carry their own geometry.

A `ScreenFrame` keeps mss's BGRA buffer as a numpy array (no copy, no PNG encoding) with the
region of the virtual desktop it shows, the monitor it came from and a monotonic timestamp.
Everything downstream maps coordinates through that geometry.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from holodesk.automation.coords import Monitor, Rect, virtual_desktop
from holodesk.automation.errors import CaptureError

try:  # mss is a hard dependency; the guard only turns a broken install into a clear error.
    import mss
    import mss.exception
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    raise ImportError("mss is required for screen capture: pip install mss") from exc


@dataclass(frozen=True, eq=False)
class ScreenFrame:
    """One captured image of a screen region.

    `pixels` is height x width x 4, BGRA, uint8, as mss delivered it. `region` is where those pixels
    sit on the virtual desktop (physical pixels); `monitor` is the monitor it was taken of, or None
    for a grab of the whole desktop. `captured_at` is `time.monotonic()` at the grab.
    """

    pixels: np.ndarray
    region: Rect
    monitor: Monitor | None
    monitors: tuple[Monitor, ...]
    captured_at: float
    wall_time: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        shape = self.pixels.shape
        if self.pixels.dtype != np.uint8 or len(shape) != 3 or shape[2] != 4:
            raise CaptureError(f"frame pixels must be HxWx4 uint8 BGRA, got {self.pixels.dtype} {shape}")
        if (shape[1], shape[0]) != (self.region.width, self.region.height):
            raise CaptureError(f"frame pixels are {shape[1]}x{shape[0]} but the region is {self.region}")

    @property
    def width(self) -> int:
        return self.region.width

    @property
    def height(self) -> int:
        return self.region.height

    @property
    def rgb(self) -> np.ndarray:
        """An RGB view of the pixels (no copy; not contiguous)."""
        return self.pixels[:, :, 2::-1]

    def to_image(self) -> Any:
        """The frame as a PIL RGB image (one copy). Import stays local: PIL is only needed here."""
        from PIL import Image

        return Image.frombuffer("RGB", (self.width, self.height), self._bgrx_bytes(), "raw", "BGRX", 0, 1)

    def _bgrx_bytes(self) -> np.ndarray:
        """The BGRX pixels as one C-contiguous buffer (no copy when they already are)."""
        return self.pixels if self.pixels.flags.c_contiguous else np.ascontiguousarray(self.pixels)

    def same_pixels(self, other: ScreenFrame) -> bool:
        """True when both frames show the same region with identical pixels."""
        return self.region == other.region and (self.pixels is other.pixels or identical(self.pixels, other.pixels))

    def pixel_rgb(self, x: int, y: int) -> tuple[int, int, int]:
        """The colour of the screen pixel (x, y) given in screen space."""
        row = y - self.region.top
        col = x - self.region.left
        if not (0 <= row < self.height and 0 <= col < self.width):
            raise CaptureError(f"screen point ({x}, {y}) is outside the frame region {self.region}")
        b, g, r, _ = self.pixels[row, col]
        return int(r), int(g), int(b)


# Frames are compared a slice at a time: a slice stays in the CPU cache, and frames that differ
# (most comparisons while the screen settles) are told apart at the first slice that differs.
_COMPARE_SLICE_BYTES = 1 << 20


def identical(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two pixel arrays are equal, shape and bytes (a 1920x1080 frame: well under a millisecond).

    Contiguous arrays are compared as 64-bit words, a megabyte at a time: an eighth of the element
    compares of np.array_equal and no frame-sized temporary.
    """
    if first.shape != second.shape or first.dtype != second.dtype:
        return False
    if not (first.flags.c_contiguous and second.flags.c_contiguous):
        return bool(np.array_equal(first, second))
    flat_first, flat_second = first.reshape(-1).view(np.uint8), second.reshape(-1).view(np.uint8)
    for start in range(0, flat_first.size, _COMPARE_SLICE_BYTES):
        a = flat_first[start : start + _COMPARE_SLICE_BYTES]
        b = flat_second[start : start + _COMPARE_SLICE_BYTES]
        if a.size % 8 == 0:
            a, b = a.view(np.uint64), b.view(np.uint64)
        if not np.array_equal(a, b):
            return False
    return True


def frame_from_image(image: Any, left: int = 0, top: int = 0) -> ScreenFrame:
    """A frame from a PIL image (a saved screenshot), placed at (left, top) on a one-monitor desktop."""
    rgba = np.asarray(image.convert("RGBA"))
    pixels = np.ascontiguousarray(rgba[:, :, [2, 1, 0, 3]])  # RGBA -> BGRA, as mss delivers
    rect = Rect(left, top, image.width, image.height)
    monitor = Monitor(1, rect)
    return ScreenFrame(pixels, rect, monitor, (monitor,), captured_at=time.monotonic())


def _x11_scale() -> float | None:
    """Xft.dpi / 96 where an X resource database sets it; X11 has no per-monitor scale."""
    try:
        from Xlib import display as xdisplay
    except ImportError:
        return None
    try:
        connection = xdisplay.Display()
    except Exception:  # python-xlib raises DisplayError, OSError and others (xauth, protocol) here
        return None
    try:
        resources = connection.screen().root.get_full_property(connection.intern_atom("RESOURCE_MANAGER"), 0)
        if resources is None:
            return None
        value = resources.value.decode() if isinstance(resources.value, bytes) else str(resources.value)
        for line in value.splitlines():
            if line.startswith("Xft.dpi:"):
                return float(line.split(":", 1)[1].strip()) / 96.0
        return None
    except (ValueError, UnicodeDecodeError):
        return None
    finally:
        connection.close()


def platform_scale() -> float:
    """The scale factor the platform reports for its monitors (1.0 where it reports none)."""
    override = os.environ.get("HOLODESK_SCALE")
    if override:
        try:
            value = float(override)
        except ValueError:
            raise CaptureError(f"HOLODESK_SCALE must be a number, got {override!r}") from None
        if value <= 0:
            raise CaptureError(f"HOLODESK_SCALE must be positive, got {override!r}")
        return value
    if sys.platform.startswith("linux") and os.environ.get("DISPLAY"):
        return _x11_scale() or 1.0
    return 1.0


class ScreenCapture:
    """Lists monitors and grabs frames. One mss handle per thread, as mss requires on X11."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._scale = platform_scale()

    def _mss(self) -> Any:
        handle = getattr(self._local, "mss", None)
        if handle is None:
            try:
                handle = mss.MSS()
            except mss.exception.ScreenShotError as exc:
                raise CaptureError(f"cannot open the display for capture: {exc}") from exc
            self._local.mss = handle
        return handle

    def monitors(self) -> list[Monitor]:
        """Every monitor, in mss order (index 1 first), with geometry in physical pixels."""
        try:
            raw = self._mss().monitors
        except mss.exception.ScreenShotError as exc:
            raise CaptureError(f"cannot list monitors: {exc}") from exc
        if len(raw) < 2:
            raise CaptureError("the display reports no monitors")
        return [
            Monitor(
                index=index,
                rect=Rect(int(m["left"]), int(m["top"]), int(m["width"]), int(m["height"])),
                scale=self._scale,
                name=str(m.get("name") or m.get("output") or ""),
                is_primary=bool(m.get("is_primary", index == 1)),
            )
            for index, m in enumerate(raw[1:], start=1)
        ]

    def grab_monitor(self, index: int) -> ScreenFrame:
        """Capture monitor `index` (1-based, mss order)."""
        monitors = self.monitors()
        if not 1 <= index <= len(monitors):
            raise CaptureError(f"there is no monitor {index}; this display has {len(monitors)}")
        monitor = monitors[index - 1]
        return self._grab(monitor.rect, monitor, monitors)

    def grab_desktop(self) -> ScreenFrame:
        """Capture the bounding box of every monitor."""
        monitors = self.monitors()
        return self._grab(virtual_desktop(monitors), None, monitors)

    def grab(self, monitor: int | None) -> ScreenFrame:
        """`grab_monitor(monitor)`, or the whole desktop when `monitor` is None."""
        return self.grab_desktop() if monitor is None else self.grab_monitor(monitor)

    def _grab(self, rect: Rect, monitor: Monitor | None, monitors: Sequence[Monitor]) -> ScreenFrame:
        box = {"left": rect.left, "top": rect.top, "width": rect.width, "height": rect.height}
        try:
            shot = self._mss().grab(box)
        except mss.exception.ScreenShotError as exc:
            raise CaptureError(f"screen grab of {rect} failed: {exc}") from exc
        captured_at = time.monotonic()
        pixels = np.frombuffer(shot.raw, dtype=np.uint8).reshape(shot.height, shot.width, 4)
        return ScreenFrame(
            pixels=pixels,
            region=Rect(int(shot.left), int(shot.top), int(shot.width), int(shot.height)),
            monitor=monitor,
            monitors=tuple(monitors),
            captured_at=captured_at,
        )

    def close(self) -> None:
        handle = getattr(self._local, "mss", None)
        if handle is not None:
            handle.close()
            self._local.mss = None
