"""Figure 4b: one model step on the tiny local checkpoint, split into preprocess, prefill and decode,
and how the step grows with the history in the prompt.

`LocalBackend` loads the tiny random-weight checkpoint (tests/support/tiny_vlm) on the CPU in
float32 through trust_remote_code, as it would load Holotron-12B. A step is the holotron profile's
navigation request for one 1920x1080 screenshot (`desktop_picture`, 9 tiles) with 1..30 PastSteps,
decoding a fixed 32 new tokens at most, timed by the backend's own StepTimings:
preprocess (chat template, tokenizer, the processor's PIL tiling), prefill (vision + prompt
forward + first token), decode (the remaining tokens). Requests of every history length are
interleaved round by round; "history 1" is the baseline of the others.

The tiny model's compute says nothing about Holotron-12B's (bench/gpu_step.py measures that on
a GPU); what carries over is the preprocessing, which is the same code for both. So the processor's
image tiling alone is timed next to inference.tiling's fast path on the same image.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

import numpy as np

from automation.actions import Click, Move, Point, TypeText
from automation.proposal import PastStep, StepTimings
from automation.screen import frame_from_image
from bench.harness import BenchResult, BenchSettings, interleaved, stats_of
from bench.screens import desktop_picture
from inference.tiling import fast_frame_tiles, fast_tiles, reference_tiles

NAME = "model_step"
HISTORY_LENGTHS = (1, 5, 10, 20, 30)
NEW_TOKENS = 32
TASK = "Archive every unread newsletter in my mail"


def past_steps(count: int) -> list[PastStep]:
    """Earlier steps as the engine keeps them: an action in model space, a note and a thought."""
    actions = (Click(Point(412, 318)), Move(Point(87, 240)), TypeText("weekly digest"), Click(Point(903, 74)))
    return [
        PastStep(
            actions[index % len(actions)],
            note=f"Step {index + 1}: the inbox shows {30 - index} unread messages, newest first.",
            thought="Open the next unread newsletter, check the sender, then archive it from the toolbar.",
        )
        for index in range(count)
    ]


def run(settings: BenchSettings) -> BenchResult:
    from inference.local import LocalBackend
    from inference.profiles import get_profile
    from tests.support.tiny_vlm import build_tiny_checkpoint, isolate_hf_environment

    isolate_hf_environment()  # before transformers loads: offline, private remote-code cache
    import transformers

    transformers.utils.logging.set_verbosity_error()  # the slow-Mamba-path notice is expected on a CPU
    logging.getLogger("inference.local").setLevel(logging.ERROR)  # and so is "running on the CPU"
    result = BenchResult(NAME)
    lengths = (1, 10, 30) if settings.quick else HISTORY_LENGTHS
    profile = get_profile("holotron")
    frame = frame_from_image(desktop_picture(1920, 1080))
    image = profile.prepare_image(frame)
    history = past_steps(max(lengths))
    requests = {
        length: dataclasses.replace(
            profile.navigation_request(TASK, history[:length], [image]), max_new_tokens=NEW_TOKENS
        )
        for length in lengths
    }
    timings: dict[int, list[StepTimings]] = {length: [] for length in lengths}
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
        backend = LocalBackend(build_tiny_checkpoint(Path(folder)), device="cpu", dtype="float32", max_tiles=12)
        backend.load()
        try:
            backend.generate_detailed(requests[lengths[-1]])  # warm-up: the first call allocates and caches
            for round_index in range(settings.rounds(3)):
                shift = round_index % len(lengths)
                for length in lengths[shift:] + lengths[:shift]:
                    timings[length].append(backend.generate_detailed(requests[length]).timings)
        finally:
            backend.unload()

    first = timings[lengths[0]]
    for part in ("preprocess_s", "prefill_s", "decode_s"):
        values = [getattr(t, part) * 1000 for t in first]
        result.add(f"history {lengths[0]} {part.removesuffix('_s')}", stats_of(values))
    baseline = f"history {lengths[0]} step"
    for length in lengths:
        values = [t.total_s * 1000 for t in timings[length]]
        tokens_in = timings[length][0].tokens_in
        tokens_out = timings[length][0].tokens_out
        result.add(
            f"history {length} step",
            stats_of(values),
            baseline=None if length == lengths[0] else baseline,
            note=f"{tokens_in} prompt tokens, {tokens_out} new",
        )
        result.extra[f"history {length}"] = {"tokens_in": tokens_in, "tokens_out": tokens_out}
    decode_rate = [t.tokens_out / t.decode_s for t in first if t.decode_s > 0 and t.tokens_out > 1]
    if decode_rate:
        result.notes.append(f"tiny model decode: {np.median(decode_rate):.0f} tokens/s (CPU, float32)")

    pil_image = image.image
    rgb = np.asarray(pil_image)
    tiling = interleaved(
        {
            "processor tiling (PIL)": lambda: reference_tiles(pil_image),
            "fast tiling (RGB image)": lambda: fast_tiles(rgb, channels="RGB"),
            "fast tiling (BGRA frame)": lambda: fast_frame_tiles(frame),
        },
        settings.rounds(10),
        settings.warmup,
    )
    tiling_baseline = "processor tiling (PIL)"
    for name, stats in tiling.items():
        result.add(name, stats, baseline=None if name == tiling_baseline else tiling_baseline)
    result.notes.append(
        f"one 1920x1080 screenshot (9 tiles, {9 * 256} image tokens), max {NEW_TOKENS} new tokens, greedy;"
        " the processor tiling figure is the image part of preprocess"
    )
    return result
