"""The engine's tiling (`inference.engine.tiles.image_tiles`, what the model is given) against a reference.

The reference shares no code with it: the grid comes from tests/support/reference_image_processor.py
(InternVL's rule written out again), the pixels from PIL's bicubic resize in its 32-bit float mode, the
tensor processor's rule (float pixels, antialiased bicubic, no rounding back to 8 bits) by another
implementation; then scaled to [0, 1], normalized, cut row by row, the thumbnail last. The two agree
to float32 rounding; one 8-bit level is 0.015 after normalization, so rounding the resized pixels,
another filter or another normalization would show.
"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from holodesk.inference.engine.tiles import image_tiles
from holodesk.inference.tiling import TilingSpec
from tests.support.reference_image_processor import closest_grid

TOLERANCE = 1e-3  # the largest difference seen is 5e-4, a thirtieth of one 8-bit level


def reference_tiles(image: Image.Image, spec: TilingSpec) -> np.ndarray:
    """float32 [tiles, 3, size, size]: the tensor processor's rule, in PIL's float mode and numpy."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32)
    columns, rows = closest_grid(image.width, image.height, spec.max_tiles, spec.tile_size)
    size = spec.tile_size
    mean = np.asarray(spec.mean, dtype=np.float32).reshape(3, 1, 1)
    std = np.asarray(spec.std, dtype=np.float32).reshape(3, 1, 1)

    def resized(width: int, height: int) -> np.ndarray:
        channels = [
            np.asarray(Image.fromarray(pixels[:, :, c], mode="F").resize((width, height), Image.Resampling.BICUBIC))
            for c in range(3)
        ]
        return (np.stack(channels) / 255.0 - mean) / std

    whole = resized(columns * size, rows * size)
    tiles = [
        whole[:, row * size : (row + 1) * size, column * size : (column + 1) * size]
        for row in range(rows)
        for column in range(columns)
    ]
    if spec.use_thumbnail and len(tiles) > 1:
        tiles.append(resized(size, size))
    return np.stack(tiles).astype(np.float32)


def noise(width: int, height: int, seed: int = 0) -> Image.Image:
    """Random pixels: every tile differs, so a tile out of order or a wrong filter cannot hide."""
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


@pytest.mark.parametrize(
    ("size", "spec"),
    [
        ((1280, 800), TilingSpec()),  # 3x2 tiles and the thumbnail
        ((333, 517), TilingSpec()),  # taller than wide, upscaled
        ((1920, 1080), TilingSpec()),
        ((500, 500), TilingSpec()),  # one tile: no thumbnail
        ((1280, 800), TilingSpec(tile_size=64, max_tiles=4, mean=(0.5, 0.5, 0.5), std=(0.25, 0.5, 1.0))),
        ((1280, 800), TilingSpec(tile_size=64, use_thumbnail=False)),
    ],
    ids=str,
)
def test_the_tiles_are_the_reference_processors(size: tuple[int, int], spec: TilingSpec) -> None:
    image = noise(*size)
    shipped = image_tiles(image, spec)
    expected = reference_tiles(image, spec)
    assert shipped.dtype.is_floating_point and tuple(shipped.shape) == expected.shape
    difference = float(np.abs(shipped.numpy() - expected).max())
    assert difference < TOLERANCE, f"largest difference {difference:.2e}"


@pytest.mark.parametrize("mode", ["L", "RGBA"])
def test_a_grey_or_rgba_image_is_tiled_as_its_rgb(mode: str) -> None:
    image = noise(640, 400).convert(mode)
    difference = float(np.abs(image_tiles(image, TilingSpec()).numpy() - reference_tiles(image, TilingSpec())).max())
    assert difference < TOLERANCE, f"largest difference {difference:.2e}"
