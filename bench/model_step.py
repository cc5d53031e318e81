"""Figure 4b: a model step through the in-process backend over a task, with the state kept and without.

`LocalBackend` (Holodesk's engine) loads the tiny random-weight checkpoint in Holotron-12B's real
layout (bench/nemotron_tiny, float32) on the CPU, twice: one backend keeps the conversation's state
between steps (the product's default), one (`keep_state=False`) prefills every prompt whole. Each
step is the holotron profile's navigation request at that point of a task: the history so far and
a new 1280x800 screenshot (6 tiles and a thumbnail: 1,792 image tokens), in the screenshot window the local backend
runs with (`inference.local.state_keeping_window`: 3 kept, dropped 3 at once, so the prompt grows
only at its end two steps in three). Both backends answer the same requests in turn, alternating
which goes first, and must give the same tokens; each step's StepTimings splits it into preprocess
(template, tokenizer, tiles), prefill and decode.

Step N of the task has N - 1 earlier steps in its prompt ("history N - 1"). The figure to watch is
the history-30 step (the mean of histories 28-30: one window cycle, a moved window and two appends)
over the history-1 step (the second step: an append), with the state kept (goal <= 1.15x) next to
without. The tiny model's compute says nothing about Holotron-12B's (bench/gpu_step.py measures that
on a GPU); what carries over is how much of each prompt is prefilled, which is exact, and the
preprocessing, which is the same code. Step times on a shared machine move with its load.
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from pathlib import Path

from bench.harness import BenchResult, BenchSettings, stats_of
from bench.screens import desktop_picture
from holodesk.automation.actions import Click, Move, Point, TypeText
from holodesk.automation.proposal import PastStep
from holodesk.automation.screen import frame_from_image
from holodesk.inference.profiles.base import ChatRequest, ImageBudget

NAME = "model_step"
HISTORY = 30  # the last step has this many earlier steps in its prompt
NEW_TOKENS = 16
TASK = "Archive every unread newsletter in my mail"
KEPT, WHOLE = "state kept", "no state"


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
    import transformers

    from bench.nemotron_tiny import build_nemotron_tiny
    from holodesk.inference.local import LocalBackend, LocalGeneration, state_keeping_window
    from holodesk.inference.profiles.holotron import HolotronProfile

    transformers.utils.logging.set_verbosity_error()  # the PyTorch Mamba scan notice is expected on a CPU
    logging.getLogger("holodesk.inference.local").setLevel(logging.ERROR)  # and so is "runs on the CPU"
    result = BenchResult(NAME)
    history_length = 7 if settings.quick else HISTORY
    steps = history_length + 1
    profile = HolotronProfile(state_keeping_window(ImageBudget()))
    history = past_steps(steps)
    shots = [profile.prepare_image(frame_from_image(desktop_picture(1280, 800, seed=n))) for n in range(steps)]

    def request(step: int) -> ChatRequest:
        chat = profile.navigation_request(TASK, history[:step], shots[: step + 1])
        return dataclasses.replace(chat, max_new_tokens=NEW_TOKENS)

    rows: list[dict[str, float | int]] = []
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as work:
        checkpoint = build_nemotron_tiny(Path(work) / "nemotron_tiny", dtype="float32")
        backends = {
            KEPT: LocalBackend(checkpoint, device="cpu", keep_state=True),
            WHOLE: LocalBackend(checkpoint, device="cpu", keep_state=False),
        }
        try:
            for backend in backends.values():
                backend.load()
                backend.generate_detailed(request(0))  # unmeasured: the first call pays torch's warm-up
                backend.forget()
            for step in range(steps):
                chat = request(step)
                order = [KEPT, WHOLE] if step % 2 == 0 else [WHOLE, KEPT]
                answers: dict[str, LocalGeneration] = {name: backends[name].generate_detailed(chat) for name in order}
                kept, whole = answers[KEPT], answers[WHOLE]
                if kept.new_token_ids != whole.new_token_ids:
                    raise AssertionError(f"step {step + 1}: the kept state changed the answer")
                rows.append(
                    {
                        "step": step + 1,
                        "images": len(chat.images),
                        "tokens_in": kept.timings.tokens_in,
                        "prefilled_kept": kept.prefilled_tokens,
                        "ms_kept": kept.timings.total_s * 1000,
                        "prefill_ms_kept": kept.timings.prefill_s * 1000,
                        "prefilled_whole": whole.prefilled_tokens,
                        "ms_whole": whole.timings.total_s * 1000,
                        "prefill_ms_whole": whole.timings.prefill_s * 1000,
                    }
                )
        finally:
            for backend in backends.values():
                backend.unload()

    result.extra["steps"] = rows
    # rows[n] has history n; history 1 is the second step, the last three are one window cycle.
    first, tail = rows[1], rows[-3:]
    last = history_length
    for label, key in ((KEPT, "kept"), (WHOLE, "whole")):
        goal = 1.15 if label == KEPT else None
        cycle_ms = sum(float(r[f"ms_{key}"]) for r in tail) / 3
        result.add(
            f"history {last} / history 1 step, {label}",
            stats_of([cycle_ms / float(first[f"ms_{key}"])], "x"),
            goal=goal,
            note=f"mean of histories {last - 2}-{last}",
        )
        token_ratio = sum(float(r[f"prefilled_{key}"]) for r in tail) / 3 / float(first[f"prefilled_{key}"])
        result.add(f"history {last} / history 1 prefilled tokens, {label}", stats_of([token_ratio], "x"))
        result.add(f"history 1 step, {label}", stats_of([float(first[f"ms_{key}"])]))
        result.add(f"history {last - 2}-{last} steps, {label}", stats_of([float(r[f"ms_{key}"]) for r in tail]))
    result.notes.append(
        "history | images | tokens in | prefilled (kept) | ms (kept) | prefilled (none) | ms (none)\n"
        + "\n".join(
            f"{int(r['step']) - 1:>7} | {r['images']:>6} | {r['tokens_in']:>9} | {r['prefilled_kept']:>16}"
            f" | {r['ms_kept']:>9.0f} | {r['prefilled_whole']:>16} | {r['ms_whole']:>9.0f}"
            for r in rows
        )
    )
    result.notes.append(
        f"1280x800 screenshots (1,792 image tokens each), {NEW_TOKENS} new tokens at most, greedy, the same answers"
        f" with and without the state"
    )
    return result
