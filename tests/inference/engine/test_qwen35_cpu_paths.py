"""The Qwen3.5 engine's CPU paths (engine/qwen35_cpu.py) give transformers' own tokens and log-probs.

On bench/qwen35_tiny's positional checkpoint with realistic margins (logit_gain 5), the engine with its CPU paths
and the engine with transformers' code everywhere (`cpu_paths=False`, the reference) answer the same
holo3.1 steps: a first step with a screenshot, then the next on the kept state, and a prompt prefilled
in chunks of 1 to 5 tokens, so the convolution starts with fewer earlier columns than its width and
continues from the cache's. The fast engine decodes on static buffers (engine/qwen35_decode.py) with
fused projections; the reference through transformers' forward. In float32 (the dtype of the
reference comparisons with vLLM) every greedy token is equal and every top-5 log-prob within 1e-5; in
bfloat16 the packed products are the stock ones bit for bit, and the tokens are equal.
"""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bench.qwen35_tiny import VARIANTS, Dtype, build_qwen35_tiny
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.qwen35 import Qwen35Engine
from holodesk.inference.engine.qwen35_cpu import bf16_products_available, patch_embed_forward
from holodesk.inference.engine.runner import EngineResult
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.holo3 import Holo31Profile

TOKENS = 12
TOP = 5
FLOAT32_TOLERANCE = 1e-5
BF16_TOLERANCE = 2e-2  # a bfloat16 rounding of the last hidden state moves log-probs by about this much


def _checkpoint(folder: Path, dtype: Dtype) -> Path:
    # Attention that depends on position (the positional variant), where on the reference one it is close
    # to an average: the decoder's rotary positions and the prefill's attention masks then change tokens.
    variant = dataclasses.replace(VARIANTS["positional"], name="margins", logit_gain=5.0)
    return build_qwen35_tiny(folder / f"qwen35-{dtype}", dtype=dtype, variant=variant)


@pytest.fixture(scope="module")
def float32_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _checkpoint(tmp_path_factory.mktemp("cpu-paths"), "float32")


def _frame(seed: int) -> ScreenFrame:
    pixels = np.random.default_rng(seed).integers(0, 256, (400, 640, 4), dtype=np.uint8)
    return ScreenFrame(pixels=pixels, region=Rect(0, 0, 640, 400), monitor=None, monitors=(), captured_at=0.0)


def _steps() -> list[ChatRequest]:
    profile = Holo31Profile()
    shots = [profile.prepare_image(_frame(0))]
    first = profile.navigation_request("Open the settings", [], shots)
    shots.append(profile.prepare_image(_frame(1)))
    second = profile.navigation_request("Open the settings", [PastStep(Click(Point(100, 200)), thought="open")], shots)
    return [dataclasses.replace(request, max_new_tokens=TOKENS) for request in (first, second)]


def _short() -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "Which window is open?"}], max_new_tokens=TOKENS)


def _reference(checkpoint: Path, **options: Any) -> Qwen35Engine:
    """transformers' code everywhere but the vision patch embedding, which is the product vLLM computes on the
    CPU in both engines: these tests hold the text model's paths to transformers' (the patch embedding has
    its own test below, and the engine's images are held to vLLM's in test_qwen35_against_vllm)."""
    engine = Qwen35Engine(checkpoint, cpu_paths=False, **options)
    for module in engine.model.modules():
        if type(module).__name__ == "Qwen3_5VisionPatchEmbed":
            module.forward = types.MethodType(patch_embed_forward, module)
    return engine


def _answers(engine: Qwen35Engine, requests: list[ChatRequest]) -> list[EngineResult]:
    engine.forget()
    return [engine.generate(request, top_logprobs=TOP, ignore_stop=True) for request in requests]


def _largest_gap(ours: EngineResult, theirs: EngineResult) -> float:
    assert ours.prompt_ids == theirs.prompt_ids
    assert ours.new_ids == theirs.new_ids  # every greedy token
    gaps = [0.0]
    for mine, reference in zip(ours.top_logprobs, theirs.top_logprobs, strict=True):
        assert set(mine) == set(reference)
        gaps.extend(abs(mine[token] - reference[token]) for token in reference)
    assert all(math.isfinite(gap) for gap in gaps)  # max() would pass over a NaN
    return max(gaps)


def test_float32_steps_on_the_kept_state_match_transformers_code(float32_checkpoint: Path) -> None:
    fast = Qwen35Engine(float32_checkpoint, dtype="float32")
    reference = _reference(float32_checkpoint, dtype="float32")
    assert any("causal convolution" in path for path in fast.paths) and reference.paths == []
    assert not any("oneDNN" in path for path in fast.paths)  # float32 keeps the stock products
    assert fast.static_decode and not reference.static_decode  # tokens decoded by qwen35_decode, not transformers
    ours, theirs = _answers(fast, _steps()), _answers(reference, _steps())
    assert ours[1].reused_tokens > 0  # the second step resumed from the kept state
    for mine, reference_answer in zip(ours, theirs, strict=True):
        assert _largest_gap(mine, reference_answer) <= FLOAT32_TOLERANCE


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_float32_prefill_in_short_chunks_matches_transformers_code(float32_checkpoint: Path, chunk: int) -> None:
    fast = Qwen35Engine(float32_checkpoint, dtype="float32", prefill_chunk=chunk, reuse=False)
    reference = _reference(float32_checkpoint, dtype="float32", prefill_chunk=chunk, reuse=False)
    [ours], [theirs] = _answers(fast, [_short()]), _answers(reference, [_short()])
    assert _largest_gap(ours, theirs) <= FLOAT32_TOLERANCE


@pytest.mark.skipif(not bf16_products_available(), reason="no bfloat16 instructions: the packed path is not used")
def test_bfloat16_packed_products_give_transformers_tokens(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path, "bfloat16")
    fast = Qwen35Engine(checkpoint, dtype="bfloat16")
    reference = _reference(checkpoint, dtype="bfloat16")
    assert any("oneDNN" in path for path in fast.paths)
    ours, theirs = _answers(fast, _steps()), _answers(reference, _steps())
    for mine, reference_answer in zip(ours, theirs, strict=True):
        assert _largest_gap(mine, reference_answer) <= BF16_TOLERANCE


def test_the_patch_embedding_product_is_the_convolution() -> None:
    """transformers' Conv3d over non-overlapping patches and the product that replaces it on the CPU
    (vLLM's way) give the same embeddings within float32 rounding."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionPatchEmbed

    torch.manual_seed(0)
    embed = Qwen3_5VisionPatchEmbed(
        types.SimpleNamespace(patch_size=16, temporal_patch_size=2, in_channels=3, hidden_size=96)
    )
    patches = torch.randn(300, 3 * 2 * 16 * 16)
    with torch.inference_mode():
        convolved, multiplied = embed(patches), patch_embed_forward(embed, patches)
    assert multiplied.shape == convolved.shape == (300, 96)
    assert torch.allclose(multiplied, convolved, rtol=1e-5, atol=1e-5)
