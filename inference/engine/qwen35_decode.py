"""Decoded tokens of the Qwen3.5 text model on static buffers, with fewer operator calls than transformers'.

transformers' forward for one token builds masks, wraps outputs and concatenates each layer's cache
(3,424 top-level torch operator calls a token on Holo3.1-0.8B's shapes; docs/performance.md).
`Qwen35Decoder` (a static_decode.StaticDecoder) takes the state a prefill left in transformers'
`DynamicCache` once, into buffers that do not move:
- each attention layer's keys and values, preallocated for the answer's whole length (no
  concatenation a token);
- each Gated DeltaNet layer's convolution window and recurrent state (float32, as transformers keeps it).
Then each token runs the layers' arithmetic directly (2,606 calls): the same operations as
transformers' code in its order (the norms, the gated attention with its partial M-RoPE, the
convolution over the window, the gates, the delta rule, the gated norm, the MLP), on the modules'
own weights. What differs, each only in float32's last bits:
- the delta rule's two reductions (the state read with the key and with the query) are batched
  products, not a multiply and a sum;
- projections fused by `fuse_projections` (one product where transformers makes four or two), which
  the prefill (qwen35_cpu's Gated DeltaNet forward and the MLPs) reads too.
The kept state is untouched: the decoder copies out of the cache and never writes back (the engine
snapshots the cache before decoding). Nothing here is specific to the CPU: no shape depends on the
step, so on a GPU `CudaGraphDecoder` captures the step once and replays it for each token (measured on
an H200 with Holo3.1-0.8B's shapes: 4.1 ms a token against 43 ms through transformers' forward).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from holodesk.inference.engine.static_decode import DecodeInputs, KeyValueSlots, StaticDecoder, modeling_of

_DELTANET = ("Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet")
_MLP = ("Qwen3_5MLP", "Qwen3_5MoeMLP")


def _fused(parts: list[nn.Linear]) -> nn.Linear:
    """One bias-free linear layer whose weight is `parts`' weights stacked (their outputs, in order)."""
    weight = torch.cat([part.weight.detach() for part in parts], dim=0)
    fused = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=weight.dtype)
    fused.weight = nn.Parameter(weight, requires_grad=False)
    return fused


def _deltanet_projections(layer: Any) -> None:
    layer.in_proj_all = _fused([layer.in_proj_qkv, layer.in_proj_z, layer.in_proj_b, layer.in_proj_a])
    layer.in_proj_sizes = [layer.conv_dim, layer.value_dim, layer.num_v_heads, layer.num_v_heads]
    del layer.in_proj_qkv, layer.in_proj_z, layer.in_proj_b, layer.in_proj_a


def _mlp_projections(mlp: Any) -> None:
    mlp.gate_up_proj = _fused([mlp.gate_proj, mlp.up_proj])
    del mlp.gate_proj, mlp.up_proj


def fused_mlp_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    """transformers' MLP with its gate and up products as one: down(act(gate(x)) * up(x))."""
    gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
    return self.down_proj(self.act_fn(gate) * up)


def fuse_projections(model: nn.Module) -> tuple[int, int]:
    """Stack the Gated DeltaNet layers' four input projections into one, and each MLP's gate and up into
    one (the originals are released): (DeltaNet layers, MLPs) changed.

    The Gated DeltaNet forward that reads `in_proj_all` is qwen35_cpu's; the MLPs get `fused_mlp_forward`.
    """
    import types

    deltanets = mlps = 0
    for module in list(model.modules()):
        name = type(module).__name__
        if name in _DELTANET:
            _deltanet_projections(module)
            deltanets += 1
        elif name in _MLP:
            _mlp_projections(module)
            module.forward = types.MethodType(fused_mlp_forward, module)
            mlps += 1
    return deltanets, mlps


def _rms(x: torch.Tensor, scale: torch.Tensor, eps: float) -> torch.Tensor:
    """Qwen3.5's RMSNorm with its (1 + weight) already in float32 as `scale`: transformers' operations."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * scale).type_as(x)


class _Attention:
    """A full-attention layer's decode arithmetic over its key and value slots."""

    def __init__(self, attention: Any, cache_layer: Any, capacity: int) -> None:
        self.module = attention
        self.slots = KeyValueSlots(cache_layer, capacity)
        self.rotary = modeling_of(attention).apply_rotary_pos_emb
        self.q_scale = 1.0 + attention.q_norm.weight.float()
        self.k_scale = 1.0 + attention.k_norm.weight.float()
        self.eps = float(attention.q_norm.eps)

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inputs: DecodeInputs) -> torch.Tensor:
        """The layer's output for one token `x` [1, 1, hidden] at the rotary angles `cos`, `sin`."""
        a = self.module
        query, gate = a.q_proj(x).view(1, 1, -1, a.head_dim * 2).chunk(2, dim=-1)
        query = _rms(query, self.q_scale, self.eps).transpose(1, 2)
        key = _rms(a.k_proj(x).view(1, 1, -1, a.head_dim), self.k_scale, self.eps).transpose(1, 2)
        value = a.v_proj(x).view(1, 1, -1, a.head_dim).transpose(1, 2)
        query, key = self.rotary(query, key, cos, sin)
        out = self.slots.attend(query, key, value, inputs, a.scaling)
        out = out.transpose(1, 2).reshape(1, 1, -1) * torch.sigmoid(gate.reshape(1, 1, -1))
        return a.o_proj(out)


class _DeltaNet:
    """A Gated DeltaNet layer's convolution window and recurrent state, and its decode arithmetic."""

    def __init__(self, deltanet: Any, cache_layer: Any) -> None:
        self.module = deltanet
        self.cache_layer = cache_layer
        # [1, channels, K] in the cache (the last K columns); kept here as [1, K, channels], the layout
        # the projections give a column in.
        # Filled by `load`.
        self.window = torch.empty_like(
            cache_layer.conv_states[0].transpose(1, 2), memory_format=torch.contiguous_format
        )
        self.state = torch.empty_like(cache_layer.recurrent_states[0], dtype=torch.float32)
        self.taps = deltanet.conv1d.weight.squeeze(1).to(torch.float32).t().contiguous()  # [K, channels]
        self.bias = None if deltanet.conv1d.bias is None else deltanet.conv1d.bias.to(torch.float32)
        self.decay_rate = -deltanet.A_log.float().exp()
        self.repeat = deltanet.num_v_heads // deltanet.num_k_heads
        self.scale = 1 / (deltanet.head_k_dim**0.5)  # as transformers writes it (the same float)
        self.l2norm = modeling_of(deltanet).l2norm

    def load(self) -> None:
        """The prefill's convolution window and recurrent state into the buffers."""
        self.window.copy_(self.cache_layer.conv_states[0].transpose(1, 2))
        self.state.copy_(self.cache_layer.recurrent_states[0])

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inputs: DecodeInputs) -> torch.Tensor:
        """The layer's output for one token `x` [1, 1, hidden] (no positions: the state carries the order)."""
        d = self.module
        mixed, z, b, a = d.in_proj_all(x).split(d.in_proj_sizes, dim=-1)
        # The convolution over the last K columns, as qwen35_cpu.causal_conv_silu computes it for one column.
        full = torch.cat([self.window, mixed], dim=1)
        self.window.copy_(full[:, 1:])
        conv = (full[:, 1:].to(torch.float32) * self.taps).sum(1, keepdim=True)
        if self.bias is not None:
            conv = conv + self.bias
        mixed = F.silu(conv.to(mixed.dtype))
        query, key, value = mixed.split([d.key_dim, d.key_dim, d.value_dim], dim=-1)
        query = query.reshape(1, -1, d.head_k_dim)
        key = key.reshape(1, -1, d.head_k_dim)
        value = value.reshape(1, -1, d.head_v_dim)
        if self.repeat > 1:
            query = query.repeat_interleave(self.repeat, dim=1)
            key = key.repeat_interleave(self.repeat, dim=1)
        beta = b.sigmoid().reshape(1, -1, 1).to(torch.float32)
        g = self.decay_rate * F.softplus(a.float() + d.dt_bias)
        # The delta rule for one token (transformers' torch_recurrent_gated_delta_rule), the state in place.
        q = self.l2norm(query.to(torch.float32), dim=-1, eps=1e-6) * self.scale
        k = self.l2norm(key.to(torch.float32), dim=-1, eps=1e-6)
        self.state.mul_(g.reshape(1, -1, 1, 1).exp())
        remembered = torch.matmul(k.unsqueeze(-2), self.state).squeeze(-2)
        delta = (value.to(torch.float32) - remembered) * beta
        self.state.add_(k.unsqueeze(-1) * delta.unsqueeze(-2))
        out = torch.matmul(q.unsqueeze(-2), self.state).to(x.dtype)  # [1, heads, 1, v_dim]
        out = d.norm(out.reshape(-1, d.head_v_dim), z.reshape(-1, d.head_v_dim))
        return d.out_proj(out.reshape(1, 1, -1))


class Qwen35Decoder(StaticDecoder):
    """One answer's decoded tokens of a Qwen3.5 text model after a prefill into `cache`, for at most `capacity`
    tokens in all; the token's position is its M-RoPE position (all three axes)."""

    def __init__(self, model: Any, cache: Any, capacity: int) -> None:
        text = model.model.language_model
        super().__init__(text.norm.weight.device, capacity)
        self.embed = text.embed_tokens
        self.rotary = text.rotary_emb
        self.head = model.lm_head
        self.final_scale = 1.0 + text.norm.weight.float()
        self.eps = float(text.norm.eps)
        self.layers: list[tuple[Any, _Attention | _DeltaNet, torch.Tensor, torch.Tensor]] = []
        for index, layer in enumerate(text.layers):
            mixer: _Attention | _DeltaNet
            if layer.block_type == "full_attention":
                mixer = _Attention(layer.self_attn, cache.layers[index], capacity)
                self.states.append((index, mixer.slots))
            else:
                mixer = _DeltaNet(layer.linear_attn, cache.layers[index])
                self.states.append((index, mixer))
            scales = (1.0 + layer.input_layernorm.weight.float(), 1.0 + layer.post_attention_layernorm.weight.float())
            self.layers.append((layer, mixer, *scales))
        self.load()

    def forward(self) -> torch.Tensor:
        hidden = self.embed(self.inputs.token)
        cos, sin = self.rotary(hidden, self.inputs.position)
        for layer, mixer, before, after in self.layers:
            normed = _rms(hidden, before, self.eps)
            hidden = hidden + mixer(normed, cos, sin, self.inputs)
            hidden = hidden + layer.mlp(_rms(hidden, after, self.eps))
        return self.head(_rms(hidden, self.final_scale, self.eps))[:, -1]
