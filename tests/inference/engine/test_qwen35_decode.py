"""The static decoder's buffers taken over by another answer (what a captured CUDA graph replays on a GPU)
decode exactly as buffers made for that answer.

On a GPU the engine captures one `CudaGraphDecoder` and, for each later answer that fits, loads the new
prefill's state into the same buffers (`rebind`): a longer answer before it leaves keys in slots the new
one has not reached, which the mask must hide, and the slot and position counters must start again. The
capture itself needs CUDA; these buffers, masks and counters are the same on the CPU.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bench.qwen35_tiny import VARIANTS, build_qwen35_tiny
from holodesk.inference.engine.qwen35 import Qwen35Engine
from holodesk.inference.engine.qwen35_decode import Qwen35Decoder
from holodesk.inference.engine.static_decode import DecodeError, StaticDecoder
from holodesk.inference.profiles.base import ChatRequest

CAPACITY = 160


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Qwen35Engine:
    variant = dataclasses.replace(VARIANTS["positional"], name="margins", logit_gain=5.0)
    checkpoint = build_qwen35_tiny(tmp_path_factory.mktemp("decode") / "ckpt", dtype="float32", variant=variant)
    return Qwen35Engine(checkpoint, dtype="float32", reuse=False)


def _prefill(engine: Qwen35Engine, text: str) -> tuple[object, int, int]:
    """The cache after prefilling `text` as a user turn, the first decoded token and its position."""
    from transformers import DynamicCache

    prompt = engine.tokenize(ChatRequest(messages=[{"role": "user", "content": text}], max_new_tokens=8))
    cache = DynamicCache(config=engine.model.config.text_config)
    with torch.inference_mode():
        logits = engine._forward(engine._embed(prompt.ids, 0, []), prompt.positions, cache)
    return cache, int(logits[0].argmax()), prompt.next_position


def _decode(decoder: StaticDecoder, token: int, position: int, count: int) -> list[torch.Tensor]:
    rows = []
    with torch.inference_mode():
        for step in range(count):
            logits = decoder.step(token, position + step).clone()
            rows.append(logits)
            token = int(logits[0].argmax())
    return rows


def test_buffers_taken_over_from_a_longer_answer_decode_as_fresh_ones(engine: Qwen35Engine) -> None:
    long_cache, long_token, long_position = _prefill(engine, "Which windows are open on this desktop now? " * 3)
    short_cache, short_token, short_position = _prefill(engine, "Open it.")
    reused = Qwen35Decoder(engine.model, long_cache, CAPACITY)
    _decode(reused, long_token, long_position, 6)  # the long answer fills slots the short one will not reach
    assert reused.prefilled > Qwen35Decoder(engine.model, short_cache, CAPACITY).prefilled + 6
    reused.release()  # as a kept decoder does: the long answer's cache is let go before the next
    reused.rebind(short_cache)
    taken_over = _decode(reused, short_token, short_position, 6)
    fresh = _decode(Qwen35Decoder(engine.model, short_cache, CAPACITY), short_token, short_position, 6)
    for mine, theirs in zip(taken_over, fresh, strict=True):
        assert torch.equal(mine, theirs)


def test_a_decoder_refuses_a_token_past_its_buffers_in_words(engine: Qwen35Engine) -> None:
    cache, token, position = _prefill(engine, "Open it.")
    prefilled = Qwen35Decoder(engine.model, cache, CAPACITY).prefilled
    with pytest.raises(DecodeError, match=f"capacity {prefilled - 1} is below the {prefilled} tokens already cached"):
        Qwen35Decoder(engine.model, cache, prefilled - 1)
    decoder = Qwen35Decoder(engine.model, cache, prefilled + 2)
    _decode(decoder, token, position, 2)
    with pytest.raises(DecodeError, match=f"buffers hold {prefilled + 2} tokens; one more was asked"):
        _decode(decoder, token, position + 2, 1)
