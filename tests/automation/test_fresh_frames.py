"""Recognising a hidden window in a picture by its traced pixels (automation.fresh_frames), on numpy frames."""

from __future__ import annotations

import numpy as np
import pytest

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.fresh_frames import (
    COLOUR_TOLERANCE,
    SAMPLES_PER_WINDOW,
    PixelSample,
    WindowTrace,
    drop_covered_samples,
    is_traceable,
    pick_samples,
    windows_still_shown,
)

REGION = Rect(100, 50, 160, 120)  # a monitor right of and below the origin: samples are screen space
BACKGROUND = (30, 200, 60)
MARKER = (255, 0, 170)
LABEL = (240, 240, 250)


def window_image() -> np.ndarray:
    """An overlay-like RGBA window, 60x40: transparent but for a marker patch, a label and a thin line."""
    rgba = np.zeros((40, 60, 4), dtype=np.uint8)
    rgba[5:15, 5:15] = (*MARKER, 255)
    rgba[25:35, 20:55] = (*LABEL, 255)
    rgba[20, :] = (10, 10, 20, 255)  # a 1-pixel line: no interior pixels
    rgba[0:4, 40:60] = (255, 255, 255, 128)  # translucent: never a sample
    return rgba


def traced_window() -> WindowTrace:
    at = Point(150, 80)  # where picture() paints the window
    samples = tuple(PixelSample(Point(at.x + s.at.x, at.y + s.at.y), s.colour) for s in pick_samples(window_image()))
    return WindowTrace("Holodesk overlay", Rect(at.x, at.y, 60, 40), samples)


def picture(*, with_window: bool, shift: int = 0) -> np.ndarray:
    """A BGRx picture of REGION: the background, and the window at (150, 80) when still shown."""
    bgrx = np.zeros((REGION.height, REGION.width, 4), dtype=np.uint8)
    bgrx[..., :3] = BACKGROUND[::-1]
    if with_window:
        rgba = window_image()
        top, left = 80 - REGION.top, 150 - REGION.left
        area = bgrx[top : top + 40, left : left + 60]
        opaque = rgba[..., 3] == 255
        area[opaque, :3] = np.clip(rgba[opaque, 2::-1].astype(int) + shift, 0, 255)
    return bgrx


def test_samples_are_opaque_well_spread_and_prefer_patches_of_one_colour() -> None:
    samples = pick_samples(window_image())
    assert len(samples) == SAMPLES_PER_WINDOW
    rgba = window_image()
    for sample in samples:
        x, y = sample.at.x, sample.at.y
        assert rgba[y, x, 3] == 255 and tuple(rgba[y, x, :3]) == sample.colour
        patch = rgba[y - 1 : y + 2, x - 1 : x + 2]
        assert (patch == rgba[y, x]).all()  # inside a patch: the thin line and its edges are skipped
    colours = {sample.colour for sample in samples}
    assert colours == {MARKER, LABEL}  # both of the window's colours
    assert len({sample.at for sample in samples}) == len(samples)
    marker_samples = [s for s in samples if s.colour == MARKER]
    assert 3 <= len(marker_samples) <= SAMPLES_PER_WINDOW - 3  # spread, not all in one patch


def test_a_window_of_thin_lines_is_sampled_on_its_opaque_pixels() -> None:
    rgba = np.zeros((20, 20, 4), dtype=np.uint8)
    rgba[10, 2:18] = (*MARKER, 255)
    samples = pick_samples(rgba)
    assert len(samples) == 16 and all(s.at.y == 10 and s.colour == MARKER for s in samples)
    assert pick_samples(np.zeros((20, 20, 4), dtype=np.uint8)) == []  # nothing opaque: no trace
    with pytest.raises(ValueError, match="HxWx4"):
        pick_samples(np.zeros((20, 20, 3), dtype=np.uint8))


def test_a_picture_still_showing_the_window_is_rejected() -> None:
    trace = traced_window()
    assert is_traceable(trace, REGION)
    assert windows_still_shown(picture(with_window=True), REGION, [trace]) == [trace]
    # Within the tolerance for colour conversion it is still the window.
    assert windows_still_shown(picture(with_window=True, shift=COLOUR_TOLERANCE), REGION, [trace]) == [trace]


def test_a_fresh_picture_is_accepted() -> None:
    assert windows_still_shown(picture(with_window=False), REGION, [traced_window()]) == []


def test_a_background_that_matches_a_few_samples_is_accepted() -> None:
    trace = traced_window()
    bgrx = picture(with_window=False)
    for sample in trace.samples[: len(trace.samples) // 2]:  # half of them coincide
        bgrx[sample.at.y - REGION.top, sample.at.x - REGION.left, :3] = sample.colour[::-1]
    assert windows_still_shown(bgrx, REGION, [trace]) == []
    for sample in trace.samples:  # all of them: that is the window
        bgrx[sample.at.y - REGION.top, sample.at.x - REGION.left, :3] = sample.colour[::-1]
    assert windows_still_shown(bgrx, REGION, [trace]) == [trace]


def test_only_the_samples_on_the_pictured_monitor_count() -> None:
    trace = traced_window()
    elsewhere = Rect(REGION.right, REGION.top, 100, 100)  # the next monitor: none of its samples
    assert not is_traceable(trace, elsewhere)
    assert windows_still_shown(np.zeros((100, 100, 4), dtype=np.uint8), elsewhere, [trace]) == []
    with pytest.raises(ValueError, match="cannot be of the region"):
        windows_still_shown(np.zeros((10, 10, 4), dtype=np.uint8), REGION, [trace])


def test_samples_under_a_smaller_hidden_window_are_dropped_from_the_larger() -> None:
    overlay = traced_window()
    handle_area = Rect(150, 80, 20, 20)  # over the marker patch
    handle = WindowTrace("Holodesk target handle", handle_area, (PixelSample(Point(155, 85), MARKER),))
    kept_overlay, kept_handle = drop_covered_samples([overlay, handle])
    assert kept_handle == handle
    assert all(not handle_area.contains(s.at) for s in kept_overlay.samples)
    assert 0 < len(kept_overlay.samples) < len(overlay.samples)
