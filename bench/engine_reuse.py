"""The in-process engine over a 30-step task, with and without the state kept between steps.

A tiny random-weight checkpoint in Holotron-12B's real layout (bench/nemotron_tiny) runs in
the engine on the CPU, float32. Each step is the Holotron profile's navigation request for that point
of the task: the history so far (one assistant turn and one tool output per earlier step) and a new
1280x800 screenshot (6 tiles and a thumbnail: 1,792 image tokens). The screenshot window keeps 4 and drops 3 at once
(ImageBudget.drop_block), so the prompt grows only at its end two steps in three.

Two engines on the same files answer the same 30 requests in turn: one keeps its state (prefills
only what was appended; each screenshot's features computed once), one prefills everything every
step. Per step: tokens in, tokens prefilled, step time; the answers must be the same token for token.
The figure to watch is history 30 (the last three steps: the window's cycle of one re-prefill and two
appends) against step 1: without reuse the prompt grows with the history and so does the step; with
reuse a step costs about one new turn whatever the history. Tokens prefilled are exact; step times on
a shared machine move with its load (the two engines alternate so that both see it alike).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from bench.harness import BenchResult, BenchSettings, stats_of
from bench.model_step import TASK, past_steps
from bench.screens import desktop_picture
from holodesk.automation.screen import frame_from_image
from holodesk.inference.engine.spec import transformers_problem
from holodesk.inference.profiles.base import ChatRequest, ImageBudget
from holodesk.inference.profiles.holotron import HolotronProfile

NAME = "engine_reuse"
STEPS = 30
# Quick: 7 steps end, as 30 do, on one whole cycle of the window (here the re-prefill at step 5 after
# the first block of screenshots is dropped, then two appends): the tail ratio compares the same thing.
QUICK_STEPS = 7
NEW_TOKENS = 16
WINDOW = ImageBudget(keep_screenshots=4, drop_block=3)


def run(settings: BenchSettings) -> BenchResult:
    # heavy: safetensors, torch; heavy: torch
    from bench.nemotron_tiny import build_nemotron_tiny
    from holodesk.inference.engine.runner import Engine, EngineResult

    result = BenchResult(NAME)
    problem = transformers_problem()
    if problem:
        result.notes.append(f"not run: {problem}")
        return result
    import transformers

    transformers.utils.logging.set_verbosity_error()  # the pure-torch Mamba notice is expected on a CPU
    logging.getLogger("transformers").setLevel(logging.ERROR)
    steps = QUICK_STEPS if settings.quick else STEPS
    profile = HolotronProfile(WINDOW)
    history = past_steps(steps)
    shots = [profile.prepare_image(frame_from_image(desktop_picture(1280, 800, seed=n))) for n in range(steps)]

    def request(step: int) -> ChatRequest:
        chat = profile.navigation_request(TASK, history[:step], shots[: step + 1])
        return dataclasses.replace(chat, max_new_tokens=NEW_TOKENS)

    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as work:
        checkpoint = build_nemotron_tiny(Path(work) / "nemotron_tiny", dtype="float32")
        kept = Engine(checkpoint, dtype="float32", reuse=True)
        fresh = Engine(checkpoint, dtype="float32", reuse=False)
        for engine in (kept, fresh):  # one unmeasured request each: the first call pays torch's warm-up
            engine.generate(request(0), max_new_tokens=2)
            engine.forget()
        rows: list[dict[str, float | int]] = []
        for step in range(steps):
            chat = request(step)
            # Alternate which engine goes first so that neither always meets a warmer cache.
            order = (kept, fresh) if step % 2 == 0 else (fresh, kept)
            answers: dict[int, EngineResult] = {}
            for engine in order:
                answers[id(engine)] = engine.generate(chat, ignore_stop=True)
            with_reuse, without = answers[id(kept)], answers[id(fresh)]
            if with_reuse.new_ids != without.new_ids:
                raise AssertionError(f"step {step + 1}: the kept state changed the answer")
            rows.append(
                {
                    "step": step + 1,
                    "images": len(chat.images),
                    "tokens_in": len(with_reuse.prompt_ids),
                    "prefilled_with_reuse": with_reuse.prefilled_tokens,
                    "ms_with_reuse": with_reuse.timings.total_s * 1000,
                    "prefilled_without": without.prefilled_tokens,
                    "ms_without": without.timings.total_s * 1000,
                }
            )
    result.extra["steps"] = rows
    result.extra["vision_runs"] = {"with_reuse": kept.vision_runs, "without": fresh.vision_runs}
    # History 30 is the last three steps: the window's cycle (one re-prefill after a block of screenshots
    # is dropped, two appends), against step 1. Tokens prefilled are exact; times move with the machine's load.
    tail = rows[-3:]
    for label, tokens, ms in (
        ("with reuse", "prefilled_with_reuse", "ms_with_reuse"),
        ("without reuse", "prefilled_without", "ms_without"),
    ):
        goal = 1.15 if label == "with reuse" else None
        token_ratio = sum(float(r[tokens]) for r in tail) / 3 / float(rows[0][tokens])
        time_ratios = [float(r[ms]) / float(rows[0][ms]) for r in tail]
        result.add(f"history {steps} / history 1, prefilled tokens, {label}", stats_of([token_ratio], "x"), goal=goal)
        result.add(f"history {steps} / history 1, step time, {label}", stats_of(time_ratios, "x"), goal=goal)
        result.add(f"step 1, {label}", stats_of([float(rows[0][ms])]))
        result.add(f"steps {steps - 2}-{steps}, {label}", stats_of([float(r[ms]) for r in tail]))
    result.notes.append(
        "step | images | tokens in | prefilled (reuse) | ms (reuse) | prefilled (none) | ms (none)\n"
        + "\n".join(
            f"{r['step']:>4} | {r['images']:>6} | {r['tokens_in']:>9} | {r['prefilled_with_reuse']:>17}"
            f" | {r['ms_with_reuse']:>10.0f} | {r['prefilled_without']:>16} | {r['ms_without']:>9.0f}"
            for r in rows
        )
    )
    result.notes.append(
        f"same {NEW_TOKENS} tokens out at every step; vision tower runs: {kept.vision_runs} with reuse,"
        f" {fresh.vision_runs} without"
    )
    return result
