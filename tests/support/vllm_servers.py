"""The vLLM servers more than one test file asks for, as pool specs (tests/support/vllm_pool.py).

A file that serves one of these checkpoints with these arguments uses the spec from here, so the
session starts it once; a server only one file uses is specified in that file.
"""

from __future__ import annotations

import dataclasses
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
# flags) and room for the holo4 profile's requests (5 images, 32,768 tokens). bfloat16, vLLM's own
# Gated DeltaNet kernels: for the holo profiles on vLLM and the reference tier's bfloat16 smoke test.
QWEN35_REFERENCE = ServerSpec(
    "reference", _qwen35("reference"), max_model_len=32768, max_images=5, extra_args=PARSER_FLAGS
)
QWEN35_MOE = ServerSpec("moe", _qwen35("moe"), max_model_len=32768, max_images=5, extra_args=PARSER_FLAGS)

# The same shapes with realistic margins (the output head scaled by MARGIN_GAIN: the best token leads
# by a median of about 1 nat, where the checkpoints above lead by 0.2-0.3), served in float32: vLLM's
# Gated DeltaNet core replaced by tests/vllm/shim/gdn_float32.py. What the engine and transformers
# are compared with at 1e-4 (tests/inference/engine/test_qwen35_against_vllm.py, tests/vllm/test_qwen35_tiny.py).
MARGIN_GAIN = 5.0


def qwen35_float32(variant: str) -> ServerSpec:
    """A float32 server on the variant's shapes with realistic margins (its label: the variant's name)."""

    def build(folder: Path) -> Path:
        from bench.qwen35_tiny import VARIANTS, build_qwen35_tiny

        shape = dataclasses.replace(VARIANTS[variant], name=f"{variant}-margins", logit_gain=MARGIN_GAIN)
        return build_qwen35_tiny(folder / f"qwen35_{shape.name}", dtype="float32", variant=shape)

    checkpoint = Checkpoint(f"qwen35_{variant}-margins-float32", build)
    return ServerSpec(variant, checkpoint, dtype="float32", max_model_len=32768, max_images=5, extra_args=PARSER_FLAGS)


QWEN35_REFERENCE_FLOAT32 = qwen35_float32("reference")
QWEN35_MOE_FLOAT32 = qwen35_float32("moe")
