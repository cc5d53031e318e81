"""A reference for the tiling tests: Nemotron-Nano-12B-v2-VL's image processor rule, in PIL and numpy only.

As the checkpoint's `image_processing.py`: each image is tiled InternVL's way (the grid of 512 px
tiles closest to its aspect ratio, at most `max_num_tiles`, plus a thumbnail when there is more than
one tile), resized with PIL's bicubic filter on 8-bit pixels, scaled to [0, 1] and normalized with the
checkpoint's mean and std. Written here, independently of `inference.tiling`, so the fast tiler has
an oracle that shares none of its code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from PIL import Image


@dataclass
class NemotronNanoVLV2ImageProcessor:
    image_size: int = 512
    patch_size: int = 16
    max_num_tiles: int = 12
    use_thumbnail: bool = True
    downsample_ratio: float = 0.5
    norm_mean: list[float] = field(default_factory=lambda: [0.48145466, 0.4578275, 0.40821073])
    norm_std: list[float] = field(default_factory=lambda: [0.26862954, 0.26130258, 0.27577711])

    def preprocess(self, images: list[Image.Image]) -> dict[str, np.ndarray]:
        """float32 `pixel_values` [tiles, 3, size, size] and `num_patches` (tiles per image)."""
        tiles: list[np.ndarray] = []
        counts: list[int] = []
        for image in images:
            own = dynamic_preprocess(image, self.image_size, self.max_num_tiles, self.use_thumbnail)
            tiles.extend(own)
            counts.append(len(own))
        pixels = np.stack(tiles).astype(np.float32)
        mean = np.asarray(self.norm_mean, dtype=np.float32).reshape(1, 3, 1, 1)
        std = np.asarray(self.norm_std, dtype=np.float32).reshape(1, 3, 1, 1)
        return {"pixel_values": (pixels - mean) / std, "num_patches": np.asarray(counts)}


def target_ratios(max_num_tiles: int) -> list[tuple[int, int]]:
    """Every (columns, rows) grid of 1..max_num_tiles tiles, fewest tiles first."""
    grids = {
        (i, j) for n in range(1, max_num_tiles + 1) for i in range(1, n + 1) for j in range(1, n + 1) if i * j <= n
    }
    return sorted(grids, key=lambda grid: grid[0] * grid[1])


def closest_grid(width: int, height: int, max_num_tiles: int, tile_size: int) -> tuple[int, int]:
    """The closest aspect ratio; on a tie, the larger grid if the image has the pixels for it."""
    aspect = width / height
    best, best_diff = (1, 1), float("inf")
    for columns, rows in target_ratios(max_num_tiles):
        diff = abs(aspect - columns / rows)
        if diff < best_diff:
            best, best_diff = (columns, rows), diff
        elif diff == best_diff and width * height > 0.5 * tile_size * tile_size * columns * rows:
            best = (columns, rows)
    return best


def dynamic_preprocess(image: Image.Image, tile_size: int, max_num_tiles: int, use_thumbnail: bool) -> list[np.ndarray]:
    """The image's tiles as float32 [3, size, size] in [0, 1], row by row, then the thumbnail."""
    columns, rows = closest_grid(image.width, image.height, max_num_tiles, tile_size)
    resized = image.resize((columns * tile_size, rows * tile_size), Image.Resampling.BICUBIC)
    tiles = [
        resized.crop((c * tile_size, r * tile_size, (c + 1) * tile_size, (r + 1) * tile_size))
        for r in range(rows)
        for c in range(columns)
    ]
    if use_thumbnail and len(tiles) != 1:
        tiles.append(image.resize((tile_size, tile_size), Image.Resampling.BICUBIC))
    rgb = [tile.convert("RGB") if tile.mode != "RGB" else tile for tile in tiles]
    return [np.asarray(tile, dtype=np.float32).transpose(2, 0, 1) / 255.0 for tile in rgb]
