"""Sizing frames for a model: Qwen2.5-VL's smart_resize, a long-side cap, and the resulting mapping.

The prepared image's size is recorded in its `FrameMapping`, so model coordinates in pixels of the
resized image (Holo1, Holo1.5) or in [0, 1000] of it (Holotron) map back to the screen exactly.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from PIL import Image

from holodesk.automation.coords import FrameMapping
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.profiles.base import PreparedImage

# Qwen2.5-VL: 14-pixel patches merged 2x2, so sides are multiples of 28.
QWEN_FACTOR = 28
QWEN_MIN_PIXELS = 56 * 56
# The Qwen2-VL image processor's default upper bound (1280 merged patches, ~1 MP).
QWEN_MAX_PIXELS = 28 * 28 * 1280
QWEN_MAX_ASPECT_RATIO = 200


class ImageSize(NamedTuple):
    width: int
    height: int


def smart_resize(
    width: int,
    height: int,
    *,
    factor: int = QWEN_FACTOR,
    min_pixels: int = QWEN_MIN_PIXELS,
    max_pixels: int = QWEN_MAX_PIXELS,
) -> ImageSize:
    """The size Qwen2.5-VL's processor resizes an image to (same arithmetic as transformers').

    Both sides become multiples of `factor`, the area lands in [min_pixels, max_pixels] and the
    aspect ratio is kept as well as that allows. An image already at the returned size is left
    alone by the processor, which is why profiles resize to it themselves.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    if max(width, height) / min(width, height) > QWEN_MAX_ASPECT_RATIO:
        raise ValueError(f"aspect ratio of {width}x{height} exceeds {QWEN_MAX_ASPECT_RATIO}:1")
    if not factor * factor <= min_pixels <= max_pixels:
        raise ValueError(f"need {factor * factor} <= min_pixels ({min_pixels}) <= max_pixels ({max_pixels})")
    new_height = round(height / factor) * factor
    new_width = round(width / factor) * factor
    if new_height * new_width > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        new_height = max(factor, math.floor(height / beta / factor) * factor)
        new_width = max(factor, math.floor(width / beta / factor) * factor)
    elif new_height * new_width < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        new_height = math.ceil(height * beta / factor) * factor
        new_width = math.ceil(width * beta / factor) * factor
    return ImageSize(new_width, new_height)


def cap_long_side(width: int, height: int, max_long_side: int | None) -> ImageSize:
    """Scale (width, height) down so the longer side is at most `max_long_side`; never up."""
    if max_long_side is None or max(width, height) <= max_long_side:
        return ImageSize(width, height)
    scale = max_long_side / max(width, height)
    return ImageSize(max(1, round(width * scale)), max(1, round(height * scale)))


def prepare_at_size(frame: ScreenFrame, size: ImageSize) -> PreparedImage:
    """The frame as an RGB image of `size` (bicubic, as the Qwen processor resizes) and its mapping."""
    image = frame.to_image()
    if (image.width, image.height) != tuple(size):
        image = image.resize(tuple(size), Image.Resampling.BICUBIC)
    return PreparedImage(image=image, mapping=FrameMapping(frame.region, size.width, size.height))


# Pixel profiles refuse coordinates beyond this before any image is known; prepare_qwen_image
# guarantees no image it makes is larger, so the exact bound is left to FrameMapping.
MAX_PIXEL_SIDE = 16_384


def prepare_qwen_image(
    frame: ScreenFrame, max_long_side: int | None, min_pixels: int = QWEN_MIN_PIXELS, max_pixels: int = QWEN_MAX_PIXELS
) -> PreparedImage:
    """The frame resized as Qwen2.5-VL's processor would (after an optional long-side cap)."""
    capped = cap_long_side(frame.width, frame.height, max_long_side)
    size = smart_resize(capped.width, capped.height, min_pixels=min_pixels, max_pixels=max_pixels)
    if max(size) > MAX_PIXEL_SIDE:
        raise ValueError(f"resized image {size.width}x{size.height} is larger than {MAX_PIXEL_SIDE} pixels on a side")
    return prepare_at_size(frame, size)
