"""Screenshot PNGs decode to exactly the frame's pixels, whichever encoder wrote them."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from holodesk.automation import png_encoding
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame


def _frame(width: int, height: int) -> ScreenFrame:
    rng = np.random.default_rng(width * height)
    pixels = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    pixels[: height // 2, :, :3] = (200, 40, 10)  # a flat half, as screens mostly are
    return ScreenFrame(pixels, Rect(0, 0, width, height), None, (), 0.0)


def _decoded(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG" and image.mode == "RGB"
    return np.asarray(image)


@pytest.mark.parametrize("encode", [png_encoding.encode_png, png_encoding.encode_png_with_pillow])
@pytest.mark.parametrize(("width", "height"), [(1, 1), (37, 53), (1920, 1080)])
def test_the_png_holds_the_frame_exactly(encode, width: int, height: int) -> None:  # type: ignore[no-untyped-def]
    frame = _frame(width, height)
    assert np.array_equal(_decoded(encode(frame)), frame.rgb)


def test_the_fast_encoder_is_the_one_installed() -> None:
    # fpng is a dependency: were its import to fail, every step would quietly pay Pillow's encoding.
    assert png_encoding.fpng is not None
