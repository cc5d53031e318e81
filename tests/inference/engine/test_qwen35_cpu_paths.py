"""The Qwen3.5 engine's CPU paths (engine/qwen35_cpu.py) give transformers' own tokens and log-probs.

On bench/qwen35_tiny's positional checkpoint with realistic margins (logit_gain 5), the engine with its CPU paths
and the engine with transformers' code everywhere (`cpu_paths=False`, the reference) answer the same
holo3.1 steps: a first step with a screenshot, then the next on the kept state, and a prompt prefilled
in chunks of 1 to 5 tokens, so the convolution starts with fewer earlier columns than its width and
continues from the cache's. The fast engine decodes on static buffers (engine/qwen35_decode.py) with
fused projections; the reference through transformers' forward. In float32 (the dtype of the
reference comparisons with vLLM) every greedy token is equal and every top-5 log-prob within 1e-5. In
bfloat16, where the delta rule runs with bfloat16 products (vLLM's CPU precision), both engines are
held to the same weights run in float32: the fast one no further from it than transformers' bfloat16 code.
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
from holodesk.inference.engine.qwen35_cpu import PackedLinear, bf16_products_available, patch_embed_forward
from holodesk.inference.engine.runner import EngineResult
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.holo3 import Holo31Profile

TOKENS = 12
TOP = 5
FLOAT32_TOLERANCE = 1e-5


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


def _agreeing_gaps(answer: EngineResult, truth: EngineResult, length: int) -> list[float]:
    """The largest top-5 log-prob gap at each of the first `length` positions, over the tokens both list.

    Position i's distribution follows the prompt and the first i tokens: comparable while those agree
    (the first position always is: it follows the prompt alone)."""
    assert answer.new_ids[: length - 1] == truth.new_ids[: length - 1]
    pairs = zip(answer.top_logprobs[:length], truth.top_logprobs[:length], strict=True)
    return [max(abs(mine[t] - theirs[t]) for t in set(mine) & set(theirs)) for mine, theirs in pairs]


def _agreement(answer: EngineResult, truth: EngineResult) -> int:
    """How many greedy tokens `answer` shares with `truth` before the first that differs."""
    return next(
        (i for i, pair in enumerate(zip(answer.new_ids, truth.new_ids, strict=True)) if pair[0] != pair[1]), TOKENS
    )


@pytest.mark.skipif(not bf16_products_available(), reason="no bfloat16 instructions: the bfloat16 paths are not used")
def test_bfloat16_engine_is_as_close_to_float32_as_transformers_bfloat16_code(tmp_path: Path) -> None:
    """The bfloat16 paths (packed products, the delta rule with bfloat16 products) against the truth of
    the same weights run in float32 by transformers' code: no further from it than transformers' own
    bfloat16 code is. Each bfloat16 engine's tokens are held to the float32 ones while both agree with
    them (bfloat16 alone can flip a near tie: transformers' does at the second step's 6th token here, and
    could at another on another CPU), and the first position, which follows the prompt alone, is always
    compared; over those the fast engine's largest log-prob gap is at most twice transformers'."""
    checkpoint = _checkpoint(tmp_path, "bfloat16")
    fast = Qwen35Engine(checkpoint, dtype="bfloat16")
    assert any("oneDNN" in path for path in fast.paths)
    assert any("delta rule with bfloat16 products" in path for path in fast.paths)
    truth = _answers(_reference(checkpoint, dtype="float32"), _steps())
    ours, theirs = _answers(fast, _steps()), _answers(_reference(checkpoint, dtype="bfloat16"), _steps())
    assert ours[1].reused_tokens > 0
    for mine, reference, exact in zip(ours, theirs, truth, strict=True):
        length = min(_agreement(mine, exact), _agreement(reference, exact), TOKENS - 1) + 1
        gaps, reference_gaps = _agreeing_gaps(mine, exact, length), _agreeing_gaps(reference, exact, length)
        assert all(math.isfinite(gap) for gap in gaps)
        assert max(gaps) <= 2 * max(reference_gaps), (gaps, reference_gaps)


def test_float32_models_keep_transformers_delta_rule(float32_checkpoint: Path) -> None:
    """The bfloat16 delta rule is for bfloat16 models only: a float32 model (the reference comparisons')
    keeps transformers' float32 function."""
    fast = Qwen35Engine(float32_checkpoint, dtype="float32")
    assert not any("delta rule" in path for path in fast.paths)


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


@pytest.mark.skipif(not bf16_products_available(), reason="no bfloat16 instructions: the packed path is not used")
@pytest.mark.parametrize("rows", [1, 3, 4, 256])
def test_a_packed_bfloat16_product_is_the_stock_one_bit_for_bit(rows: int) -> None:
    """oneDNN's product on the prepacked weight, one-row inputs padded to PACKED_ROWS included."""
    torch.manual_seed(rows)
    linear = torch.nn.Linear(512, 768, bias=False).to(torch.bfloat16)
    x = torch.randn(1, rows, 512, dtype=torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(PackedLinear(linear)(x), linear(x))
