"""What a Qwen3.5-family checkpoint (Holo3, Holo3.1, Holo4) needs in memory, read from its own files.

The plan reads two things and loads nothing: config.json (the layer pattern and sizes) and the
safetensors headers (every tensor's dtype and shape: the 8-byte length, then the JSON header).

- Weights: every tensor's elements times its stored dtype's size (or the run dtype's), without the
  multi-token-prediction head (`mtp.*`), which neither vLLM without speculative decoding nor
  transformers loads.
- The recurrent state of each Gated DeltaNet ("linear_attention") layer, whatever the context: the
  causal convolution's window (conv_dim = 2 x key heads x key dim + value heads x value dim, times the
  kernel, in the run dtype) and the delta rule's state (value heads x key dim x value dim, in float32:
  transformers computes it in float32, and vLLM keeps it so with `--mamba-ssm-cache-dtype float32`).
- Keys and values per token of each full-attention layer: 2 x kv heads x head dim, in the run dtype.
- Vision: one screenshot resized as the Qwen2-VL processor does (sides rounded to 32 pixels, within
  its pixel budget), its 16-px patches through the ViT: a few copies of the hidden width plus the MLP
  per patch; attention through a fused kernel (SDPA), so no patches x patches score matrix.
- Prefill: one chunk's widest activations (the MLP's gate and up, or the experts a token goes to) and
  a few copies of the residual, plus one position's logits in float32.
The activation terms are estimates of the order of magnitude (they are small next to the weights);
the weights and the cache are exact for the layout.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GIB = 1024**3
FLOAT32 = 4
# Bytes per element of each safetensors dtype.
DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
RUN_DTYPES = {"bfloat16": 2, "float16": 2, "float32": 4}
MTP_PREFIX = "mtp."
# The Qwen2-VL image processor: 16-px patches merged 2x2, so sides are multiples of 32 pixels.
PATCH, MERGE = 16, 2
MIN_PIXELS, MAX_PIXELS = 65536, 16777216
# Activations alive at once in a layer (input, normed input, output, residual): a rough multiple.
LIVE_COPIES = 4
PREFILL_CHUNK = 2048  # tokens prefilled at once (vLLM's chunked prefill; transformers does the whole prompt)


class CheckpointLayoutError(ValueError):
    """The folder is not a Qwen3.5-family checkpoint this plan can read (the message names what is missing)."""


@dataclass(frozen=True, slots=True)
class TensorHeader:
    """One tensor as a safetensors header declares it."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.elements * DTYPE_BYTES[self.dtype]


def read_header(file: Path) -> dict[str, TensorHeader]:
    """The tensors one safetensors file declares (its header only: no tensor data is read)."""
    with file.open("rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise CheckpointLayoutError(f"{file} is not a safetensors file: it is shorter than its header length")
        (length,) = struct.unpack("<Q", head)
        try:
            header = json.loads(f.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointLayoutError(f"{file} has no readable safetensors header: {exc}") from exc
    out: dict[str, TensorHeader] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = str(entry["dtype"])
        if dtype not in DTYPE_BYTES:
            raise CheckpointLayoutError(f"{file}: tensor {name} has dtype {dtype}, which this plan does not know")
        out[name] = TensorHeader(dtype, tuple(int(n) for n in entry["shape"]))
    return out


def read_headers(path: Path) -> dict[str, TensorHeader]:
    """Every tensor of the checkpoint folder: the files its index names, or every *.safetensors file."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        paths = [path / name for name in files]
    else:
        paths = sorted(path.glob("*.safetensors"))
    if not paths:
        raise CheckpointLayoutError(f"{path} holds no .safetensors files")
    tensors: dict[str, TensorHeader] = {}
    for file in paths:
        tensors.update(read_header(file))
    return tensors


@dataclass(frozen=True, slots=True)
class Qwen35Layout:
    """The sizes the plan needs, from config.json (`text_config` and `vision_config`)."""

    hidden: int
    vocab: int
    linear_layers: int
    attention_layers: int
    kv_heads: int
    head_dim: int
    attention_heads: int
    linear_key_heads: int
    linear_value_heads: int
    linear_key_dim: int
    linear_value_dim: int
    conv_kernel: int
    mlp_width: int  # per token: the dense MLP's width, or the experts a token goes to plus the shared one
    vit_hidden: int
    vit_mlp: int

    @property
    def conv_dim(self) -> int:
        return 2 * self.linear_key_heads * self.linear_key_dim + self.linear_value_heads * self.linear_value_dim

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Qwen35Layout:
        text = config.get("text_config", config)
        vision = config.get("vision_config") or {}
        try:
            kinds = list(text["layer_types"])
            if "num_experts" in text:
                mlp = int(text["num_experts_per_tok"]) * int(text["moe_intermediate_size"])
                mlp += int(text.get("shared_expert_intermediate_size", 0))
            else:
                mlp = int(text["intermediate_size"])
            return cls(
                hidden=int(text["hidden_size"]),
                vocab=int(text["vocab_size"]),
                linear_layers=kinds.count("linear_attention"),
                attention_layers=kinds.count("full_attention"),
                kv_heads=int(text["num_key_value_heads"]),
                head_dim=int(text["head_dim"]),
                attention_heads=int(text["num_attention_heads"]),
                linear_key_heads=int(text["linear_num_key_heads"]),
                linear_value_heads=int(text["linear_num_value_heads"]),
                linear_key_dim=int(text["linear_key_head_dim"]),
                linear_value_dim=int(text["linear_value_head_dim"]),
                conv_kernel=int(text["linear_conv_kernel_dim"]),
                mlp_width=mlp,
                vit_hidden=int(vision.get("hidden_size", 0)),
                vit_mlp=int(vision.get("intermediate_size", 0)),
            )
        except KeyError as exc:
            raise CheckpointLayoutError(
                f"config.json has no {exc.args[0]!r}: not a Qwen3.5-family (qwen3_5 / qwen3_5_moe) config"
            ) from exc


def image_patches(width: int, height: int) -> int:
    """16-px patches of a screenshot as the Qwen2-VL processor resizes it (its `smart_resize`)."""
    factor = PATCH * MERGE
    h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h * w > MAX_PIXELS:
        scale = math.sqrt(height * width / MAX_PIXELS)
        h, w = math.floor(height / scale / factor) * factor, math.floor(width / scale / factor) * factor
    elif h * w < MIN_PIXELS:
        scale = math.sqrt(MIN_PIXELS / (height * width))
        h, w = math.ceil(height * scale / factor) * factor, math.ceil(width * scale / factor) * factor
    return (h // PATCH) * (w // PATCH)


@dataclass(frozen=True, slots=True)
class Qwen35MemoryPlan:
    """Bytes: the weights, the cache (a fixed state plus keys and values per token), the activation peaks."""

    text_weights: int
    vision_weights: int
    embedding: int  # the input embedding table, part of text_weights (a lookup, not a matrix product)
    state_per_sequence: int
    kv_per_token: int
    vision_peak: int
    prefill_peak: int

    @property
    def weights(self) -> int:
        return self.text_weights + self.vision_weights

    def cache(self, tokens: int) -> int:
        """The recurrent states of every DeltaNet layer and the keys and values of `tokens` tokens."""
        return self.state_per_sequence + self.kv_per_token * tokens

    def total(self, tokens: int) -> int:
        """Weights, the cache for `tokens`, and the larger activation peak (the ViT's comes before the prefill's)."""
        return self.weights + self.cache(tokens) + max(self.vision_peak, self.prefill_peak)

    def describe(self, tokens: int) -> str:
        return (
            f"weights {self.weights / GIB:.2f} GiB + cache for {tokens:,} tokens {self.cache(tokens) / GIB:.2f} GiB"
            f" + activations {max(self.vision_peak, self.prefill_peak) / GIB:.2f} GiB"
            f" = {self.total(tokens) / GIB:.2f} GiB"
        )


def plan_memory(
    config: Mapping[str, Any],
    tensors: Mapping[str, TensorHeader],
    *,
    dtype: str | None = None,
    state_dtype_bytes: int = FLOAT32,
    screen: tuple[int, int] = (1280, 800),
    chunk: int = PREFILL_CHUNK,
) -> Qwen35MemoryPlan:
    """The plan for a checkpoint given as its config and its tensors' headers.

    `dtype` is the run dtype ("bfloat16", "float16", "float32"); None keeps each tensor's stored one
    for the weights and takes bfloat16 for activations and the cache.
    """
    layout = Qwen35Layout.from_config(config)
    run_bytes = RUN_DTYPES[dtype] if dtype else None
    act = run_bytes or 2
    text = vision = embedding = 0
    for name, header in tensors.items():
        if name.startswith(MTP_PREFIX):
            continue
        size = header.elements * run_bytes if run_bytes else header.nbytes
        if ".visual." in f".{name}":
            vision += size
        else:
            text += size
        if name.endswith("embed_tokens.weight"):
            embedding += size
    conv = layout.conv_dim * layout.conv_kernel * act
    delta = layout.linear_value_heads * layout.linear_key_dim * layout.linear_value_dim * state_dtype_bytes
    kv = layout.attention_layers * 2 * layout.kv_heads * layout.head_dim * act
    patches = image_patches(*screen)
    vision_peak = patches * (LIVE_COPIES * layout.vit_hidden + layout.vit_mlp) * act if layout.vit_hidden else 0
    widest = max(
        2 * layout.mlp_width,
        layout.conv_dim + layout.linear_value_heads * layout.linear_value_dim,
        (2 * layout.attention_heads + 2 * layout.kv_heads) * layout.head_dim,
    )
    prefill_peak = chunk * (widest + LIVE_COPIES * layout.hidden) * act + layout.vocab * FLOAT32
    return Qwen35MemoryPlan(
        text_weights=text,
        vision_weights=vision,
        embedding=embedding,
        state_per_sequence=layout.linear_layers * (conv + delta),
        kv_per_token=kv,
        vision_peak=vision_peak,
        prefill_peak=prefill_peak,
    )


def plan_checkpoint(
    path: str | Path,
    *,
    dtype: str | None = None,
    state_dtype_bytes: int = FLOAT32,
    screen: tuple[int, int] = (1280, 800),
    chunk: int = PREFILL_CHUNK,
) -> Qwen35MemoryPlan:
    """The plan for a checkpoint folder, from its config.json and safetensors headers (see `plan_memory`)."""
    folder = Path(path)
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise CheckpointLayoutError(f"{folder} has no config.json")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    return plan_memory(
        config, read_headers(folder), dtype=dtype, state_dtype_bytes=state_dtype_bytes, screen=screen, chunk=chunk
    )
