"""From vision patch features to language-model embeddings: pixel shuffle 0.5, then the `mlp1` projector.

Pixel shuffle folds each 2x2 block of neighbouring patch features into one feature four times as wide
(the "v2" order: rows stay rows), so a 512-pixel tile of 32x32 patches becomes 16x16 = 256 image
tokens. `mlp1` is RMSNorm -> Linear -> squared ReLU -> Linear, stored as `mlp1.0`, `mlp1.1`, `mlp1.3`
(index 2 is the activation, which has no weights).
"""

from __future__ import annotations

import torch
from torch import nn


def pixel_shuffle(features: torch.Tensor, factor: int) -> torch.Tensor:
    """[n, side*side, c] row-major patch features -> [n, (side/f)^2, c*f*f] row-major tokens."""
    n, length, channels = features.shape
    side = round(length**0.5)
    if side * side != length or side % factor:
        raise ValueError(f"cannot fold {length} patch features by {factor}: not a square grid of multiples")
    small = side // factor
    grid = features.reshape(n, small, factor, small, factor, channels)
    return grid.permute(0, 1, 3, 2, 4, 5).reshape(n, small * small, channels * factor * factor)


class _RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalized in float32, as the checkpoint's and vLLM's RMSNorm do, then back to the input's dtype.
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.to(x.dtype) * self.weight


class _ReluSquared(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x).square()


class Projector(nn.Sequential):
    """`mlp1`: folded vision features (width vit_hidden * f^2) -> the language model's hidden size."""

    def __init__(self, folded_width: int, hidden: int, out_width: int) -> None:
        super().__init__(
            _RMSNorm(folded_width),
            nn.Linear(folded_width, hidden, bias=False),
            _ReluSquared(),
            nn.Linear(hidden, out_width, bias=False),
        )
