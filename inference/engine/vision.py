"""C-RADIO's vision transformer, written for the checkpoint's own tensor names.

The checkpoint stores the tower as timm's ViT under `vision_model.radio_model.model.`:
`patch_generator.{embedder,pos_embed,cls_token.token}` and `blocks.N.{norm1,attn.qkv,attn.proj,norm2,
mlp.fc1,mlp.fc2}`. A tile's pixels (already normalized by the tiler) are cut into 16-pixel patches,
embedded by one linear layer, given position embeddings resampled (bilinear) from the stored
`cpe_max_size` grid to the tile's grid, prefixed with the class token and registers, and run through
pre-norm blocks. The output drops the class token and registers: one feature per patch, row by row.

This is a module of its own rather than transformers' `radio` model because the names and the
resampling rule must be C-RADIO's exactly; it is small and tested against vLLM's implementation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from holodesk.inference.engine.spec import VisionSpec


class _Attention(nn.Module):
    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.heads = spec.heads
        self.qkv = nn.Linear(spec.hidden, 3 * spec.hidden, bias=spec.qkv_bias)
        self.proj = nn.Linear(spec.hidden, spec.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        # One projection holds q, k and v side by side, each split into heads.
        qkv = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.proj(out.transpose(1, 2).reshape(batch, length, width))


class _Mlp(nn.Module):
    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.fc1 = nn.Linear(spec.hidden, spec.mlp)
        self.fc2 = nn.Linear(spec.mlp, spec.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(spec.hidden, eps=spec.layer_norm_eps)
        self.attn = _Attention(spec)
        self.norm2 = nn.LayerNorm(spec.hidden, eps=spec.layer_norm_eps)
        self.mlp = _Mlp(spec)
        # timm's layer scale (`ls1.gamma`, `ls2.gamma`) where the checkpoint has it; a constant otherwise.
        self.ls1 = _LayerScale(spec)
        self.ls2 = _LayerScale(spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class _LayerScale(nn.Module):
    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((spec.hidden,), spec.layer_scale))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gamma


class _ClsToken(nn.Module):
    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.token = nn.Parameter(torch.zeros(spec.skipped_tokens, spec.hidden))


class _PatchGenerator(nn.Module):
    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.patch = spec.patch
        # The stored grid: cpe_max_size rounded up to whole patches.
        self.grid = math.ceil(spec.cpe_max_size / spec.patch)
        self.embedder = nn.Linear(3 * spec.patch * spec.patch, spec.hidden, bias=False)
        self.pos_embed = nn.Parameter(torch.zeros(1, self.grid * self.grid, spec.hidden))
        self.cls_token = _ClsToken(spec)

    def position_embeddings(self, rows: int, columns: int) -> torch.Tensor:
        """The stored grid resampled to rows x columns: first to the larger side's square, then cropped.

        Resampling happens in float32 whatever the weights' dtype, as C-RADIO does.
        """
        if (rows, columns) == (self.grid, self.grid):
            return self.pos_embed
        width = self.pos_embed.shape[-1]
        grid = self.pos_embed.reshape(1, self.grid, self.grid, width).permute(0, 3, 1, 2)
        side = max(rows, columns)
        grid = F.interpolate(grid.float(), size=(side, side), mode="bilinear", align_corners=False)
        grid = grid.to(self.pos_embed.dtype)[..., :rows, :columns]
        return grid.flatten(2).transpose(1, 2)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        batch, channels, height, width = pixels.shape
        rows, columns, p = height // self.patch, width // self.patch, self.patch
        # Each patch flattened channel-major (c, y, x), patches row by row.
        patches = (
            pixels.reshape(batch, channels, rows, p, columns, p)
            .permute(0, 2, 4, 1, 3, 5)
            .reshape(batch, rows * columns, channels * p * p)
        )
        tokens = self.embedder(patches) + self.position_embeddings(rows, columns)
        prefix = self.cls_token.token.unsqueeze(0).expand(batch, -1, -1)
        return torch.cat([prefix, tokens], dim=1)


class RadioVision(nn.Module):
    """Tiles [n, 3, size, size] (normalized) -> patch features [n, (size/patch)^2, hidden]."""

    def __init__(self, spec: VisionSpec) -> None:
        super().__init__()
        self.skip = spec.skipped_tokens
        self.patch_generator = _PatchGenerator(spec)
        self.blocks = nn.ModuleList(_Block(spec) for _ in range(spec.layers))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.patch_generator(pixels)
        for block in self.blocks:
            x = block(x)
        return x[:, self.skip :]
