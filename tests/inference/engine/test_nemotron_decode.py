"""Nemotron-H's static decoder (engine/nemotron_decode.py) gives the tokens and log-probs of transformers'
own one-token forward, and its buffers taken over by another answer (what a captured CUDA graph replays
on a GPU) decode as fresh ones.

The engine decodes on static buffers by default (`static_decode=True`); `static_decode=False` decodes
through transformers' forward, the reference. Both answer the same conversations on the realistic and
wide-heads tiny checkpoints and on the mixture-of-experts one (Holotron-3-Nano's family), float32: a
first step with screenshots, then the next on the kept state. Every greedy token is equal and every top-5
log-prob within 1e-5 (the attention reads preallocated slots through a mask: the same products).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bench.nemotron_omni_tiny import build_nemotron_omni_tiny
from bench.nemotron_tiny import build_nemotron_tiny
from holodesk.inference.engine.nemotron_decode import NemotronDecoder
from holodesk.inference.engine.runner import Engine, EngineResult
from holodesk.inference.profiles.base import ChatRequest
from tests.support.agent_conversations import agent_conversation

TOKENS = 12
TOLERANCE = 1e-5


def _conversation(turns: int) -> ChatRequest:
    return agent_conversation(turns, max_new_tokens=TOKENS, first_width=500)


def _answers(engine: Engine) -> list[EngineResult]:
    engine.forget()
    return [engine.generate(_conversation(turns), top_logprobs=5, ignore_stop=True) for turns in (1, 2)]


@pytest.fixture(scope="module", params=["realistic", "wide-heads", "omni"])
def checkpoint(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp(f"decode-{request.param}") / "ckpt"
    if request.param == "omni":
        return build_nemotron_omni_tiny(folder, dtype="float32")
    return build_nemotron_tiny(folder, dtype="float32", variant=request.param)


def test_static_decoding_gives_transformers_tokens_and_log_probs(checkpoint: Path) -> None:
    static = Engine(checkpoint, dtype="float32")
    reference = Engine(checkpoint, dtype="float32", static_decode=False)
    assert "decoded tokens on static buffers" in static.paths and reference.paths == []
    ours, theirs = _answers(static), _answers(reference)
    assert ours[1].reused_tokens > 0  # the second step resumed from the kept state
    for mine, other in zip(ours, theirs, strict=True):
        assert mine.prompt_ids == other.prompt_ids
        assert mine.new_ids == other.new_ids
        for step_mine, step_other in zip(mine.top_logprobs, other.top_logprobs, strict=True):
            assert step_mine.keys() == step_other.keys()
            assert max(abs(step_mine[token] - step_other[token]) for token in step_other) <= TOLERANCE


def _prefill(engine: Engine, turns: int) -> tuple[object, int, int]:
    """The cache after prefilling a conversation, the first decoded token and the prompt's length."""
    from transformers import DynamicCache

    request = _conversation(turns)
    prompt = engine.tokenize(request)
    images = [
        (start, str(index), image, count, None)
        for index, (start, image, count) in enumerate(
            zip(prompt.image_starts, request.images, prompt.image_token_counts, strict=True)
        )
    ]
    cache = DynamicCache(config=engine.model.language_model.config)
    with torch.inference_mode():
        logits = engine._forward(engine._embed(prompt.ids, 0, images), cache)
    return cache, int(logits[0].argmax()), len(prompt.ids)


def _decode(decoder: NemotronDecoder, token: int, count: int) -> list[torch.Tensor]:
    rows = []
    with torch.inference_mode():
        for step in range(count):
            logits = decoder.step(token, step).clone()
            rows.append(logits)
            token = int(logits[0].argmax())
    return rows


def test_buffers_taken_over_from_a_longer_answer_decode_as_fresh_ones(tmp_path: Path) -> None:
    engine = Engine(build_nemotron_tiny(tmp_path / "ckpt", dtype="float32", variant="realistic"), dtype="float32")
    long_cache, long_token, long_length = _prefill(engine, 2)
    short_cache, short_token, short_length = _prefill(engine, 1)
    capacity = long_length + 16
    reused = NemotronDecoder(engine.model.language_model, long_cache, capacity)
    assert reused.prefilled == long_length
    _decode(reused, long_token, 6)  # the long answer fills slots the short one will not reach
    reused.release()  # as a kept decoder does: the long answer's cache is let go before the next
    reused.rebind(short_cache)
    assert reused.prefilled == short_length
    taken_over = _decode(reused, short_token, 6)
    fresh = _decode(NemotronDecoder(engine.model.language_model, short_cache, capacity), short_token, 6)
    for mine, theirs in zip(taken_over, fresh, strict=True):
        assert torch.equal(mine, theirs)
