"""Figure 4b: a model step through the in-process backend over a task, with the state kept and without.

`LocalBackend` (Holodesk's engine) loads the tiny random-weight checkpoint in Holotron-12B's real
layout (bench/nemotron_tiny, float32) on the CPU, three times: in the trained screenshot window (the
last 3 screenshots, older ones as placeholder text: the product's default, as H Company's agent loop
shows them) once keeping the conversation's state between steps and once (`keep_state=False`)
prefilling every prompt whole; and once in the block window (`inference.local.block_window`, an
option: screenshots dropped 3 at once, so the prompt grows only at its end two steps in three, but
the model sees 1 to 3 screenshots). Each step is the holotron profile's navigation request at that
point of a task: the history so far and a new 1280x800 screenshot (6 tiles and a thumbnail: 1,792
image tokens). The backends answer in turn, rotating which goes first; the two trained-window ones
answer the same requests and must give the same tokens. Each step's StepTimings splits it into
preprocess (template, tokenizer, tiles), prefill and decode.

Step N of the task has N - 1 earlier steps in its prompt ("history N - 1"). The table gives, at
histories 1, 3, 10 and 30, the prompt's tokens, the tokens prefilled and the step time for each. In
the trained window a kept state resumes at the turn of the oldest screenshot still shown, so from
history 3 on each step prefills about three screenshots (the Mamba state cannot be rolled back past
the screenshot that just became text); without a state the whole prompt. The tiny model's compute
says nothing about Holotron-12B's (bench/gpu_step.py measures that on a GPU); what carries over is
how much of each prompt is prefilled, which is exact, and the preprocessing, which is the same
code. Step times on a shared machine move with its load.
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
from holodesk.inference.profiles.holotron import HolotronProfile

NAME = "model_step"
HISTORY = 30  # the last step has this many earlier steps in its prompt
NEW_TOKENS = 16
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


HISTORIES = (1, 3, 10, 30)
# Quick: no screenshot dropped yet, the first drop (the kept state rolled back; the block window
# down to 1 screenshot), and the step after it (the block window appending again, 2 screenshots as
# at history 10): every path of the full run, in 5 steps rather than 31.
QUICK_HISTORIES = (1, 3, 4)
KEPT, WHOLE, BLOCK = "trained, state kept", "trained, no state", "block, state kept"


def run(settings: BenchSettings) -> BenchResult:
    import transformers

    # heavy: safetensors, torch; looked up when called: tests replace it at its source
    from bench.nemotron_tiny import build_nemotron_tiny
    from holodesk.inference.local import LocalBackend, LocalGeneration, block_window

    transformers.utils.logging.set_verbosity_error()  # the PyTorch Mamba scan notice is expected on a CPU
    logging.getLogger("holodesk.inference.local").setLevel(logging.ERROR)  # and so is "runs on the CPU"
    result = BenchResult(NAME)
    reported = QUICK_HISTORIES if settings.quick else HISTORIES
    steps = reported[-1] + 1
    profiles = {
        KEPT: HolotronProfile(ImageBudget()),
        WHOLE: HolotronProfile(ImageBudget()),
        BLOCK: HolotronProfile(block_window(ImageBudget())),
    }
    history = past_steps(steps)
    frames = [frame_from_image(desktop_picture(1280, 800, seed=n)) for n in range(steps)]
    shots = [profiles[KEPT].prepare_image(frame) for frame in frames]

    def request(name: str, step: int) -> ChatRequest:
        chat = profiles[name].navigation_request(TASK, history[:step], shots[: step + 1])
        return dataclasses.replace(chat, max_new_tokens=NEW_TOKENS)

    rows: list[dict[str, float | int | str]] = []
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as work:
        checkpoint = build_nemotron_tiny(Path(work) / "nemotron_tiny", dtype="float32")
        backends = {
            KEPT: LocalBackend(checkpoint, device="cpu", keep_state=True),
            WHOLE: LocalBackend(checkpoint, device="cpu", keep_state=False),
            BLOCK: LocalBackend(checkpoint, device="cpu", keep_state=True),
        }
        names = list(backends)
        try:
            for name, backend in backends.items():
                backend.load()
                backend.generate_detailed(request(name, 0))  # unmeasured: the first call pays torch's warm-up
                backend.forget()
            for step in range(steps):
                order = names[step % 3 :] + names[: step % 3]
                answers: dict[str, LocalGeneration] = {
                    name: backends[name].generate_detailed(request(name, step)) for name in order
                }
                if answers[KEPT].new_token_ids != answers[WHOLE].new_token_ids:
                    raise AssertionError(f"step {step + 1}: the kept state changed the answer")
                if step not in reported:
                    continue
                for name in names:
                    answer = answers[name]
                    rows.append(
                        {
                            "history": step,
                            "window": name,
                            "images": len(request(name, step).images),
                            "tokens_in": answer.timings.tokens_in,
                            "prefilled": answer.prefilled_tokens,
                            "ms": answer.timings.total_s * 1000,
                            "prefill_ms": answer.timings.prefill_s * 1000,
                        }
                    )
        finally:
            for backend in backends.values():
                backend.unload()

    result.extra["steps"] = rows
    for name in names:
        for row in rows:
            if row["window"] != name:
                continue
            result.add(f"history {row['history']} step, {name}", stats_of([float(row["ms"])]))
            result.add(
                f"history {row['history']} prefilled tokens, {name}", stats_of([float(row["prefilled"])], "tokens")
            )
    result.notes.append(
        "history | window | images | tokens in | prefilled | step ms | prefill ms\n"
        + "\n".join(
            f"{int(r['history']):>7} | {r['window']:<18} | {r['images']:>6} | {r['tokens_in']:>9}"
            f" | {r['prefilled']:>9} | {float(r['ms']):>7.0f} | {float(r['prefill_ms']):>10.0f}"
            for r in rows
        )
    )
    result.notes.append(
        f"1280x800 screenshots (1,792 image tokens each), {NEW_TOKENS} new tokens at most, greedy; the trained"
        " window's answers are the same with and without the state"
    )
    return result
