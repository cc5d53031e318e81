"""Nemotron-3-Nano-Omni's dynamic-resolution images: each screenshot resized whole, never cut into tiles.

Holotron-3-Nano's vision tower takes one image at (nearly) its own size: the image's patch grid is
scaled into [min_num_patches, max_num_patches] (1,024 to 13,312 16-pixel patches), each side made
even for pixel shuffle 0.5, and the pixels resized to that grid once (bicubic, antialiased, in
float32, no rounding back to 8 bits), scaled to [0, 1] and normalized; there is no thumbnail.
C-RADIO runs on the image as it is (position embeddings resampled to its rows and columns), and
pixel shuffle folds each 2x2 block of patch features into one image token, rows staying rows.

The rule is vLLM 0.32's (`DynamicResolutionImageTiler.compute_params` / `process_media`), which
Holotron-3-Nano is served with, including its budget: the images of one request share the context
that the text leaves, 4 patches an image token; each image's own budget is clamped to the bounds and,
when their sum is over, scaled down (at most 10 rounds). transformers' native processor gives each
image the same grid as long as the text leaves room for every image at its cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from holodesk.inference.engine.model import HolotronModel
from holodesk.inference.engine.spec import DynamicResolution, ModelSpec

# Pixel shuffle 0.5: two patches a side fold into one image token.
FOLD = 2


@dataclass(frozen=True, slots=True)
class PatchGrid:
    """An image's size after resizing, in patches."""

    rows: int
    columns: int

    @property
    def patches(self) -> int:
        return self.rows * self.columns

    @property
    def tokens(self) -> int:
        return self.patches // (FOLD * FOLD)


def _one_grid(width: int, height: int, budget: int, bounds: DynamicResolution, patch: int) -> PatchGrid:
    """vLLM's `process_media`: the grid for one image given its own patch budget."""
    # round(x + 0.5): the next whole patch count above the size (banker's rounding at exact halves, as vLLM).
    rows = round(height / patch + 0.5)
    columns = round(width / patch + 0.5)
    factor = min(math.sqrt(budget / (rows * columns)), 1.0)
    rows, columns = math.floor(factor * rows), math.floor(factor * columns)
    if budget > bounds.min_patches and rows * columns < bounds.min_patches:
        up = math.sqrt(bounds.min_patches / (rows * columns))
        rows, columns = math.ceil(up * rows), math.ceil(up * columns)
    # Each side even; grown when that stays within the budget, shrunk otherwise.
    if rows % FOLD:
        grown = rows + FOLD - rows % FOLD
        rows = grown if grown * columns <= budget else max(FOLD, rows - rows % FOLD)
    if columns % FOLD:
        grown = columns + FOLD - columns % FOLD
        columns = grown if rows * grown <= budget else max(FOLD, columns - columns % FOLD)
    return PatchGrid(rows, columns)


def patch_grids(
    sizes: list[tuple[int, int]], bounds: DynamicResolution, *, patch: int, context: int, text_tokens: int
) -> list[PatchGrid]:
    """The grids of one request's images ((width, height) each), sharing what `context` leaves after the text."""
    if not sizes:
        return []
    cap = bounds.max_patches or math.inf
    available = max((context - text_tokens - 4) * FOLD * FOLD, bounds.min_patches * len(sizes))
    budgets = [int(max(min(available, cap), bounds.min_patches))] * len(sizes)
    for _ in range(10):
        grids = [_one_grid(w, h, budget, bounds, patch) for (w, h), budget in zip(sizes, budgets, strict=True)]
        total = sum(grid.patches for grid in grids)
        if total <= available:
            return grids
        scale = available / total
        smaller = [max(bounds.min_patches, int(grid.patches * scale)) for grid in grids]
        # No image got a smaller budget: each gets the least, and the request is cut short by the server.
        shrunk = any(s < b for s, b in zip(smaller, budgets, strict=True))
        budgets = smaller if shrunk else [bounds.min_patches] * len(sizes)
    raise ValueError(f"no patch grids fit {len(sizes)} images in {available} patches")  # vLLM's "unreachable"


def image_pixels(image: Image.Image, grid: PatchGrid, spec: ModelSpec) -> torch.Tensor:
    """float32 [1, 3, rows * patch, columns * patch], normalized with the checkpoint's mean and std."""
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    pixels = torch.from_numpy(np.asarray(rgb, dtype=np.uint8).copy()).permute(2, 0, 1).unsqueeze(0).float()
    patch = spec.vision.patch
    size = (grid.rows * patch, grid.columns * patch)
    # Resized even when the size is already right, as vLLM does.
    resized = F.interpolate(pixels, size=size, mode="bicubic", align_corners=False, antialias=True)
    mean = torch.tensor(spec.norm_mean, dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(spec.norm_std, dtype=torch.float32).view(1, 3, 1, 1)
    return ((resized / 255.0 - mean) / std).contiguous()


def pixel_shuffle_grid(features: torch.Tensor, grid: PatchGrid) -> torch.Tensor:
    """[1, rows * columns, c] row-major patch features -> [rows/2 * columns/2, 4c] row-major tokens (v2 order)."""
    channels = features.shape[-1]
    folded = features.reshape(grid.rows // FOLD, FOLD, grid.columns // FOLD, FOLD, channels)
    return folded.permute(0, 2, 1, 3, 4).reshape(grid.tokens, channels * FOLD * FOLD)


def embed_image(model: HolotronModel, pixels: torch.Tensor, grid: PatchGrid) -> torch.Tensor:
    """One resized image -> its image-token embeddings [grid.tokens, hidden]."""
    features = model.vision(pixels.to(next(model.vision.parameters()).dtype))
    # vLLM hands the projector bfloat16 features whatever the model's dtype (as for Holotron-12B's tiles).
    features = features.to(torch.bfloat16).to(features.dtype)
    return model.mlp1(pixel_shuffle_grid(features, grid))
