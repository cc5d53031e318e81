"""Figure 4b: one model step on the tiny local checkpoint, split into preprocess, prefill and decode;
how the step grows with the history in the prompt; and what the fast tiler saves in a step.

`LocalBackend` loads the tiny random-weight checkpoint (inference/standin) on the CPU in
bfloat16 (its architecture's only dtype) through trust_remote_code, as it would load Holotron-12B
(with the tests' mamba_ssm stand-in on the path: bench/standin_kernels.py). A step is the holotron profile's
navigation request for 1920x1080 screenshots (`desktop_picture`, 9 tiles each) with 1..30 PastSteps,
decoding a fixed 32 new tokens at most, timed by the backend's own StepTimings:
preprocess (chat template, tokenizer, and cutting the images into tiles: by default
inference.tiling's fast path, which LocalBackend uses once its load-time probe agrees with the
processor), prefill (vision + prompt forward + first token), decode (the remaining tokens).

Side by side, interleaved round by round in one rotation:
- history 1..30 with one screenshot on the default backend (fast tiling); "history 1" is the
  baseline of the others;
- 1 and 3 screenshots (history 1) on a second backend loaded with `fast_tiling=False`, which
  tiles with the processor's own PIL code, next to the same requests on the default backend:
  preprocess and whole step, the stock processor the baseline.

The tiny model's compute says nothing about Holotron-12B's (bench/gpu_step.py measures that on
a GPU); what carries over is the preprocessing, which is the same code for both. So the processor's
image tiling alone is also timed next to inference.tiling's fast path on the same image.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

import numpy as np

from bench.harness import BenchResult, BenchSettings, interleaved, stats_of
from bench.screens import desktop_picture
from holodesk.automation.actions import Click, Move, Point, TypeText
from holodesk.automation.proposal import PastStep, StepTimings
from holodesk.automation.screen import frame_from_image
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.tiling import fast_frame_tiles, fast_tiles, reference_tiles

NAME = "model_step"
HISTORY_LENGTHS = (1, 5, 10, 20, 30)
NEW_TOKENS = 32
SCREENSHOTS = (1, 3)  # holotron keeps the 3 most recent screenshots in its prompt
STOCK, FAST = "processor", "fast"
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


def tiling_figure(tiler: str, shots: int, part: str) -> str:
    """The table's name for one tiler's preprocess or step time with `shots` screenshots."""
    return f"{shots} screenshot{'s' if shots > 1 else ''} {part}, {tiler} tiling"


def run(settings: BenchSettings) -> BenchResult:
    from bench.standin_kernels import use_test_kernels
    from holodesk.inference.local import LocalBackend
    from holodesk.inference.profiles import get_profile
    from holodesk.inference.standin import build_tiny_checkpoint, isolate_hf_environment

    isolate_hf_environment()  # before transformers loads: offline, private remote-code cache
    use_test_kernels()  # the stand-in imports mamba-ssm, as Holotron-12B does
    import transformers

    transformers.utils.logging.set_verbosity_error()  # the slow-Mamba-path notice is expected on a CPU
    logging.getLogger("holodesk.inference.local").setLevel(logging.ERROR)  # and so is "running on the CPU"
    result = BenchResult(NAME)
    lengths = (1, 10, 30) if settings.quick else HISTORY_LENGTHS
    profile = get_profile("holotron")
    # Oldest first; the newest (seed 0) is the one-screenshot requests' image and the tiling figures'.
    frames = [frame_from_image(desktop_picture(1920, 1080, seed=seed)) for seed in reversed(range(max(SCREENSHOTS)))]
    images = [profile.prepare_image(frame) for frame in frames]
    history = past_steps(max(lengths))

    def request(length: int, shots: int) -> ChatRequest:
        chat = profile.navigation_request(TASK, history[:length], images[-shots:])
        return dataclasses.replace(chat, max_new_tokens=NEW_TOKENS)

    # Every case: (backend, request); one rotation interleaves them all. The fast 1-screenshot,
    # history-1 case is "history 1" itself.
    cases: dict[str, tuple[str, ChatRequest]] = {f"history {length}": (FAST, request(length, 1)) for length in lengths}
    tiling_cases = {
        (tiler, shots): "history 1" if (tiler, shots) == (FAST, 1) else f"{tiler} tiling, {shots} screenshots"
        for shots in SCREENSHOTS
        for tiler in (STOCK, FAST)
    }
    for (tiler, shots), name in tiling_cases.items():
        cases.setdefault(name, (tiler, request(1, shots)))  # "history 1" is there already
    timings: dict[str, list[StepTimings]] = {name: [] for name in cases}
    reasons: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
        checkpoint = build_tiny_checkpoint(Path(folder))
        backends = {
            tiler: LocalBackend(checkpoint, device="cpu", max_tiles=12, fast_tiling=tiler == FAST)
            for tiler in (STOCK, FAST)
        }
        try:
            for tiler, backend in backends.items():
                backend.load()
                reasons[tiler] = backend.fast_tiling_reason
                if backend.fast_tiling != (tiler == FAST):
                    raise RuntimeError(f"the {tiler} backend's tiling is {backend.fast_tiling_reason}")
                # Warm-up: the first calls allocate and cache (the largest prompt, the most images).
                backend.generate_detailed(request(1, max(SCREENSHOTS)))
                if tiler == FAST:
                    backend.generate_detailed(request(max(lengths), 1))
            names = list(cases)
            for round_index in range(settings.rounds(3)):
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    tiler, chat = cases[name]
                    timings[name].append(backends[tiler].generate_detailed(chat).timings)
        finally:
            for backend in backends.values():
                backend.unload()

    first = timings[f"history {lengths[0]}"]
    for part in ("preprocess_s", "prefill_s", "decode_s"):
        values = [getattr(t, part) * 1000 for t in first]
        result.add(f"history {lengths[0]} {part.removesuffix('_s')}", stats_of(values))
    baseline = f"history {lengths[0]} step"
    for length in lengths:
        values = [t.total_s * 1000 for t in timings[f"history {length}"]]
        tokens_in = timings[f"history {length}"][0].tokens_in
        tokens_out = timings[f"history {length}"][0].tokens_out
        result.add(
            f"history {length} step",
            stats_of(values),
            baseline=None if length == lengths[0] else baseline,
            note=f"{tokens_in} prompt tokens, {tokens_out} new",
        )
        result.extra[f"history {length}"] = {"tokens_in": tokens_in, "tokens_out": tokens_out}
    decode_rate = [t.tokens_out / t.decode_s for t in first if t.decode_s > 0 and t.tokens_out > 1]
    if decode_rate:
        result.notes.append(f"tiny model decode: {np.median(decode_rate):.0f} tokens/s (CPU, bfloat16)")

    for shots in SCREENSHOTS:
        for part, field in (("preprocess", "preprocess_s"), ("step", "total_s")):
            for tiler in (STOCK, FAST):
                case = tiling_cases[tiler, shots]
                values = [getattr(t, field) * 1000 for t in timings[case]]
                result.add(
                    tiling_figure(tiler, shots, part),
                    stats_of(values),
                    baseline=None if tiler == STOCK else tiling_figure(STOCK, shots, part),
                    note=f"{timings[case][0].tokens_in} prompt tokens" if part == "step" else "",
                )
        result.extra[f"{shots} screenshots"] = {"tokens_in": timings[tiling_cases[STOCK, shots]][0].tokens_in}
    result.notes.append(
        f"tiling in the step: history 1 with 1 and {max(SCREENSHOTS)} screenshots, a backend loaded with"
        f" fast_tiling=False ({reasons[STOCK]}) next to the default one ({reasons[FAST]})"
    )

    pil_image = images[-1].image
    rgb = np.asarray(pil_image)
    frame = frames[-1]
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
        f"1920x1080 screenshots (9 tiles, {9 * 256} image tokens each), max {NEW_TOKENS} new tokens, greedy;"
        " the tiling figures are one screenshot's share of preprocess (processor: fast_tiling=False; fast: default)"
    )
    return result
