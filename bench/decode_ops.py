"""Torch operator calls per decoded token: transformers' forward against the engine's static decoder.

On a GPU each operator call is a kernel launch the host must issue; the engine's decode on a GPU is one
CUDA graph replay a token, which replaces all of them (inference/engine/static_decode.py). On the CPU
each call costs its dispatch (roughly 10-30 µs here). For each family's tiny checkpoint (float32, CPU:
bench/nemotron_tiny's "realistic" for Holotron's Nemotron-H, bench/qwen35_tiny's "reference" for the
Qwen3.5 models), the engine answers a text prompt twice, once decoding N1 and once N2 tokens past any
stop token, under torch.profiler; the aten calls (every level, and the outermost only) of the
difference, divided by N2 - N1, are one token's. Both ways: the static decoder (the engine's default)
and transformers' forward (`static_decode=False`; for Qwen3.5 `cpu_paths=False`, which also leaves its
prefill paths out, not counted here). Counts are exact and do not depend on the machine's load.

    python -m bench --only decode_ops        # or: python -m bench.decode_ops [--output results.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.harness import BenchResult, BenchSettings, report, stats_of
from holodesk.inference.engine.spec import transformers_problem
from holodesk.inference.profiles.base import ChatRequest

NAME = "decode_ops"
SHORT, LONG = 2, 6  # tokens decoded in the two answers whose difference is counted
REQUEST = ChatRequest(messages=[{"role": "user", "content": "Which window is open?"}], max_new_tokens=LONG)


def operator_calls(engine: Any, tokens: int) -> tuple[int, int]:
    """(all aten calls, outermost aten calls) of one answer of `tokens` tokens."""
    # heavy: torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as recorded:
        engine.generate(REQUEST, max_new_tokens=tokens, ignore_stop=True)
    events = [event for event in recorded.events() if event.name.startswith("aten::")]
    nested = [event for event in events if event.cpu_parent is not None and event.cpu_parent.name.startswith("aten::")]
    return len(events), len(events) - len(nested)


def per_token(engine: Any) -> tuple[float, float]:
    engine.generate(REQUEST, max_new_tokens=SHORT, ignore_stop=True)  # first-call costs out of the count
    short, long = operator_calls(engine, SHORT), operator_calls(engine, LONG)
    return (long[0] - short[0]) / (LONG - SHORT), (long[1] - short[1]) / (LONG - SHORT)


def run(settings: BenchSettings) -> BenchResult:
    # heavy: safetensors, torch, transformers
    from bench.nemotron_tiny import build_nemotron_tiny
    from bench.qwen35_tiny import build_qwen35_tiny
    from holodesk.inference.engine.qwen35 import Qwen35Engine
    from holodesk.inference.engine.runner import Engine

    result = BenchResult(NAME)
    problem = transformers_problem()
    if problem:
        result.notes.append(f"not run: {problem}")
        return result
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as work:
        holotron = build_nemotron_tiny(Path(work) / "holotron", dtype="float32", variant="realistic")
        qwen = build_qwen35_tiny(Path(work) / "qwen", dtype="float32", variant="reference")
        engines: dict[str, Any] = {
            "Holotron (Nemotron-H), static decoder": Engine(holotron, dtype="float32"),
            "Holotron (Nemotron-H), transformers' forward": Engine(holotron, dtype="float32", static_decode=False),
            "Holo3.1 (Qwen3.5), static decoder": Qwen35Engine(qwen, dtype="float32"),
            "Holo3.1 (Qwen3.5), transformers' forward": Qwen35Engine(qwen, dtype="float32", cpu_paths=False),
        }
        for label, engine in engines.items():
            every, outermost = per_token(engine)
            result.add(f"{label}: aten calls a token", stats_of([every], "calls"))
            result.add(f"{label}: outermost aten calls a token", stats_of([outermost], "calls"))
    result.notes.append(f"counted over {LONG} against {SHORT} decoded tokens, float32 on the CPU; exact counts")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decode_ops", description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, help="also write the JSON results here")
    arguments = parser.parse_args(argv)
    started = time.perf_counter()
    report(run(BenchSettings()), arguments.output, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
