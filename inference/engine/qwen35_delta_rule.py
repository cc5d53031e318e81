"""The chunked gated delta rule of a Qwen3.5 prefill on the CPU, with bfloat16 matrix products.

transformers' PyTorch function (`torch_chunk_gated_delta_rule`) converts everything to float32 and
runs its products in float32: on Holo3.1-0.8B's shapes, 16 ms a 256-token call on this project's
quiet 2-core machine, and 522 such calls a 7,306-token prefill. vLLM's CPU kernel takes about 4 ms
for the same call, with bfloat16 operands and float32 accumulation: its output and final state are
about 6e-3 of the largest value away from a float64 token-by-token recurrence (bfloat16's
precision, not float32's). fla's Triton kernels, the engine's path on a GPU, round at the same
places. This module runs transformers' algorithm with the rounding of those kernels, about 11 ms a
call (`python -m bench --only deltanet_cpu` measures both):

- queries and keys L2-normalised in float32 and rounded to bfloat16 once; values and beta as given;
- the decays (`g`), their cumulative sums and the pairwise decay factors in float32;
- every product but the state's update with bfloat16 operands (AMX or avx512_bf16 through oneDNN,
  5-10x float32's speed on this machine), accumulated in float32 and rounded to bfloat16 (the CPU's
  bfloat16 products return bfloat16, where a Triton dot keeps float32: one rounding more a product);
- the unit lower-triangular system inverted in float32 (as fla's `solve_tril`), then rounded;
- the recurrent state kept in float32 across chunks, its update a float32 product (as fla's kernels
  accumulate it), and returned in float32, as transformers' is.

Only bfloat16 models on the CPU take it (`accelerate` in qwen35_cpu.py); float32 models, the
reference comparisons', keep transformers' float32 function.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 64  # transformers', fla's and vLLM's chunk of the delta rule
L2_EPS = 1e-6  # transformers' l2norm


def _normalised(x: torch.Tensor, scale: float) -> torch.Tensor:
    """`x` [batch, time, heads, dim] L2-normalised over dim in float32, times `scale`, as bfloat16
    [batch, heads, time, dim] (the products' layout). One float32 copy in that layout first: from the
    convolution's channels-first view it is three times faster than reading that view twice."""
    wide = x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
    inverse = torch.rsqrt(wide.square().sum(-1, keepdim=True).add_(L2_EPS))
    if scale != 1.0:
        inverse.mul_(scale)
    return wide.mul_(inverse).to(torch.bfloat16)


def chunked_delta_rule_bf16(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' `torch_chunk_gated_delta_rule` with `use_qk_l2norm_in_kernel=True`, bfloat16 products.

    `query`, `key` [batch, time, heads, k_dim] and `value` [batch, time, heads, v_dim] in bfloat16;
    `g` (log decays, at most 0) and `beta` [batch, time, heads]; `initial_state` [batch, heads,
    k_dim, v_dim] or None (zeros). Returns the output [batch, time, heads, v_dim] in bfloat16 and,
    if asked, the final state in float32 (the caller's `initial_state` is not changed).
    """
    batch, time, heads, k_dim = key.shape
    v_dim = value.shape[-1]
    bf16 = torch.bfloat16
    q = _normalised(query, k_dim**-0.5)
    k = _normalised(key, 1.0)
    v = value.transpose(1, 2).to(bf16, memory_format=torch.contiguous_format)
    b = beta.transpose(1, 2).to(torch.float32)
    decay = g.transpose(1, 2).to(torch.float32)
    pad = (CHUNK - time % CHUNK) % CHUNK
    if pad:  # zero keys, values and decays: the padding changes neither the outputs nor the state
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        b, decay = (F.pad(x, (0, pad)) for x in (b, decay))
    chunks = (time + pad) // CHUNK
    rows = batch * heads  # every (batch, head) pair is one matrix in the batched products
    q, k, v = (x.view(rows, chunks, CHUNK, -1) for x in (q, k, v))
    b = b.view(rows, chunks, 1, CHUNK)  # a row: it scales the columns of a chunk's [CHUNK, CHUNK] matrices
    cumulative = decay.view(rows, chunks, CHUNK).cumsum(-1)
    upper = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=q.device).triu_(1)
    pairwise = (cumulative.unsqueeze(-1) - cumulative.unsqueeze(-2)).masked_fill_(upper, float("-inf")).exp_()
    growth = cumulative.exp()

    # beta and the decays scale the rows or columns of a chunk's [CHUNK, CHUNK] matrices rather than
    # its [CHUNK, dim] keys and values: (beta k) k^T = beta_i (k k^T), A (beta v) = (A beta_j) v.
    keys_t = k.transpose(-1, -2)
    system = (k @ keys_t).float().mul_(pairwise).mul_(b.mT)  # its strictly lower part: the UT transform's
    within = (q @ keys_t).float().mul_(pairwise)  # attention inside each chunk, decayed
    identity = torch.eye(CHUNK, device=q.device).expand_as(system)
    inverse = torch.linalg.solve_triangular(system, identity, upper=False, unitriangular=True)
    new_values = (inverse * b).to(bf16) @ v
    state_keys = (inverse * (b * growth.unsqueeze(-2))).to(bf16) @ k
    # A chunk's output is [within-chunk attention | decayed queries] @ [corrected values; state]: one
    # product. The state's update stays in float32, as fla's kernels keep it.
    left = torch.cat((within, q * growth.unsqueeze(-1)), dim=-1).to(bf16)
    decayed_keys_t = (k * (cumulative[..., -1:] - cumulative).exp().unsqueeze(-1)).mT.contiguous()
    carry = growth[..., -1, None, None]

    state = (
        torch.zeros(rows, k_dim, v_dim, device=q.device)
        if initial_state is None
        else initial_state.to(torch.float32, copy=True).view(rows, k_dim, v_dim)
    )
    out = torch.empty(chunks, rows, CHUNK, v_dim, dtype=bf16, device=q.device)
    right = torch.empty(rows, CHUNK + k_dim, v_dim, dtype=bf16, device=q.device)
    corrected, state_b = right[:, :CHUNK], right[:, CHUNK:]
    for i in range(chunks):
        state_b.copy_(state)
        torch.sub(new_values[:, i], state_keys[:, i] @ state_b, out=corrected)
        torch.bmm(left[:, i], right, out=out[i])
        state.mul_(carry[:, i]).baddbmm_(decayed_keys_t[:, i], corrected.float())
    output = out.view(chunks, batch, heads, CHUNK, v_dim).permute(1, 0, 3, 2, 4)
    output = output.reshape(batch, chunks * CHUNK, heads, v_dim)[:, :time]
    return output, state.view(batch, heads, k_dim, v_dim) if output_final_state else None
