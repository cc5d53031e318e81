"""Figure 1: from an mss grab of a real (Xvfb) screen to the model-ready tiles, fast path vs PIL.

For a 1920x1080 and a 2560x1440 screen showing `bench.screens.desktop_picture`, interleaved:
- grab: `ScreenCapture.grab(1)` alone (mss over X11), the floor under the others;
- grab+PIL tiles: the grab, then `inference.tiling.reference_frame_tiles` (a PIL RGB image,
  PIL bicubic resizes, crops, numpy normalization: what the checkpoint's processor does) - the baseline;
- grab+fast tiles: the grab, then `fast_frame_tiles` (torch on the BGRA pixels, torch's own thread
  count: 2 here) into a new float32 tensor; "bf16" the same in bfloat16; "1 thread" with
  `threads=1` (what a caller that must leave the other cores alone gets);
- grab+device tiles: the path the local backend takes on a CUDA GPU (upload the uint8 frame, resize,
  cut and normalize there into bf16), timed to the tiles being ready (synchronized) on "cuda" when
  torch sees a GPU, and the same code on "cpu" everywhere (the figure the CPU test path costs).
The goal (under 30 ms at 2560x1440) is for grab+fast tiles, float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bench.harness import BenchResult, BenchSettings, Stats, interleaved
from bench.screens import desktop_display
from holodesk.automation.screen import ScreenCapture
from holodesk.inference.tiling import choose_grid, fast_frame_tiles, reference_frame_tiles

NAME = "capture"
SCREENS = ((1920, 1080), (2560, 1440))
# Rounds per screen: bursts of load from other processes last seconds; a longer window dilutes them.
ROUNDS = 25
GOAL_MS_2560 = 30.0


def _measure(width: int, height: int, settings: BenchSettings) -> tuple[dict[str, Stats], str]:
    """Interleaved timings on a fresh Xvfb of this size, and a note on the tiles and their accuracy."""
    import torch

    with desktop_display(width, height):
        capture = ScreenCapture()
        try:
            frame = capture.grab(1)
            grid = choose_grid(width, height)
            difference = np.abs(fast_frame_tiles(frame).numpy() - reference_frame_tiles(frame))
            note = (
                f"{width}x{height}: {grid.columns}x{grid.rows} tiles + thumbnail = {grid.count} x 3 x 512 x 512;"
                f" fast vs PIL max |diff| {difference.max():.4f}, mean {difference.mean():.2e} (normalized units)"
            )
            cases: dict[str, Callable[[], object]] = {
                "grab": lambda: capture.grab(1),
                "grab+PIL tiles": lambda: reference_frame_tiles(capture.grab(1)),
                "grab+fast tiles": lambda: fast_frame_tiles(capture.grab(1)),
                "grab+fast tiles bf16": lambda: fast_frame_tiles(capture.grab(1), dtype=torch.bfloat16),
                "grab+fast tiles 1 thread": lambda: fast_frame_tiles(capture.grab(1), threads=1),
                "grab+device tiles cpu": lambda: fast_frame_tiles(capture.grab(1), device="cpu"),
            }
            if torch.cuda.is_available():

                def on_cuda() -> object:
                    tiles = fast_frame_tiles(capture.grab(1), device="cuda", dtype=torch.bfloat16)
                    torch.cuda.synchronize()
                    return tiles

                on_cuda()  # the first call pays for CUDA's start-up
                cases["grab+device tiles cuda bf16"] = on_cuda
            return interleaved(cases, settings.rounds(ROUNDS), settings.warmup), note
        finally:
            capture.close()


def run(settings: BenchSettings) -> BenchResult:
    import torch

    result = BenchResult(NAME)
    for width, height in SCREENS[-1:] if settings.quick else SCREENS:
        stats, note = _measure(width, height, settings)
        result.notes.append(note)
        size = f"{width}x{height}"
        baseline = f"{size} grab+PIL tiles"
        goal = GOAL_MS_2560 if (width, height) == (2560, 1440) else None
        result.add(f"{size} grab", stats["grab"], baseline=baseline)
        result.add(baseline, stats["grab+PIL tiles"])
        result.add(f"{size} grab+fast tiles", stats["grab+fast tiles"], baseline=baseline, goal=goal)
        for variant in ("bf16", "1 thread"):
            result.add(f"{size} grab+fast tiles {variant}", stats[f"grab+fast tiles {variant}"], baseline=baseline)
        for variant in ("cpu", "cuda bf16"):
            if f"grab+device tiles {variant}" in stats:
                result.add(
                    f"{size} grab+device tiles {variant}", stats[f"grab+device tiles {variant}"], baseline=baseline
                )
    result.notes.append(f"torch threads: {torch.get_num_threads()}")
    return result
