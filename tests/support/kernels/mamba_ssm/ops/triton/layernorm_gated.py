"""Gated RMSNorm with mamba-ssm's signature, in plain torch (the real one is a Triton kernel)."""

from __future__ import annotations

import torch
from torch.nn import functional


def rmsnorm_fn(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    z: torch.Tensor | None = None,
    eps: float = 1e-6,
    group_size: int | None = None,
    norm_before_gate: bool = True,
    upcast: bool = True,
) -> torch.Tensor:
    """RMS-normalize x over its last dimension (in groups of `group_size`), gated by silu(z) before or after."""
    dtype = x.dtype
    hidden = x.float() if upcast else x
    gate = None if z is None else (z.float() if upcast else z)
    if gate is not None and not norm_before_gate:
        hidden = hidden * functional.silu(gate)
    width = hidden.shape[-1]
    group = width if group_size is None else group_size
    grouped = hidden.reshape(*hidden.shape[:-1], width // group, group)
    grouped = grouped * torch.rsqrt(grouped.pow(2).mean(-1, keepdim=True) + eps)
    out = grouped.reshape(hidden.shape) * weight.float()
    if bias is not None:
        out = out + bias.float()
    if gate is not None and norm_before_gate:
        out = out * functional.silu(gate)
    return out.to(dtype)
