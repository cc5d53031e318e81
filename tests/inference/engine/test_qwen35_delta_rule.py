"""The CPU's bfloat16 delta rule (engine/qwen35_delta_rule.py) and the prefill convolution (qwen35_cpu).

The oracle is the gated delta rule's definition, token by token in float64 (bench/deltanet_cpu's
`recurrence`, apart from the engine's code): decay the state, read what it predicts for the key,
write beta times the difference, read the query. The chunked
bfloat16 function must stay within bfloat16's precision of it (vLLM's CPU kernel is 6e-3 of the
largest value on these inputs); a wrong decay, scale or chunk boundary is off by tens of percent.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bench.deltanet_cpu import recurrence
from holodesk.inference.engine.qwen35_cpu import causal_conv_silu
from holodesk.inference.engine.qwen35_delta_rule import chunked_delta_rule_bf16

HEADS, DIM = 2, 128
RELATIVE = 2e-2  # of the largest value; bfloat16 products give about 6e-3


def _inputs(time: int, seed: int, decay: float) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, time, HEADS, DIM, generator=generator).to(torch.bfloat16) for _ in range(3))
    g = -torch.rand(1, time, HEADS, generator=generator) * decay
    beta = torch.rand(1, time, HEADS, generator=generator).to(torch.bfloat16)
    state = torch.randn(1, HEADS, DIM, DIM, generator=generator) * 0.3
    return q, k, v, g, beta, state


def _relative(ours: torch.Tensor, exact: torch.Tensor) -> float:
    return float((ours.double() - exact).abs().max() / exact.abs().max())


@pytest.mark.parametrize("time", [1, 5, 64, 130, 256])
@pytest.mark.parametrize("decay", [0.05, 3.0], ids=["slow decay", "fast decay"])
def test_the_chunked_bfloat16_rule_follows_the_recurrence(time: int, decay: float) -> None:
    q, k, v, g, beta, state = _inputs(time, seed=time, decay=decay)
    out, final = chunked_delta_rule_bf16(q, k, v, g, beta, state, output_final_state=True)
    exact_out, exact_state = recurrence(q, k, v, g, beta, state)
    assert out.dtype == torch.bfloat16 and out.shape == (1, time, HEADS, DIM)
    assert final is not None and final.dtype == torch.float32
    assert _relative(out, exact_out) <= RELATIVE
    assert _relative(final, exact_state) <= RELATIVE


def test_a_prompt_in_two_calls_is_the_prompt_in_one() -> None:
    """The state one call returns carries the next call on, as a prefill in chunks needs (the first
    call starts from no state: zeros); nothing of the caller's state is changed in place."""
    q, k, v, g, beta, state = _inputs(200, seed=7, decay=0.5)
    zeros = torch.zeros_like(state)
    first, middle = chunked_delta_rule_bf16(q[:, :70], k[:, :70], v[:, :70], g[:, :70], beta[:, :70], None, True)
    assert middle is not None
    kept = middle.clone()
    second, final = chunked_delta_rule_bf16(q[:, 70:], k[:, 70:], v[:, 70:], g[:, 70:], beta[:, 70:], middle, True)
    assert torch.equal(middle, kept)
    exact_out, exact_state = recurrence(q, k, v, g, beta, zeros)
    assert _relative(torch.cat((first, second), 1), exact_out) <= RELATIVE
    assert final is not None and _relative(final, exact_state) <= RELATIVE
    assert chunked_delta_rule_bf16(q, k, v, g, beta, None, output_final_state=False)[1] is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("earlier", [0, 2, 4])
def test_the_prefill_convolution_is_transformers_conv1d(dtype: torch.dtype, earlier: int) -> None:
    """Many columns at once: transformers' depthwise conv1d with its left padding, then SiLU, in the
    model's dtype (bit for bit in bfloat16), whatever the number of earlier columns the cache gives (none at the
    start, the state's later; transformers' padding stands for those it does not have)."""
    torch.manual_seed(earlier)
    channels, kernel, new = 48, 4, 37
    conv = torch.nn.Conv1d(channels, channels, kernel, groups=channels, padding=kernel - 1, bias=True).to(dtype)
    full = torch.randn(1, channels, earlier + new, dtype=dtype)
    with torch.inference_mode():
        ours = causal_conv_silu(full, conv.weight.squeeze(1), conv.bias, new, dtype)
        theirs = F.silu(conv(full)[..., : earlier + new])[..., earlier:].transpose(1, 2)
    assert ours.shape == (1, new, channels)
    if dtype == torch.bfloat16:
        assert torch.equal(ours, theirs)
    else:  # float32: oneDNN's kernel with its own padding sums in another order (last bits)
        assert torch.allclose(ours, theirs, rtol=1e-6, atol=1e-6)
