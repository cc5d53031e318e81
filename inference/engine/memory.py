"""What the engine will hold in memory for a given context: weights, the hybrid cache, prefill peaks.

- Weights: every tensor in the safetensors files (their headers give the shapes), in the run dtype.
- Cache for `context` tokens: per attention layer a key and a value of kv_heads x head_dim a token;
  per Mamba-2 layer a convolution window (conv_kernel x conv_dim) and an SSM state (heads x head_dim x
  state, kept in float32), whatever the length. With state kept between steps there are three caches (the live
  one and the conversation's two snapshots: at its end and at the turn of its oldest screenshot), and one
  more either way: the static decoder's buffers, a copy of the cache for the whole answer (static_decode).
- Prefill peak of one chunk: the widest per-token activation (Mamba's input projection or the MLP)
  a few times over, attention scores chunk x context x heads in float32 where no fused kernel avoids
  them, the Mamba chunked scan's chunk x chunk decay matrices per head, and the logits of one position.
- Vision: one screenshot's tiles through the ViT (tokens x width activations, attention scores per head).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

from holodesk.inference.engine.spec import ModelSpec, tensor_shapes

_FLOAT32 = 4
# Activations alive at once in a layer (input, normed input, projection, output), a rough multiple.
_LIVE_COPIES = 4


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    weights: int
    cache: int
    prefill_peak: int
    vision_peak: int

    @property
    def total(self) -> int:
        return self.weights + self.cache + max(self.prefill_peak, self.vision_peak)

    def describe(self) -> str:
        gib = 1024**3
        return (
            f"weights {self.weights / gib:.2f} GiB + cache {self.cache / gib:.2f} GiB + prefill peak"
            f" {max(self.prefill_peak, self.vision_peak) / gib:.2f} GiB = {self.total / gib:.2f} GiB"
        )


def weight_elements(spec: ModelSpec) -> int:
    """Elements of every tensor in the checkpoint, read from the safetensors headers (no weights loaded)."""
    return sum(prod(shape) for shape in tensor_shapes(spec.path).values())


def _layer_counts(llm: dict[str, Any]) -> tuple[int, int]:
    pattern = str(llm.get("hybrid_override_pattern", ""))
    return pattern.count("*"), pattern.count("M")


def cache_bytes(spec: ModelSpec, tokens: int, dtype_bytes: int) -> int:
    """The hybrid cache after `tokens` tokens; the SSM state is float32 whatever the weights' dtype."""
    llm = spec.llm_config
    attention, mamba = _layer_counts(llm)
    head_dim = int(llm.get("head_dim") or int(llm["hidden_size"]) // int(llm["num_attention_heads"]))
    kv = attention * 2 * int(llm["num_key_value_heads"]) * head_dim * tokens * dtype_bytes
    heads, head_width = int(llm["mamba_num_heads"]), int(llm["mamba_head_dim"])
    state, groups = int(llm["ssm_state_size"]), int(llm["n_groups"])
    conv_dim = heads * head_width + 2 * groups * state
    conv = conv_dim * int(llm.get("conv_kernel", 4)) * dtype_bytes
    return kv + mamba * (conv + heads * head_width * state * _FLOAT32)


def plan_memory(
    spec: ModelSpec, *, dtype_bytes: int, context: int, prefill_chunk: int, keep_state: bool, max_tiles: int
) -> MemoryPlan:
    llm = spec.llm_config
    hidden = spec.hidden
    heads = int(llm["num_attention_heads"])
    mamba_heads, head_width = int(llm["mamba_num_heads"]), int(llm["mamba_head_dim"])
    state, groups = int(llm["ssm_state_size"]), int(llm["n_groups"])
    chunk = min(prefill_chunk, context)
    projection = 2 * mamba_heads * head_width + 2 * groups * state + mamba_heads
    widest = max(projection, int(llm.get("intermediate_size", hidden)), hidden)
    scan_chunk = int(llm.get("chunk_size", 128))
    prefill = (
        _LIVE_COPIES * chunk * widest * dtype_bytes
        + heads * chunk * context * _FLOAT32
        + mamba_heads * chunk * scan_chunk * _FLOAT32 * 2
        + spec.vocab_size * _FLOAT32
    )
    vision = spec.vision
    tokens = (spec.tile_size // vision.patch) ** 2 + vision.skipped_tokens
    tiles = max_tiles + 1
    if spec.dynamic is not None:  # Nemotron-3-Nano-Omni: one image resized whole, up to its patch cap
        tokens = (spec.dynamic.max_patches or 4 * context) + vision.skipped_tokens
        tiles = 1
    vision_peak = tiles * (
        _LIVE_COPIES * tokens * max(vision.mlp, 3 * vision.hidden) * dtype_bytes
        + vision.heads * tokens * tokens * _FLOAT32
    )
    caches = (3 if keep_state else 1) + 1  # + the static decoder's copy
    return MemoryPlan(
        weights=weight_elements(spec) * dtype_bytes,
        cache=caches * cache_bytes(spec, context, dtype_bytes),
        prefill_peak=prefill,
        vision_peak=vision_peak,
    )
