"""The stand-in's image processor, shaped like Nemotron-Nano-12B-v2-VL's `image_processing.py`.

As the real one: a `BaseImageProcessorFast` that imports torchvision, tiles each image InternVL's way
(the grid of 512 px tiles closest to its aspect ratio, at most `max_num_tiles`, plus a thumbnail when
there is more than one tile), and returns float32 `pixel_values`, `image_flags` (one per tile) and
`num_patches` (tiles per image, a tensor). The tile limit is the attribute `max_num_tiles`.
"""

from __future__ import annotations

from typing import Any

import torch
import torchvision.transforms as T
from PIL import Image
from transformers.image_processing_base import BatchFeature
from transformers.image_processing_utils_fast import BaseImageProcessorFast
from transformers.image_utils import make_list_of_images


class NemotronNanoVLV2ImageProcessor(BaseImageProcessorFast):
    model_input_names = ["pixel_values", "image_flags"]  # noqa: RUF012 - read by transformers

    def __init__(
        self,
        image_size: int = 512,
        patch_size: int = 16,
        max_num_tiles: int = 12,
        use_thumbnail: bool = True,
        downsample_ratio: float = 0.5,
        norm_mean: list[float] | None = None,
        norm_std: list[float] | None = None,
        do_rescale: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.max_num_tiles = max_num_tiles
        self.use_thumbnail = use_thumbnail
        self.downsample_ratio = downsample_ratio
        self.norm_mean = norm_mean
        self.norm_std = norm_std
        self.do_rescale = do_rescale

    def _process_image(self, image: Any, **kwargs: Any) -> Any:
        if not isinstance(image, Image.Image):
            raise ValueError(f"Unsupported input image type {type(image).__name__}. Only PIL images supported")
        return image

    def _preprocess(self, images: Any, return_tensors: Any = None, **kwargs: Any) -> BatchFeature:
        all_tiles: list[torch.Tensor] = []
        num_patches: list[int] = []
        for image in make_list_of_images(images):
            tiles = dynamic_preprocess(image, self.image_size, self.max_num_tiles, self.use_thumbnail)
            all_tiles.extend(tiles)
            num_patches.append(len(tiles))
        pixel_values = torch.stack(all_tiles, dim=0)
        mean = torch.tensor(self.norm_mean).view(1, 3, 1, 1)
        std = torch.tensor(self.norm_std).view(1, 3, 1, 1)
        data = {
            "pixel_values": (pixel_values - mean) / std,
            "image_flags": torch.ones(pixel_values.shape[0], 1, dtype=torch.long),
            "num_patches": torch.tensor(num_patches),
        }
        return BatchFeature(data=data, tensor_type=return_tensors)


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


def dynamic_preprocess(
    image: Image.Image, tile_size: int, max_num_tiles: int, use_thumbnail: bool
) -> list[torch.Tensor]:
    columns, rows = closest_grid(image.width, image.height, max_num_tiles, tile_size)
    resized = image.resize((columns * tile_size, rows * tile_size))
    tiles = [
        resized.crop((c * tile_size, r * tile_size, (c + 1) * tile_size, (r + 1) * tile_size))
        for r in range(rows)
        for c in range(columns)
    ]
    if use_thumbnail and len(tiles) != 1:
        tiles.append(image.resize((tile_size, tile_size)))
    tiles = [tile.convert("RGB") if tile.mode != "RGB" else tile for tile in tiles]
    resize = T.Resize((tile_size, tile_size), interpolation=T.InterpolationMode.BICUBIC)
    return [T.ToTensor()(resize(tile)) for tile in tiles]
