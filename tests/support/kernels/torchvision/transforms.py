"""`Resize`, `ToTensor` and `InterpolationMode` for PIL images, as torchvision.transforms does them."""

from __future__ import annotations

import enum

import numpy as np
import torch
from PIL import Image


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


_PIL_FILTERS = {
    InterpolationMode.NEAREST: Image.Resampling.NEAREST,
    InterpolationMode.BILINEAR: Image.Resampling.BILINEAR,
    InterpolationMode.BICUBIC: Image.Resampling.BICUBIC,
}


class Resize:
    """Resize a PIL image to (height, width) with PIL's filter (torchvision's PIL path)."""

    def __init__(self, size: tuple[int, int], interpolation: InterpolationMode = InterpolationMode.BILINEAR) -> None:
        self.size = size
        self.interpolation = interpolation

    def __call__(self, image: Image.Image) -> Image.Image:
        if not isinstance(image, Image.Image):
            raise TypeError("this test stand-in resizes PIL images only")
        height, width = self.size
        return image.resize((width, height), _PIL_FILTERS[self.interpolation])


class ToTensor:
    """PIL RGB image -> float32 tensor (3, H, W) in [0, 1]."""

    def __call__(self, image: Image.Image) -> torch.Tensor:
        array = np.asarray(image, dtype=np.uint8)
        if array.ndim == 2:
            array = array[:, :, None]
        return torch.from_numpy(array.transpose(2, 0, 1).copy()).float().div_(255.0)
