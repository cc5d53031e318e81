"""Faster CPU paths for the Qwen3.5 text model, put in place after loading; transformers' arithmetic
but for the bfloat16 delta rule, which has vLLM's CPU precision.

Where the time went on Holo3.1-0.8B's shapes (docs/performance.md): in prefill, transformers'
PyTorch fallbacks of the Gated DeltaNet layers (its chunked delta rule above all, and its causal
convolution); in decode, bfloat16 matrix-vector products, which the stock CPU GEMM runs at a third of
the speed it reaches on four rows. What changes here, and why the numbers do (or do not):

- `causal_conv_silu`: for a prefill chunk, transformers' own grouped conv1d in the model's dtype over
  the channels-first columns the cache gives (contiguous, which transformers' call on the transposed
  activations is not), the result left channels-first; bit for bit transformers' in bfloat16. One
  decoded column: K multiply-adds in float32, rounded once to the model's dtype, then SiLU.
- `chunked_delta_rule_bf16` (qwen35_delta_rule.py; bfloat16 models on CPUs with bfloat16
  instructions): the chunked delta rule with bfloat16 products, as vLLM's CPU kernel and fla's
  GPU kernels round it. The only path here that changes the arithmetic: a bfloat16 model's answers
  stay as close to the same weights run in float32 as transformers' bfloat16 code's (tested).
- `CPU_PREFILL_CHUNK`: prefill in chunks of 256 tokens, not 2,048 (the engine caps its chunk with it).
- `recurrent_step`: a decoded token's delta-rule update with transformers' operations, minus the
  set-up its sequence loop needs (about a dozen tensor operations a layer a token fewer).
- `PackedLinear` (bfloat16 models on CPUs with bfloat16 instructions: avx512_bf16 or AMX): the
  weight reordered once into oneDNN's blocked layout, products through oneDNN, inputs of fewer than
  PACKED_ROWS rows padded to PACKED_ROWS (the kernel oneDNN picks for one row is the slow one). The
  result is the stock product's, bit for bit, on this machine (tested). The float32 path, the one the
  reference comparisons use, keeps the stock products and transformers' delta rule.

`accelerate` puts these in place and says, in words, which paths a model now runs.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from holodesk.inference.engine.qwen35_decode import fuse_projections
from holodesk.inference.engine.qwen35_delta_rule import chunked_delta_rule_bf16
from holodesk.inference.engine.static_decode import modeling_of

PACKED_ROWS = 4
# Prefill chunk on the CPU: the delta rule's and the convolution's float32 intermediates of a 256-token
# chunk stay in cache; a 2,048-token chunk's (16-50 MB each) do not. Measured on Holo3.1-0.8B's
# shapes, 2,048 tokens prefilled in chunks of 2048/512/256: 54/73/133 tokens/s (medians of 3, load 7-9).
CPU_PREFILL_CHUNK = 256


def bf16_products_available() -> bool:
    """Whether oneDNN runs bfloat16 products with the CPU's own instructions (avx512_bf16 or AMX).

    The packing and product operators are torch's (its CPU compiler uses them); a torch without them
    gets the stock products.
    """
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        mkldnn = torch.ops.mkldnn
        _ = (mkldnn._reorder_linear_weight, mkldnn._linear_pointwise)
        return bool(mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def causal_conv_silu(
    full: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, new: int, dtype: torch.dtype
) -> torch.Tensor:
    """SiLU of the depthwise causal convolution's last `new` columns of `full` [batch, channels, columns].

    The result is [batch, new, channels] (for more than one column, a view of a channels-first tensor).

    `full` holds the earlier columns the convolution sees (the cache's state, or none at the start)
    followed by the new ones; missing earlier columns are zeros, as in transformers' padded conv.
    `weight` is [channels, K].
    """
    kernel = weight.shape[-1]
    earlier = full.shape[-1] - new
    if earlier < kernel - 1:
        full = F.pad(full, (kernel - 1 - earlier, 0))
    columns = full[..., full.shape[-1] - new - (kernel - 1) :]  # the new columns and the K - 1 before them
    if new > 1:
        # transformers' own grouped conv1d, over the channels-first columns as they come: in bfloat16
        # oneDNN's kernel (float32 accumulation, one rounding) gave transformers' bits at a third of the
        # shifted multiply-adds' time on a 256-column chunk; the result stays channels-first.
        out = F.conv1d(
            columns.to(dtype),
            weight.to(dtype).unsqueeze(1),
            None if bias is None else bias.to(dtype),
            groups=len(weight),
        )
        return F.silu(out).transpose(1, 2)
    x = columns.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
    taps = weight.to(torch.float32).t()  # [K, channels]
    out = (x * taps).sum(1, keepdim=True)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return F.silu(out.to(dtype))


def recurrent_step(
    modeling: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of the gated delta rule: transformers' `torch_recurrent_gated_delta_rule` for a sequence of one.

    The same float32 operations in the same order (so the same bits), without its per-sequence set-up:
    the transposes to [batch, heads, time, dim], their contiguous copies, the zeroed output and the
    loop. `query`, `key`, `value` are [batch, 1, heads, dim]; `g` and `beta` [batch, 1, heads]; `state`
    [batch, heads, k_dim, v_dim]. Returns the output [batch, 1, heads, v_dim] and the new state.
    """
    q, k, v = (x[:, 0].to(torch.float32) for x in (query, key, value))
    q = modeling.l2norm(q, dim=-1, eps=1e-6)
    k = modeling.l2norm(k, dim=-1, eps=1e-6)
    q = q / (q.shape[-1] ** 0.5)
    state = state.to(torch.float32) * g[:, 0].to(torch.float32).exp()[..., None, None]
    kv_mem = (state * k.unsqueeze(-1)).sum(dim=-2)
    delta = (v - kv_mem) * beta[:, 0].to(torch.float32).unsqueeze(-1)
    state = state + k.unsqueeze(-1) * delta.unsqueeze(-2)
    out = (state * q.unsqueeze(-1)).sum(dim=-2)
    return out.unsqueeze(1).to(query.dtype), state


def gated_deltanet_forward(
    self: Any,
    hidden_states: torch.Tensor,
    cache_params: Any = None,
    attention_mask: Any = None,
    *,
    bf16_delta_rule: bool = False,
    **kwargs: Any,
) -> torch.Tensor:
    """transformers' `Qwen3_5GatedDeltaNet.forward` (5.19) with `causal_conv_silu`, `recurrent_step` and its
    four input projections as one (`in_proj_all`, qwen35_decode.fuse_projections).

    The projections, the cache updates and the chunked delta rule of a prefill are the original's, in
    its order. The delta rule is transformers' own function, looked up in the layer's module so that
    installed kernels still apply, or with `bf16_delta_rule` (bound by `accelerate` for bfloat16
    models on CPUs with bfloat16 instructions) qwen35_delta_rule's, with bfloat16 products.
    """
    modeling = modeling_of(self)
    hidden_states = modeling.apply_mask_to_padding_states(hidden_states, attention_mask)
    batch_size, seq_len, _ = hidden_states.shape
    use_precomputed_states = cache_params is not None and cache_params.has_previous_state(self.layer_idx, state_idx=0)

    mixed_qkv, z, b, a = self.in_proj_all(hidden_states).split(self.in_proj_sizes, dim=-1)
    z = z.reshape(batch_size, seq_len, -1, self.head_v_dim)

    columns = mixed_qkv.transpose(1, 2)
    if cache_params is not None:  # the state's columns first; the state keeps the last K (transformers' rule)
        columns = cache_params.update_conv_state(columns, self.layer_idx, conv_kernel_size=self.conv_kernel_size)
    mixed_qkv = causal_conv_silu(columns, self.conv1d.weight.squeeze(1), self.conv1d.bias, seq_len, mixed_qkv.dtype)

    query, key, value = torch.split(mixed_qkv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
    query = query.reshape(batch_size, seq_len, -1, self.head_k_dim)
    key = key.reshape(batch_size, seq_len, -1, self.head_k_dim)
    value = value.reshape(batch_size, seq_len, -1, self.head_v_dim)

    beta = b.sigmoid()
    g = -self.A_log.float().exp() * F.softplus(a.float() + self.dt_bias)
    if self.num_v_heads // self.num_k_heads > 1:
        query = query.repeat_interleave(self.num_v_heads // self.num_k_heads, dim=2)
        key = key.repeat_interleave(self.num_v_heads // self.num_k_heads, dim=2)

    recurrent_state = cache_params.layers[self.layer_idx].recurrent_states[0] if use_precomputed_states else None
    last_recurrent_state: torch.Tensor | None
    if recurrent_state is not None and seq_len == 1:
        core_attn_out, last_recurrent_state = recurrent_step(modeling, query, key, value, g, beta, recurrent_state)
    elif bf16_delta_rule:
        core_attn_out, last_recurrent_state = chunked_delta_rule_bf16(
            query, key, value, g, beta, recurrent_state, output_final_state=cache_params is not None
        )
    else:
        core_attn_out, last_recurrent_state = modeling.torch_chunk_gated_delta_rule(
            query,
            key,
            value,
            g=g,
            beta=beta,
            initial_state=recurrent_state,
            output_final_state=cache_params is not None,
            use_qk_l2norm_in_kernel=True,
        )
    if cache_params is not None:
        cache_params.update_recurrent_state(last_recurrent_state, self.layer_idx)

    # The gated norm works row by row over the last dimension: given [batch, time, heads, dim] as they
    # are, where transformers flattens them first and so copies z, a strided slice of the projections.
    core_attn_out = self.norm(core_attn_out, z)
    return self.out_proj(core_attn_out.reshape(batch_size, seq_len, -1))


def patch_embed_forward(self: Any, hidden_states: torch.Tensor) -> torch.Tensor:
    """transformers' vision patch embedding, a Conv3d whose stride is its kernel, as the product it is.

    Each patch (channels x 2 frames x 16 x 16 pixels, flattened in that order by the image processor)
    meets each filter once: one matrix product with the filters flattened the same way, as vLLM computes
    it on the CPU. A 1280x800 screenshot through Holo3.1-0.8B's vision tower: 3.6 s against 4.8 s with
    oneDNN's bfloat16 Conv3d (medians of 4, alternating; the profiler put 3.9 s of one run in the Conv3d).
    In float32 the embeddings agree within rounding; in bfloat16 they can differ in the last bit.
    """
    weight = self.proj.weight
    patches = hidden_states.reshape(-1, weight[0].numel()).to(weight.dtype)
    return F.linear(patches, weight.reshape(weight.shape[0], -1), self.proj.bias)


def grouped_attention(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> torch.Tensor:
    """sdpa with the key-value heads shared by their query heads, where transformers copies them out first.

    transformers repeats each key-value head for its query heads whenever a mask is given, which a
    prefill chunk after the first always has (it sees the earlier chunks' keys): 7,306 keys x 8 heads
    copied per layer per chunk on Holo3.1-0.8B's shapes. sdpa shares them itself (`enable_gqa`), and
    with an additive mask rather than the boolean one its CPU kernel took half the time of
    transformers' call on a 256-token chunk over 7,306 keys, with the same bfloat16 result (bit for bit).
    """
    if mask is not None and mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill_(~mask, float("-inf"))
    causal = mask is None and query.shape[2] > 1
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scale, is_causal=causal, enable_gqa=query.shape[1] != key.shape[1]
    )


def attention_forward(
    self: Any,
    hidden_states: torch.Tensor,
    position_embeddings: tuple[torch.Tensor, torch.Tensor],
    attention_mask: torch.Tensor | None,
    past_key_values: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' `Qwen3_5Attention.forward` (5.19, its sdpa path) with `grouped_attention`."""
    modeling = modeling_of(self)
    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    query, gate = torch.chunk(self.q_proj(hidden_states).view(*input_shape, -1, self.head_dim * 2), 2, dim=-1)
    gate = gate.reshape(*input_shape, -1)
    query = self.q_norm(query.view(hidden_shape)).transpose(1, 2)
    key = self.k_norm(self.k_proj(hidden_states).view(hidden_shape)).transpose(1, 2)
    value = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
    cos, sin = position_embeddings
    query, key = modeling.apply_rotary_pos_emb(query, key, cos, sin)
    if past_key_values is not None:
        key, value = past_key_values.update(key, value, self.layer_idx)
    out = grouped_attention(query, key, value, attention_mask, self.scaling).transpose(1, 2).contiguous()
    out = out.reshape(*input_shape, -1).contiguous() * torch.sigmoid(gate)
    return self.o_proj(out), None


class PackedLinear(nn.Module):
    """A bfloat16 `nn.Linear` whose weight is held in oneDNN's blocked layout (the original is released)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.register_buffer(
            "packed", torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), PACKED_ROWS), persistent=False
        )
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // self.in_features
        flat = x.reshape(rows, self.in_features)
        if rows < PACKED_ROWS:
            flat = F.pad(flat, (0, 0, 0, PACKED_ROWS - rows))
        out = torch.ops.mkldnn._linear_pointwise(flat.contiguous(), self.packed, self.bias, "none", [], "")
        return out[:rows].reshape(*x.shape[:-1], self.out_features)


def pack_linears(model: nn.Module, skip: set[int]) -> int:
    """Every bfloat16 `nn.Linear` under `model` but those whose weight is in `skip` (shared), as `PackedLinear`."""
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and child.weight.dtype == torch.bfloat16 and id(child.weight) not in skip:
                setattr(parent, name, PackedLinear(child))
                swapped += 1
    return swapped


def accelerate(model: nn.Module, device: torch.device, attention: str = "sdpa") -> list[str]:
    """Put the CPU paths in place in a loaded Qwen3.5 model; what now runs, in words (empty off the CPU).

    `attention` is the implementation the model was loaded with: only sdpa's is replaced.
    """
    if device.type != "cpu":
        return []
    paths: list[str] = []
    layers = [m for m in model.modules() if type(m).__name__ in ("Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet")]
    # The bfloat16 delta rule where the products it is made of are fast: elsewhere transformers' float32
    # function is both faster and closer.
    bf16_rule = bf16_products_available() and any(
        layer.get_parameter("conv1d.weight").dtype == torch.bfloat16 for layer in layers
    )
    for layer in layers:
        layer.forward = types.MethodType(functools.partial(gated_deltanet_forward, bf16_delta_rule=bf16_rule), layer)
    if layers:
        paths.append(f"causal convolution as one grouped product per chunk in {len(layers)} Gated DeltaNet layers")
    if bf16_rule:
        paths.append(f"the chunked delta rule with bfloat16 products (vLLM's CPU precision) in {len(layers)} layers")
    embeds = [
        m for m in model.modules() if type(m).__name__ in ("Qwen3_5VisionPatchEmbed", "Qwen3_5MoeVisionPatchEmbed")
    ]
    for embed in embeds:
        embed.forward = types.MethodType(patch_embed_forward, embed)
    if embeds:
        paths.append("the vision patch embedding as one matrix product")
    attentions = [m for m in model.modules() if type(m).__name__ in ("Qwen3_5Attention", "Qwen3_5MoeAttention")]
    if attention != "sdpa":
        attentions = []
    for layer_attention in attentions:
        layer_attention.forward = types.MethodType(attention_forward, layer_attention)
    if attentions:
        paths.append(f"prefill attention with shared key-value heads in {len(attentions)} layers")
    deltanets, mlps = fuse_projections(model)
    if deltanets or mlps:
        paths.append(
            f"one product for each of {deltanets} DeltaNet layers' four input projections and {mlps} MLPs' gate and up"
        )
    if bf16_products_available():
        # The text model's layers only: the vision tower's (biased, 4,000-row) products ran at half the
        # speed packed (10 s against 20 s for a 1280x800 screenshot on Holo3.1-0.8B's shapes). A weight
        # shared with an embedding table (a tied output head) stays as it is: the table reads it.
        text = model.get_submodule("model.language_model")
        shared = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        packed = pack_linears(text, shared)
        if packed:
            paths.append(f"{packed} bfloat16 linear layers of the text model through oneDNN, weights prepacked")
    elif any(p.dtype == torch.bfloat16 for p in model.parameters()):
        paths.append("bfloat16 products through the stock GEMM (this CPU has neither avx512_bf16 nor AMX)")
    return paths
