"""Screenshot -> normalized 512-pixel tiles, the way the vision tower's serving code makes them.

The grid is InternVL's rule (`inference.tiling.choose_grid`). The pixels follow the tensor version of
Nemotron-Nano-VL-v2's image processor, which vLLM uses too: the 8-bit RGB image becomes float, is
resized once to the grid (bicubic, antialiased, no rounding back to 8 bits), scaled to [0, 1],
normalized with the checkpoint's mean and std, and cut into tiles row by row; with more than one
tile, a thumbnail of the whole image (resized the same way from the original) comes last.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from holodesk.inference.tiling import TilingSpec, choose_grid


def _resize_normalize(pixels: torch.Tensor, height: int, width: int, spec: TilingSpec) -> torch.Tensor:
    resized = F.interpolate(pixels, size=(height, width), mode="bicubic", align_corners=False, antialias=True)
    mean = torch.tensor(spec.mean, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(spec.std, dtype=torch.float32).view(1, 3, 1, 1)
    return (resized / 255.0 - mean) / std


def image_tiles(image: Image.Image, spec: TilingSpec) -> torch.Tensor:
    """float32 [tiles, 3, size, size]."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    pixels = torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1).unsqueeze(0).float()
    grid = choose_grid(rgb.width, rgb.height, spec)
    size = spec.tile_size
    whole = _resize_normalize(pixels, grid.rows * size, grid.columns * size, spec)
    tiles = whole.reshape(3, grid.rows, size, grid.columns, size).permute(1, 3, 0, 2, 4).reshape(-1, 3, size, size)
    if grid.thumbnail:
        tiles = torch.cat([tiles, _resize_normalize(pixels, size, size, spec)], dim=0)
    return tiles.contiguous()
