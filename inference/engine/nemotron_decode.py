"""Decoded tokens of Nemotron-H (the language model of Holotron-12B and Holotron-3-Nano) on static buffers.

`NemotronDecoder` (a static_decode.StaticDecoder) takes the state a prefill left in transformers' cache
into buffers that do not move, and decodes each token with the arithmetic of transformers' one-token
path, in its order and through the same functions:
- a Mamba-2 layer: its input projection split into gate, convolution input and step size; the
  convolution's update (`causal_conv1d_update`) on the window; the state update
  (`mamba2_selective_state_update`, no step-size clamp, as on transformers' and vLLM's decode path);
  the gated norm and the output projection. Both functions are looked up in the layer's transformers
  module at each call, so the kernels `kernels.bind_kernels` put there (mamba-ssm's Triton state
  update, causal-conv1d's compiled update) run here too;
- an attention layer (no rotary embedding in Nemotron-H): its projections, the key and value to their
  slot, attention over the slots seen (static_decode.KeyValueSlots);
- MLP and mixture-of-experts layers: the modules themselves (they keep no state).
What differs from transformers' forward: no masks built, no outputs wrapped, no cache concatenated (the
attention reads preallocated slots through a mask: the same products, the masked slots adding exact
zeros). The cache is never written: the engine's snapshots stay as the prefill left them.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from holodesk.inference.engine.static_decode import DecodeInputs, KeyValueSlots, StaticDecoder, modeling_of


class _Mamba:
    """A Mamba-2 layer's convolution window and state, and its one-token arithmetic."""

    def __init__(self, mixer: Any, cache_layer: Any) -> None:
        self.module = mixer
        self.modeling = modeling_of(mixer)
        self.cache_layer = cache_layer
        # Filled by `load`.
        self.window = torch.empty_like(cache_layer.conv_states[0])  # [1, channels, K]
        self.state = torch.empty_like(cache_layer.recurrent_states[0])  # [1, heads, head_dim, state size]
        head_dim, size = mixer.head_dim, mixer.ssm_state_size
        # As transformers expands them for its state update (the per-head values along head_dim and the state).
        self.decay = (-torch.exp(mixer.A_log.float()))[:, None, None].expand(-1, head_dim, size)
        self.skip = mixer.D[:, None].expand(-1, head_dim)
        self.dt_bias = mixer.dt_bias[:, None].expand(-1, head_dim)
        self.taps = mixer.conv1d.weight.squeeze(1)

    def load(self) -> None:
        self.window.copy_(self.cache_layer.conv_states[0])
        self.state.copy_(self.cache_layer.recurrent_states[0])

    def __call__(self, x: torch.Tensor, inputs: DecodeInputs) -> torch.Tensor:
        m = self.module
        gate, columns, dt = m.in_proj(x).split([m.intermediate_size, m.conv_dim, m.num_heads], dim=-1)
        columns = self.modeling.causal_conv1d_update(
            columns.transpose(1, 2), self.window, self.taps, m.conv1d.bias, activation=m.activation
        ).transpose(1, 2)
        groups = m.n_groups * m.ssm_state_size
        hidden, b, c = torch.split(columns, [m.intermediate_size, groups, groups], dim=-1)
        out = self.modeling.mamba2_selective_state_update(
            self.state,
            hidden.view(1, m.num_heads, m.head_dim),
            dt.transpose(1, 2).expand(-1, -1, m.head_dim),
            self.decay,
            b.view(1, m.n_groups, m.ssm_state_size),
            c.view(1, m.n_groups, m.ssm_state_size),
            self.skip,
            z=None,
            dt_bias=self.dt_bias,
            dt_softplus=True,
        )
        out = m.norm(out.view(1, 1, -1), gate)
        return m.out_proj(out.to(x.dtype))


class _Attention:
    """An attention layer's one-token arithmetic over its key and value slots."""

    def __init__(self, attention: Any, cache_layer: Any, capacity: int) -> None:
        self.module = attention
        self.slots = KeyValueSlots(cache_layer, capacity)

    def __call__(self, x: torch.Tensor, inputs: DecodeInputs) -> torch.Tensor:
        a = self.module
        query = a.q_proj(x).view(1, 1, -1, a.head_dim).transpose(1, 2)
        key = a.k_proj(x).view(1, 1, -1, a.head_dim).transpose(1, 2)
        value = a.v_proj(x).view(1, 1, -1, a.head_dim).transpose(1, 2)
        out = self.slots.attend(query, key, value, inputs, a.scaling)
        return a.o_proj(out.transpose(1, 2).reshape(1, 1, -1))


class _Stateless:
    """An MLP or mixture-of-experts layer: its module, which keeps no state between tokens."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, x: torch.Tensor, inputs: DecodeInputs) -> torch.Tensor:
        out: torch.Tensor = self.module(x)
        return out


class NemotronDecoder(StaticDecoder):
    """One answer's decoded tokens of a Nemotron-H model (transformers' `NemotronHForCausalLM`) after a prefill
    into `cache`, for at most `capacity` tokens in all. The position is not used (no rotary embedding)."""

    def __init__(self, language_model: Any, cache: Any, capacity: int) -> None:
        backbone = language_model.model
        super().__init__(backbone.norm_f.weight.device, capacity)
        self.embed = backbone.embeddings
        self.final_norm = backbone.norm_f
        self.head = language_model.lm_head
        self.layers: list[tuple[nn.Module, _Mamba | _Attention | _Stateless]] = []
        for index, block in enumerate(backbone.layers):
            mixer: _Mamba | _Attention | _Stateless
            if block.block_type == "linear_attention":
                mixer = _Mamba(block.mixer, cache.layers[index])
                self.states.append((index, mixer))
            elif block.block_type == "full_attention":
                mixer = _Attention(block.mixer, cache.layers[index], capacity)
                self.states.append((index, mixer.slots))
            else:
                mixer = _Stateless(block.mixer)
            self.layers.append((block.norm, mixer))
        self.load()

    def forward(self) -> torch.Tensor:
        hidden = self.embed(self.inputs.token)
        for norm, mixer in self.layers:
            hidden = hidden + mixer(norm(hidden.to(norm.weight.dtype)), self.inputs)
        return self.head(self.final_norm(hidden)).float()[:, -1]
