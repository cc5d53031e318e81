"""Image processor of the tiny test VLM: InternVL / Nemotron-Nano-VL dynamic tiling with PIL and numpy.

The image is resized to the grid of 512 px tiles whose aspect ratio is closest to its own (at most
`max_num_tiles` tiles), cut into tiles, and followed by a 512 px thumbnail when there is more than
one tile. As in the real processor, the tile limit is the attribute `max_num_tiles`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def target_ratios(max_num_tiles: int) -> list[tuple[int, int]]:
    """Every (columns, rows) grid of 1..max_num_tiles tiles, fewest tiles first."""
    grids = {
        (i, j) for n in range(1, max_num_tiles + 1) for i in range(1, n + 1) for j in range(1, n + 1) if i * j <= n
    }
    return sorted(grids, key=lambda grid: grid[0] * grid[1])


def closest_grid(width: int, height: int, max_num_tiles: int, tile_size: int) -> tuple[int, int]:
    """InternVL's rule: the closest aspect ratio; on a tie, the larger grid if the image has the pixels for it."""
    aspect = width / height
    best, best_diff = (1, 1), float("inf")
    for columns, rows in target_ratios(max_num_tiles):
        diff = abs(aspect - columns / rows)
        if diff < best_diff:
            best, best_diff = (columns, rows), diff
        elif diff == best_diff and width * height > 0.5 * tile_size * tile_size * columns * rows:
            best = (columns, rows)
    return best


def tile_image(image: Image.Image, max_num_tiles: int, tile_size: int, use_thumbnail: bool) -> list[Image.Image]:
    columns, rows = closest_grid(image.width, image.height, max_num_tiles, tile_size)
    resized = image.resize((columns * tile_size, rows * tile_size), Image.Resampling.BICUBIC)
    tiles = [
        resized.crop((c * tile_size, r * tile_size, (c + 1) * tile_size, (r + 1) * tile_size))
        for r in range(rows)
        for c in range(columns)
    ]
    if use_thumbnail and len(tiles) > 1:
        tiles.append(image.resize((tile_size, tile_size), Image.Resampling.BICUBIC))
    return tiles


class TinyVLMImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]  # noqa: RUF012 - read by transformers

    def __init__(
        self,
        image_size: int = 512,
        patch_size: int = 16,
        downsample_ratio: float = 0.5,
        max_num_tiles: int = 12,
        use_thumbnail: bool = True,
        norm_mean: Sequence[float] = CLIP_MEAN,
        norm_std: Sequence[float] = CLIP_STD,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.downsample_ratio = downsample_ratio
        self.max_num_tiles = max_num_tiles
        self.use_thumbnail = use_thumbnail
        self.norm_mean = list(norm_mean)
        self.norm_std = list(norm_std)

    def preprocess(
        self, images: Image.Image | Sequence[Image.Image], return_tensors: str | None = None, **kwargs: Any
    ) -> BatchFeature:
        images = [images] if isinstance(images, Image.Image) else list(images)
        mean = np.asarray(self.norm_mean, dtype=np.float32)
        std = np.asarray(self.norm_std, dtype=np.float32)
        arrays: list[np.ndarray] = []
        num_patches: list[int] = []
        for image in images:
            tiles = tile_image(image.convert("RGB"), self.max_num_tiles, self.image_size, self.use_thumbnail)
            num_patches.append(len(tiles))
            arrays.extend(
                ((np.asarray(tile, dtype=np.float32) / 255.0 - mean) / std).transpose(2, 0, 1) for tile in tiles
            )
        data = {"pixel_values": np.stack(arrays), "num_patches": np.asarray(num_patches, dtype=np.int64)}
        return BatchFeature(data=data, tensor_type=return_tensors)
