"""`holodesk doctor --calibrate` on two monitors under Xvfb: real windows, real clicks, exact offsets."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from holodesk.app.gui.calibration import GREEN, RED, MonitorReport, known_points
from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.virtual_display import TWO_MONITORS


def test_known_points_lie_inside_the_window() -> None:
    region = Rect(100, 50, 360, 240)
    points = known_points(region)
    assert len(set(points)) == 5
    assert all(region.contains(p) for p in points)


def test_exact_is_green_and_an_offset_is_red_with_its_size() -> None:
    monitor = Monitor(2, Rect(1920, 0, 1366, 768), 1.5)
    exact = MonitorReport(monitor, [(0, 0)] * 5, 1.5)
    assert exact.line(colour=True).startswith(GREEN + "OK ")
    off = MonitorReport(monitor, [(0, 0), (3, -1), None], 1.0)
    line = off.line(colour=False)
    assert line.startswith("FAIL monitor 2 (1366x768 at 1920,0, scale 1.5, Qt 1)")
    assert "1 of 3 clicks missed" in line
    assert MonitorReport(monitor, [(3, -1)], 1.0).line(colour=True) == (
        f"{RED}FAIL monitor 2 (1366x768 at 1920,0, scale 1.5, Qt 1): 1 clicks, off by up to 3 px: (+3,-1){RESET_}"
    )


RESET_ = "\x1b[0m"


@pytest.mark.display
@pytest.mark.parametrize("xvfb", [TWO_MONITORS], indirect=True, ids=str, scope="module")
@pytest.mark.parametrize(
    ("xft_dpi", "qt_factors", "scales"),
    [
        (None, "1;2", ("scale 1, Qt 1", "scale 1, Qt 2")),  # a different Qt scale on each monitor
        (144, None, ("scale 1.5, Qt 1.5", "scale 1.5, Qt 1.5")),  # an X11 desktop scaled by Xft.dpi
    ],
)
def test_calibration_clicks_land_exactly_on_both_monitors(xvfb, xft_dpi, qt_factors, scales) -> None:  # type: ignore[no-untyped-def]
    if xft_dpi is not None:
        subprocess.run(["xrdb", "-merge"], input=f"Xft.dpi: {xft_dpi}\n".encode(), check=True, timeout=10)
    env = {**os.environ}
    env.pop("QT_SCALE_FACTOR", None)
    if qt_factors is not None:
        env["QT_SCREEN_SCALE_FACTORS"] = qt_factors
    try:
        done = subprocess.run(
            [sys.executable, "-m", "holodesk.app.cli", "doctor", "--calibrate"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    finally:
        if xft_dpi is not None:
            subprocess.run(["xrdb", "-remove"], check=False, timeout=10)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "holodesk doctor --calibrate: 2 monitor(s)"
    assert lines[1].startswith(f"OK   monitor 1 (1920x1080 at 0,0, {scales[0]}): 5 clicks, exact")
    assert lines[2].startswith(f"OK   monitor 2 (1366x768 at 1920,0, {scales[1]}): 5 clicks, exact")
