"""The vLLM servers more than one test file asks for, as pool specs (tests/support/vllm_pool.py).

A file that serves one of these checkpoints with these arguments uses the spec from here, so the
session starts it once; a server only one file uses is specified in that file.
"""

from __future__ import annotations

from pathlib import Path

from holodesk.inference.profiles.holo3 import PARSER_FLAGS
from tests.support.vllm_pool import Checkpoint, ServerSpec


def _nemotron_tiny(folder: Path) -> Path:
    from bench.nemotron_tiny import build_nemotron_tiny

    return build_nemotron_tiny(folder / "nemotron_tiny", dtype="float32")


def _qwen35(variant: str) -> Checkpoint:
    def build(folder: Path) -> Path:
        from bench.qwen35_tiny import build_qwen35_tiny

        return build_qwen35_tiny(folder / f"qwen35_{variant}", dtype="bfloat16", variant=variant)

    return Checkpoint(f"qwen35_{variant}-bfloat16", build)


# The tiny NemotronH_Nano_VL_V2 checkpoint in Holotron-12B's real layout, float32, so that the in-process
# engine on the same files can be compared with it to float32 rounding (tests/inference/engine/
# test_against_vllm.py). vLLM 0.32's nano_nemotron_vl rounds the vision features to bfloat16 before the
# projector whatever the dtype; tests/vllm/shim hands them on in the projector's dtype, without which
# the first image would kill a float32 engine. The rig's defaults otherwise (32,768 tokens, 4 images).
HOLOTRON_TINY = ServerSpec("holotron-tiny", Checkpoint("nemotron_tiny-float32", _nemotron_tiny), dtype="float32")

# The random Qwen3.5 VL checkpoints (bench/qwen35_tiny), dense (Holo3.1's small sizes, Holo4 27B) and
# mixture of experts (the 35B-A3B's), with the command doctor prints for these models (the parser
# flags) and room for the holo4 profile's requests (5 images, 32,768 tokens).
QWEN35_REFERENCE = ServerSpec(
    "reference", _qwen35("reference"), max_model_len=32768, max_images=5, extra_args=PARSER_FLAGS
)
QWEN35_MOE = ServerSpec("moe", _qwen35("moe"), max_model_len=32768, max_images=5, extra_args=PARSER_FLAGS)
