"""The in-process engine on a CUDA GPU against the same engine on the CPU: same tokens, how close the log-probs.

    python -m bench.cuda_parity [--tokens 48] [--output report.json]

The CPU's float32 run is the reference the rest of the suite proves token for token against vLLM; this
says what moving to the GPU changes. It builds tiny checkpoints in float32: Holotron's with realistic
statistics (bench.nemotron_tiny's "realistic" and "wide-heads": the layouts that showed vLLM's and
transformers' Mamba differences) and the Qwen3.5 family's dense and mixture-of-experts ones
(bench.qwen35_tiny, run by inference.engine.qwen35), answers one request with a screenshot and the
step after it (on the kept state) greedily on each device, decoding past stop tokens, and prints per
checkpoint and dtype how many leading tokens agree and the largest gap between the chosen tokens' log-probabilities over
that common prefix. CUDA float32 should agree with the CPU to rounding; bf16 shows what the product's
GPU dtype costs. Refuses at once without CUDA.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from holodesk.inference.profiles.base import ChatRequest

# (label, family, variant of that family's tiny builder)
CHECKPOINTS = (
    ("holotron realistic", "holotron", "realistic"),
    ("holotron wide-heads", "holotron", "wide-heads"),
    ("qwen3.5 dense", "qwen3.5", "reference"),
    ("qwen3.5 moe", "qwen3.5", "moe"),
)


def _screenshot(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def _requests(tokens: int) -> list[Any]:
    """A first step and the step after it (the second reuses the state the first left)."""

    system = {"role": "system", "content": "You are a computer-use agent. /no_think"}
    first = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Open the inbox."}]}
    answer = {"role": "assistant", "content": '{"thought": "click the inbox"}'}
    second = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Now archive it."}]}
    shots = [_screenshot(1280, 800, 1), _screenshot(1024, 768, 2)]
    return [
        ChatRequest(messages=[system, first], images=shots[:1], max_new_tokens=tokens),
        ChatRequest(messages=[system, first, answer, second], images=shots, max_new_tokens=tokens),
    ]


Answers = list[tuple[list[int], list[float]]]


def _build(family: str, variant: str, folder: Path) -> Path:
    if family == "holotron":
        # heavy: safetensors, torch
        from bench.nemotron_tiny import build_nemotron_tiny

        return build_nemotron_tiny(folder, dtype="float32", variant=variant)
    # heavy: safetensors, torch
    from bench.qwen35_tiny import build_qwen35_tiny

    return build_qwen35_tiny(folder, dtype="float32", variant=variant)


def _run(checkpoint: Path, device: str, dtype: str, tokens: int, family: str = "holotron") -> Answers:
    """Each request's greedy ids and each chosen token's log-prob, on one engine that keeps its state."""
    # heavy: torch
    from holodesk.inference.engine.qwen35 import Qwen35Engine
    from holodesk.inference.engine.runner import Engine

    engine: Engine | Qwen35Engine = (
        Engine(checkpoint, device=device, dtype=dtype)
        if family == "holotron"
        else Qwen35Engine(checkpoint, device=device, dtype=dtype)
    )
    if device == "cuda":
        print(f"  {family} on cuda {dtype}: " + ("; ".join(engine.paths) or "transformers' own code"), file=sys.stderr)
    answers = []
    for request in _requests(tokens):
        result = engine.generate(request, top_logprobs=1, ignore_stop=True)
        chosen = [step[token] for step, token in zip(result.top_logprobs, result.new_ids, strict=True)]
        answers.append((list(result.new_ids), chosen))
    return answers


def compare(reference: Answers, other: Answers) -> dict[str, Any]:
    """Per request: tokens that agree before the first difference, and the largest log-prob gap among them."""
    rows = []
    for (ids_a, lp_a), (ids_b, lp_b) in zip(reference, other, strict=True):
        pairs = zip(ids_a, ids_b, strict=False)
        same = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(ids_a), len(ids_b)))
        gap = max((abs(a - b) for a, b in zip(lp_a[:same], lp_b[:same], strict=True)), default=0.0)
        rows.append({"tokens": len(ids_a), "agree": same, "max_logprob_gap": gap})
    return {"requests": rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cuda_parity", description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=48, help="tokens decoded per request")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    parser.add_argument("--family", choices=("holotron", "qwen3.5"), help="only this family's checkpoints")
    arguments = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench.cuda_parity needs a CUDA GPU; the CPU-only proofs are the engine's tests.", file=sys.stderr)
        return 2
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "tokens": arguments.tokens, "checkpoints": {}}
    with tempfile.TemporaryDirectory() as folder:
        for label, family, variant in CHECKPOINTS:
            if arguments.family not in (None, family):
                continue
            checkpoint = _build(family, variant, Path(folder) / label.replace(" ", "-"))
            reference = _run(checkpoint, "cpu", "float32", arguments.tokens, family)
            results: dict[str, Any] = {}
            for dtype in ("float32", "bfloat16"):
                results[dtype] = result = compare(reference, _run(checkpoint, "cuda", dtype, arguments.tokens, family))
                cells = ", ".join(
                    f"{row['agree']}/{row['tokens']} tokens agree, max log-prob gap {row['max_logprob_gap']:.2e}"
                    for row in result["requests"]
                )
                print(f"{label:>20} cuda {dtype:>8} vs cpu float32: {cells}", file=sys.stderr, flush=True)
            report["checkpoints"][label] = results
    text = json.dumps(report)
    if arguments.output is not None:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
