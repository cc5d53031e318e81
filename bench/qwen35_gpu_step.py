"""Holo3.1-0.8B's step through the in-process engine on a CUDA GPU: prefill, decode, peak memory.

    python -m bench.qwen35_gpu_step [--variant holo31-0.8b] [--device cuda] [--output report.json]

What one step of the smallest Holo3.1 costs on a GPU, for the README's table next to the CPU figures of
bench.holo31_cpu_step. A checkpoint with Holo3.1-0.8B's real shapes and random weights
(bench/qwen35_tiny's "holo31-0.8b", bfloat16) is built, loaded by `inference.engine.qwen35`
(transformers' Qwen3.5 model, Holodesk's loop; Gated DeltaNet runs transformers' PyTorch path unless
flash-linear-attention imports), and answers the holo3.1 profile's request (structured output,
reasoning on, one 1280x800 screenshot, earlier steps as text) at history 1 and 10, fresh each time
(no kept state), with a fixed number of new tokens. Two rounds; the first warms the GPU up and is
not reported. `--device cpu` runs the same on the CPU (with `--variant reference`: a smoke run).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.model_step import past_steps
from bench.screens import desktop_picture
from holodesk.automation.screen import frame_from_image
from holodesk.inference.profiles import get_profile

HISTORIES = (1, 10)
SCREEN = (1280, 800)
NEW_TOKENS = 32
TASK = "Archive every unread newsletter in my mail"


def _request(history: int) -> Any:
    profile = get_profile("holo3.1")
    frame = frame_from_image(desktop_picture(*SCREEN, seed=history))
    request = profile.navigation_request(TASK, past_steps(history), [profile.prepare_image(frame)])
    return request


def measure(checkpoint: Path, device: str, new_tokens: int, reference: bool = False) -> list[dict[str, Any]]:
    """One row per history: prompt tokens, prefill tokens/s, ms per new token, peak memory (CUDA's allocator).
    `reference`: transformers' code everywhere (the engine's `cpu_paths=False`), for the side-by-side."""
    import torch

    # heavy: torch
    from holodesk.inference.engine.qwen35 import Qwen35Engine

    loaded_at = time.perf_counter()
    engine = Qwen35Engine(checkpoint, device=device, dtype="bfloat16", reuse=False, cpu_paths=not reference)
    load_s = time.perf_counter() - loaded_at
    print("paths: " + ("; ".join(engine.paths) or "transformers' own code"), file=sys.stderr)
    rows = []
    for round_number in range(2):
        for history in HISTORIES:
            if device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
            result = engine.generate(_request(history), max_new_tokens=new_tokens, ignore_stop=True)
            t = result.timings
            if round_number == 0:
                continue  # warm-up: kernels compiled, allocator grown
            rows.append(
                {
                    "history": history,
                    "prompt_tokens": t.tokens_in,
                    "prefill_s": t.prefill_s,
                    "prefill_tokens_per_s": t.tokens_in / t.prefill_s if t.prefill_s > 0 else None,
                    "decode_ms_per_token": 1000 * t.decode_s / max(1, t.tokens_out - 1),
                    "step_s": t.total_s,
                    "peak_bytes": torch.cuda.max_memory_allocated() if device.startswith("cuda") else None,
                    "load_s": load_s,
                }
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.qwen35_gpu_step", description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="holo31-0.8b", help="bench/qwen35_tiny's variant")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--new-tokens", type=int, default=NEW_TOKENS)
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    parser.add_argument("--reference", action="store_true", help="transformers' code everywhere (no fast paths)")
    arguments = parser.parse_args(argv)
    import torch

    if arguments.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench.qwen35_gpu_step needs a CUDA GPU (or --device cpu).", file=sys.stderr)
        return 2
    # heavy: safetensors, torch
    from bench.qwen35_tiny import build_qwen35_tiny

    with tempfile.TemporaryDirectory() as folder:
        checkpoint = build_qwen35_tiny(Path(folder) / "checkpoint", variant=arguments.variant)
        rows = measure(checkpoint, arguments.device, arguments.new_tokens, arguments.reference)
    name = torch.cuda.get_device_name(0) if arguments.device.startswith("cuda") else "cpu"
    print(
        f"{arguments.variant} on {name}, {arguments.new_tokens} new tokens, {SCREEN[0]}x{SCREEN[1]}:", file=sys.stderr
    )
    print("history | prompt tokens | prefill tokens/s | decode ms/token | step s | peak GiB", file=sys.stderr)
    for row in rows:
        peak = f"{row['peak_bytes'] / 2**30:.2f}" if row["peak_bytes"] is not None else "-"
        print(
            f"{row['history']:>7} | {row['prompt_tokens']:>13} | {row['prefill_tokens_per_s'] or 0:>16,.0f} |"
            f" {row['decode_ms_per_token']:>15.1f} | {row['step_s']:>6.2f} | {peak:>8}",
            file=sys.stderr,
        )
    text = json.dumps({"device": name, "variant": arguments.variant, "reference": arguments.reference, "rows": rows})
    if arguments.output is not None:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
