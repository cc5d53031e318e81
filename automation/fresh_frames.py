"""Frame sources that must be told when Holodesk itself changed the screen (hid its windows).

An X11 grab reads the X server's picture as it is now, so hiding a window, a round trip and a short
settle are enough. A compositor's screen cast (the Wayland portal's PipeWire stream) delivers
pictures later and only when the screen changes: the newest one may still show a window that was
just hidden. Such a source implements `FreshFrameSource`; whoever hides a window before a grab calls
`require_frame_after(moment, areas, traces)`, and the next grab then uses only pictures of those
areas' monitors that arrived after `moment`, or fails with a CaptureError saying so.

Arrival time alone is not enough: under XWayland the unmap reaches the compositor some time after
the X round trip returns, so a picture can arrive after `moment` and still show the window. Each
hidden window therefore leaves a `WindowTrace`: a few of its own opaque pixels (screen space,
colour), picked well spread in place and colour by `pick_samples`. `windows_still_shown` finds the
windows whose samples a picture still shows (a clear majority of them, within a small tolerance for
colour conversion); a background that happens to match a few samples does not count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect

SAMPLES_PER_WINDOW = 24
# Fewer samples than this on a monitor cannot tell the window from a coincidence: not checked.
MIN_SAMPLES = 4
# Per channel: the compositor's and the stream's colour conversions may round differently.
COLOUR_TOLERANCE = 6
STILL_SHOWN_SHARE = 0.75  # of a window's samples on the monitor that must match
_CANDIDATES = 4096  # pixels the spreading considers at most (evenly thinned)

Colour = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class PixelSample:
    """One pixel of a window: where (screen space, or image space before mapping) and its RGB colour."""

    at: Point
    colour: Colour


@dataclass(frozen=True, slots=True)
class WindowTrace:
    """How to recognise a hidden window in a picture: its name (for messages), area and samples."""

    window: str
    area: Rect  # screen space
    samples: tuple[PixelSample, ...]


@runtime_checkable
class FreshFrameSource(Protocol):
    """A frame source whose pictures can trail the screen (see the module docstring)."""

    def require_frame_after(self, moment: float, areas: Sequence[Rect], traces: Sequence[WindowTrace] = ()) -> None:
        """The screen changed in `areas` (screen space) at `moment` (time.monotonic()); `traces` tell
        the windows that were hidden there apart from what is now beneath them."""
        ...


def pick_samples(rgba: np.ndarray, limit: int = SAMPLES_PER_WINDOW) -> list[PixelSample]:
    """Up to `limit` opaque pixels of an HxWx4 RGBA image, spread in place and colour (image space).

    Pixels inside a patch of one colour (all 8 neighbours opaque and equal) come first: their colour
    survives scaling and a pixel of rounding when they are looked up on the screen. Among those,
    each next pick is the one farthest from the picks so far (distance in place plus in colour), so
    a background would have to match many colours in many places to pass for the window.
    """
    if rgba.ndim != 3 or rgba.shape[2] != 4:
        raise ValueError(f"pick_samples needs an HxWx4 RGBA image, got shape {rgba.shape}")
    if limit <= 0:
        return []
    opaque = rgba[..., 3] == 255
    interior = np.zeros_like(opaque)
    height, width = opaque.shape
    if height >= 3 and width >= 3:
        centre = rgba[1:-1, 1:-1, :3]
        inner = opaque[1:-1, 1:-1].copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy == 0 and dx == 0:
                    continue
                near = rgba[1 + dy : height - 1 + dy, 1 + dx : width - 1 + dx]
                inner &= (near[..., 3] == 255) & (near[..., :3] == centre).all(axis=2)
        interior[1:-1, 1:-1] = inner
    pool = interior if np.count_nonzero(interior) >= limit else opaque
    rows, cols = np.nonzero(pool)
    if rows.size == 0:
        return []
    if rows.size > _CANDIDATES:
        keep = np.linspace(0, rows.size - 1, _CANDIDATES).astype(np.intp)
        rows, cols = rows[keep], cols[keep]
    colours = rgba[rows, cols, :3].astype(np.float64)
    place_scale = 1.0 / max(math.hypot(height, width), 1.0)
    colour_scale = 0.5 / math.sqrt(3 * 255**2)
    chosen = [0]
    nearest = np.full(rows.size, np.inf)
    while len(chosen) < min(limit, rows.size):
        last = chosen[-1]
        place = np.hypot(rows - rows[last], cols - cols[last]) * place_scale
        colour = np.sqrt(((colours - colours[last]) ** 2).sum(axis=1)) * colour_scale
        nearest = np.minimum(nearest, place + colour)
        chosen.append(int(np.argmax(nearest)))
    return [
        PixelSample(Point(int(cols[i]), int(rows[i])), (int(colours[i, 0]), int(colours[i, 1]), int(colours[i, 2])))
        for i in chosen
    ]


def samples_in(trace: WindowTrace, region: Rect) -> list[PixelSample]:
    return [sample for sample in trace.samples if region.contains(sample.at)]


def is_traceable(trace: WindowTrace, region: Rect) -> bool:
    """Whether a picture of `region` can tell if it shows the window (enough samples fall in it)."""
    return len(samples_in(trace, region)) >= MIN_SAMPLES


def still_shows(bgrx: np.ndarray, region: Rect, trace: WindowTrace) -> bool:
    """Whether a picture (HxWx4 BGRx of `region`, screen space) still shows the traced window."""
    inside = samples_in(trace, region)
    if len(inside) < MIN_SAMPLES:
        return False  # too few to tell: the caller falls back on timing (see is_traceable)
    rows = np.array([sample.at.y - region.top for sample in inside])
    cols = np.array([sample.at.x - region.left for sample in inside])
    seen = bgrx[rows, cols, 2::-1].astype(np.int16)  # BGR -> RGB
    wanted = np.array([sample.colour for sample in inside], dtype=np.int16)
    matched = int((np.abs(seen - wanted) <= COLOUR_TOLERANCE).all(axis=1).sum())
    return matched >= math.ceil(STILL_SHOWN_SHARE * len(inside))


def windows_still_shown(bgrx: np.ndarray, region: Rect, traces: Sequence[WindowTrace]) -> list[WindowTrace]:
    """The traced windows a picture of `region` still shows (see `still_shows`)."""
    if bgrx.shape[:2] != (region.height, region.width):
        raise ValueError(f"a {bgrx.shape[1]}x{bgrx.shape[0]} picture cannot be of the region {region}")
    return [trace for trace in traces if still_shows(bgrx, region, trace)]


def drop_covered_samples(traces: Sequence[WindowTrace]) -> list[WindowTrace]:
    """Each trace without its samples inside a smaller traced window's area.

    Where two hidden windows overlap (a marker handle over the full-screen overlay) a picture shows
    only the upper one; Holodesk's small windows are raised above its large ones, so the larger
    window's samples there say nothing about whether it is still shown."""
    kept = []
    for trace in traces:
        size = trace.area.width * trace.area.height
        above = [other.area for other in traces if other is not trace and other.area.width * other.area.height < size]
        samples = tuple(sample for sample in trace.samples if not any(area.contains(sample.at) for area in above))
        kept.append(WindowTrace(trace.window, trace.area, samples))
    return kept
