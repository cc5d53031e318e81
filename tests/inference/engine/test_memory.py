"""The memory plan: the cache estimate is what the engine really holds; weights are what the files hold."""

from __future__ import annotations

import pytest
import torch

from holodesk.inference.engine.memory import cache_bytes, plan_memory, weight_elements
from holodesk.inference.engine.runner import Engine


def _held_bytes(cache: object) -> int:
    """Bytes of every tensor the cache object holds (its layers' keys, values, conv and SSM states)."""
    seen: set[int] = set()
    total = 0

    def visit(value: object) -> None:
        nonlocal total
        if isinstance(value, torch.Tensor):
            if id(value) not in seen:
                seen.add(id(value))
                total += value.numel() * value.element_size()
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item)
        elif hasattr(value, "__dict__"):
            for item in vars(value).values():
                visit(item)

    visit(cache)
    return total


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_cache_estimate_is_what_a_prefill_leaves_behind(engine: Engine, dtype: str) -> None:
    from transformers import DynamicCache

    model = engine.model if dtype == "float32" else Engine(engine.spec.path, dtype=dtype).model
    tokens = 300
    cache = DynamicCache(config=model.language_model.config)
    ids = torch.full((1, tokens), engine.tokenizer.convert_tokens_to_ids("<s>"))
    with torch.inference_mode():
        model.language_model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    assert cache_bytes(engine.spec, tokens, torch.finfo(getattr(torch, dtype)).bits // 8) == _held_bytes(cache)


def test_weights_are_counted_from_the_files(engine: Engine) -> None:
    loaded = sum(p.numel() for p in engine.model.parameters())
    scales = (".ls1.gamma", ".ls2.gamma")
    layer_scales = sum(p.numel() for n, p in engine.model.named_parameters() if n.endswith(scales))
    conditioner = 6  # RADIO's input normalization: checked against config.json, not a weight of the model
    assert weight_elements(engine.spec) == loaded - layer_scales + conditioner


def test_the_plan_grows_with_the_context_and_holds_the_kept_caches_and_the_decoders_copy(engine: Engine) -> None:
    short = plan_memory(engine.spec, dtype_bytes=2, context=4096, prefill_chunk=2048, keep_state=False, max_tiles=12)
    long = plan_memory(engine.spec, dtype_bytes=2, context=16384, prefill_chunk=2048, keep_state=False, max_tiles=12)
    kept = plan_memory(engine.spec, dtype_bytes=2, context=16384, prefill_chunk=2048, keep_state=True, max_tiles=12)
    assert long.cache > short.cache and long.prefill_peak > short.prefill_peak
    one = cache_bytes(engine.spec, 16384, 2)
    assert long.cache == 2 * one  # the live cache and the static decoder's copy of it
    assert kept.cache == 4 * one  # and the two kept points
    assert "GiB" in kept.describe()
