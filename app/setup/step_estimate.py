"""An estimate of one step's time for a model on this machine, from a short measurement of it.

What is measured (about half a second): this machine's bfloat16 matrix products at the model's own
width, through the in-process engine's own product (`PackedLinear` on a CPU with bfloat16
instructions, torch's otherwise): a block of 256 rows (the prefill's shape) and one row (a decoded
token's, padded as the CPU engine pads it). What is scaled: the model's
parameter counts from its memory plan (the text layers for every prompt token, the output head for each
decoded token, the vision tower for every screenshot patch), at a 1920x1080 screenshot, 600 tokens of
instructions and notes, and 80 decoded tokens (a short thought and one action). Attention over the
context, the recurrent layers' own work and the load are left out, so it is a floor, stated as
"about"; the first step is slower while the model loads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from holodesk.inference.qwen35_memory import Qwen35MemoryPlan, image_patches

SCREEN = (1920, 1080)
TEXT_TOKENS = 600
DECODED_TOKENS = 80
MERGE = 4  # 2x2 patches become one token
PREFILL_ROWS = 256
BYTES_PER_PARAMETER = 2  # bfloat16


@dataclass(frozen=True, slots=True)
class Rates:
    """Measured multiply-adds per second x2 (FLOP/s) for the prefill's and the decoding's shapes."""

    prefill_flops: float
    decode_flops: float
    device: str


def measure(width: int, device: str = "cpu", budget_s: float = 0.25) -> Rates:
    """Time the engine's bfloat16 product [rows, width] x [width, 4*width] for about `budget_s` each.

    On a CPU with bfloat16 instructions the product is the CPU engine's own `PackedLinear` (what it
    puts in place of every linear layer there), so a decoded token's row is padded as the engine pads it."""
    import torch
    from torch import nn

    linear = nn.Linear(width, 4 * width, bias=False, dtype=torch.bfloat16, device=device)
    layer: nn.Module = linear
    if device == "cpu":
        # heavy: torch
        from holodesk.inference.engine.qwen35_cpu import PackedLinear, bf16_products_available

        if bf16_products_available():
            layer = PackedLinear(linear)

    def rate(rows: int) -> float:
        x = torch.randn(rows, width, dtype=torch.bfloat16, device=device)
        layer(x)  # the first call sets kernels up: not timed
        count, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < budget_s or count < 3:
            layer(x)
            if device != "cpu":
                torch.cuda.synchronize()
            count += 1
        return 2.0 * rows * width * 4 * width * count / elapsed

    with torch.inference_mode():
        return Rates(rate(PREFILL_ROWS), rate(1), device)


def step_seconds(plan: Qwen35MemoryPlan, rates: Rates) -> float:
    """The step's matrix work at the measured rates (the decode rate is one row's: one token's)."""
    text = (plan.text_weights - plan.embedding) / BYTES_PER_PARAMETER
    head = plan.embedding / BYTES_PER_PARAMETER  # the output head has the embedding's shape, tied or not
    vision = plan.vision_weights / BYTES_PER_PARAMETER
    patches = image_patches(*SCREEN)
    prompt = patches / MERGE + TEXT_TOKENS
    prefill = 2 * (vision * patches + text * prompt + head) / rates.prefill_flops
    decode = 2 * (text + head) * DECODED_TOKENS / rates.decode_flops
    return prefill + decode


def estimate_words(seconds: float, device: str) -> str:
    where = "this CPU" if device == "cpu" else "this GPU"
    if seconds < 10:
        return f"about {seconds:.1f} s a step on {where}"
    if seconds < 120:
        return f"about {seconds:.0f} s a step on {where}"
    return f"about {seconds / 60:.0f} min a step on {where}"
