"""The fast PNG writer is lossless for any RGB image and readable by an ordinary PNG reader."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from holodesk.inference.fast_png import encode_png


@pytest.mark.parametrize("size", [(1, 1), (7, 3), (1920, 1080), (333, 1001)])
def test_pillow_reads_back_the_same_pixels(size: tuple[int, int]) -> None:
    rng = np.random.default_rng(sum(size))
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    pixels[: size[1] // 2] = (32, 96, 160)  # flat colour too, as on screens
    read = Image.open(io.BytesIO(encode_png(Image.fromarray(pixels))))
    assert read.format == "PNG" and read.mode == "RGB" and read.size == size
    assert np.array_equal(np.asarray(read), pixels)


def test_other_modes_are_written_as_their_rgb() -> None:
    rgba = Image.new("RGBA", (5, 4), (10, 20, 30, 40))
    read = Image.open(io.BytesIO(encode_png(rgba)))
    assert np.array_equal(np.asarray(read), np.asarray(rgba.convert("RGB")))
