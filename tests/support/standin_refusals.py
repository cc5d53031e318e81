"""Run in a child process: load the stand-in checkpoint the way today's naive loaders do and report each failure.

Usage: python -m tests.support.standin_refusals CHECKPOINT [--no-kernels]
Prints one JSON object: {check: "OK" or "ExceptionType: first line"}. A child process, because
transformers' registries and imported remote modules are process-wide: a test process that already
registered the image processor or imported mamba_ssm cannot show these failures any more.
With --no-kernels the tests' mamba_ssm stand-in is kept off sys.path.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any


def attempt(run: Callable[[], Any]) -> str:
    try:
        run()
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return "OK"


def main() -> None:
    checkpoint = sys.argv[1]
    if "--no-kernels" in sys.argv:
        sys.path[:] = [p for p in sys.path if not p.rstrip("/").endswith("tests/support/kernels")]
    from holodesk.inference.standin import isolate_hf_environment

    isolate_hf_environment()
    import torch
    import transformers

    common: dict[str, Any] = {"trust_remote_code": True, "local_files_only": True}
    found: dict[str, str] = {}
    found["processor"] = attempt(lambda: transformers.AutoProcessor.from_pretrained(checkpoint, **common))
    found["flash_attention_2"] = attempt(
        lambda: transformers.AutoModelForCausalLM.from_pretrained(
            checkpoint, torch_dtype=torch.bfloat16, attn_implementation="flash_attention_2", **common
        )
    )
    models: list[Any] = []
    found["float32 load"] = attempt(
        lambda: models.append(
            transformers.AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32, **common)
        )
    )
    if models:
        model = models[0]
        found["default attention"] = str(model.language_model.config._attn_implementation)
        ids = torch.tensor([[model.img_context_token_id] * 256 + [10, 11]])
        found["float32 generate"] = attempt(
            lambda: model.generate(
                pixel_values=torch.zeros(1, 3, 512, 512),
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=1,
            )
        )
    print(json.dumps(found))


if __name__ == "__main__":
    main()
