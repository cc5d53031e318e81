"""Nemotron-VL / InternVL dynamic tiling: turn a screenshot into the 512 px tiles the model consumes.

The image is resized (bicubic, antialiased as PIL resizes) to the grid of tiles whose aspect ratio
is closest to its own within the tile limit, cut into tiles row by row, followed by a thumbnail of
the whole image when there is more than one tile, and normalized with the processor's mean and std.

Two implementations of the same thing:
- `reference_tiles`: plain PIL and numpy, step for step what the checkpoint's image processor does;
  it defines the expected output.
- `fast_tiles`: works on the captured frame's BGRA pixels directly (no PIL image, no RGB copy)
  with torch's uint8 antialiased bicubic resize, which uses PIL's kernel (a = -0.5) and rounding,
  then cuts and normalizes in one pass per channel. It matches the reference within one or two
  grey levels on a few pixels (see tests/inference/test_tiling.py) at a fraction of the time.
  With `device` (the model's device, "cuda:0" in the app), the uint8 pixels are uploaded once and
  resized, cut and normalized there, the tiles landing in the model's dtype on its device: float
  resizes, one axis at a time, rounded to 8 bits between and after the passes as PIL does. The
  same code runs with device="cpu", which is how the tests hold it to the same grey-level bound.

torch is imported only by the fast path: it is an optional extra of the app.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from PIL import Image

from holodesk.automation.screen import ScreenFrame

if TYPE_CHECKING:
    import torch

TILE_SIZE = 512
MAX_TILES = 12
# RADIO's (CLIP's) statistics, as Nemotron-Nano-VL's processor config gives them.
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

ChannelOrder = Literal["BGRA", "BGR", "RGBA", "RGB"]
# Where red, green and blue sit in each supported pixel layout.
_RGB_POSITIONS: dict[str, tuple[int, int, int]] = {
    "BGRA": (2, 1, 0),
    "BGR": (2, 1, 0),
    "RGBA": (0, 1, 2),
    "RGB": (0, 1, 2),
}


@dataclass(frozen=True, slots=True)
class TilingSpec:
    """The image processor's settings that decide the tiles: size, limit, thumbnail, normalization."""

    tile_size: int = TILE_SIZE
    max_tiles: int = MAX_TILES
    use_thumbnail: bool = True
    mean: tuple[float, float, float] = CLIP_MEAN
    std: tuple[float, float, float] = CLIP_STD

    def __post_init__(self) -> None:
        if self.tile_size < 1 or self.max_tiles < 1:
            raise ValueError(f"tile_size and max_tiles must be positive, got {self.tile_size}, {self.max_tiles}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError(f"mean and std need three values each, std positive; got {self.mean}, {self.std}")

    @classmethod
    def from_image_processor(cls, image_processor: Any) -> TilingSpec:
        """The spec of a loaded image processor (Nemotron-VL's attribute names first, then InternVL's/HF's)."""

        def first(names: Sequence[str], default: Any) -> Any:
            for name in names:
                value = getattr(image_processor, name, None)
                if value is not None:
                    return value
            return default

        size = first(("image_size", "force_image_size"), TILE_SIZE)
        if isinstance(size, dict):  # HF processors spell it {"height": .., "width": ..}
            size = size.get("height", TILE_SIZE)
        return cls(
            tile_size=int(size),
            max_tiles=int(first(("max_num_tiles", "max_dynamic_patch", "max_tiles"), MAX_TILES)),
            use_thumbnail=bool(first(("use_thumbnail",), True)),
            mean=_triple(first(("norm_mean", "image_mean"), CLIP_MEAN)),
            std=_triple(first(("norm_std", "image_std"), CLIP_STD)),
        )


def _triple(values: Sequence[float]) -> tuple[float, float, float]:
    first, second, third = (float(v) for v in values)
    return first, second, third


@dataclass(frozen=True, slots=True)
class TileGrid:
    """How one image is cut: `columns` x `rows` tiles, plus a thumbnail when `thumbnail` is set."""

    columns: int
    rows: int
    thumbnail: bool

    @property
    def count(self) -> int:
        """Tiles the model receives for the image (each is 256 image tokens for Nemotron-VL)."""
        return self.columns * self.rows + int(self.thumbnail)


def candidate_grids(max_tiles: int) -> list[tuple[int, int]]:
    """Every (columns, rows) with at most `max_tiles` tiles, fewest tiles first.

    Built as a set and sorted by tile count like the original code: among grids with equally many
    tiles the set's order decides ties of aspect ratio, so the same order gives the same choice.
    """
    grids = {(c, r) for n in range(1, max_tiles + 1) for c in range(1, n + 1) for r in range(1, n + 1) if c * r <= n}
    return sorted(grids, key=lambda grid: grid[0] * grid[1])


def choose_grid(width: int, height: int, spec: TilingSpec = TilingSpec()) -> TileGrid:
    """The InternVL rule: the grid closest in aspect ratio; on an exact tie, the later (larger) grid
    wins when the image has more than half the pixels that grid would show."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    aspect = width / height
    area = width * height
    best, best_diff = (1, 1), float("inf")
    for columns, rows in candidate_grids(spec.max_tiles):
        diff = abs(aspect - columns / rows)
        if diff < best_diff:
            best, best_diff = (columns, rows), diff
        elif diff == best_diff and area > 0.5 * spec.tile_size * spec.tile_size * columns * rows:
            best = (columns, rows)
    columns, rows = best
    return TileGrid(columns, rows, spec.use_thumbnail and columns * rows > 1)


# -- the reference: PIL and numpy, as the checkpoint's processor ---------------------------------


def reference_tiles(image: Image.Image, spec: TilingSpec = TilingSpec()) -> np.ndarray:
    """Tiles of a PIL image as float32 [tiles, 3, size, size], computed the image processor's way."""
    rgb = image.convert("RGB")
    grid = choose_grid(rgb.width, rgb.height, spec)
    size = spec.tile_size
    resized = rgb.resize((grid.columns * size, grid.rows * size), Image.Resampling.BICUBIC)
    tiles = [
        resized.crop((c * size, r * size, (c + 1) * size, (r + 1) * size))
        for r in range(grid.rows)
        for c in range(grid.columns)
    ]
    if grid.thumbnail:
        tiles.append(rgb.resize((size, size), Image.Resampling.BICUBIC))
    mean = np.asarray(spec.mean, dtype=np.float32)
    std = np.asarray(spec.std, dtype=np.float32)
    return np.stack([((np.asarray(tile, dtype=np.float32) / 255.0 - mean) / std).transpose(2, 0, 1) for tile in tiles])


def reference_frame_tiles(frame: ScreenFrame, spec: TilingSpec = TilingSpec()) -> np.ndarray:
    """`reference_tiles` of a captured frame (through a PIL RGB image, as the app does today)."""
    return reference_tiles(frame.to_image(), spec)


# -- the fast path: torch on the frame's own pixels -----------------------------------------------


def fast_tiles(
    pixels: np.ndarray,
    spec: TilingSpec = TilingSpec(),
    *,
    channels: ChannelOrder = "BGRA",
    dtype: torch.dtype | None = None,
    out: torch.Tensor | None = None,
    threads: int | None = None,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """Tiles of an H x W x C uint8 image as a tensor [tiles, 3, size, size] (float32 unless `dtype`).

    `device` selects the device path (see the module docstring): the tiles are made on that device.

    `pixels` is mss's BGRA frame as captured (the default) or another layout named by `channels`;
    it is read in place, without an RGB copy. `out`, if given, is filled and returned (a reused or
    pinned buffer); its shape must be [choose_grid(...).count, 3, size, size].

    `threads` sets torch's intra-op thread count for the call only (None: torch's own, all cores).
    On the 2-core bench machine, side by side, torch's two threads were 1-3 ms faster than one at
    2560x1440 in quiet runs and faster still under load from other processes (bench/capture.py);
    `threads=1` is for callers that must leave the other cores alone.
    """
    import torch

    previous = torch.get_num_threads()
    if threads is not None and threads != previous:
        torch.set_num_threads(threads)
    try:
        return _fast_tiles(pixels, spec, channels, dtype, out, device)
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


def _fast_tiles(
    pixels: np.ndarray,
    spec: TilingSpec,
    channels: ChannelOrder,
    dtype: torch.dtype | None,
    out: torch.Tensor | None,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    import torch

    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != len(channels):
        raise ValueError(f"expected H x W x {len(channels)} uint8 {channels} pixels, got {pixels.dtype} {pixels.shape}")
    height, width = pixels.shape[:2]
    grid = choose_grid(width, height, spec)
    size = spec.tile_size
    dtype = dtype or (out.dtype if out is not None else torch.float32)
    shape = (grid.count, 3, size, size)
    target = torch.device(device) if device is not None else (out.device if out is not None else torch.device("cpu"))
    if out is None:
        out = torch.empty(shape, dtype=dtype, device=target)
    elif tuple(out.shape) != shape:
        raise ValueError(f"out has shape {tuple(out.shape)}, the tiles need {shape}")
    elif out.device != target:
        raise ValueError(f"out is on {out.device}, the tiles are made on {target}")

    # N x C x H x W over the H x W x C buffer (channels-last strides): torch's uint8 antialiased
    # resize reads that layout directly, four 8-bit channels at a time.
    with warnings.catch_warnings():
        # mss hands out read-only buffers; torch warns about those, but the source is only ever read.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        source = torch.from_numpy(np.ascontiguousarray(pixels)).permute(2, 0, 1).unsqueeze(0)
    resize = _resize
    if device is not None:
        # One upload of the 8-bit frame (a quarter of float32's bytes); the rest happens there.
        source = source.to(target, non_blocking=True)
        resize = _resize_on_device
    # y = x / 255 / std - mean / std, as one multiply-add per value.
    std = torch.tensor(spec.std, dtype=torch.float32, device=target)
    scale = 1.0 / (255.0 * std)
    offset = -torch.tensor(spec.mean, dtype=torch.float32, device=target) / std
    rgb = _RGB_POSITIONS[channels]

    grid_image = resize(source, grid.rows * size, grid.columns * size)
    # The resized image is planar (C x H x W); view it as rows x columns x C x size x size tiles.
    tiles = grid_image[0].view(len(channels), grid.rows, size, grid.columns, size).permute(1, 3, 0, 2, 4)
    _normalize_into(
        out[: grid.columns * grid.rows].view(grid.rows, grid.columns, 3, size, size), tiles, rgb, scale, offset
    )
    if grid.thumbnail:
        thumbnail = resize(source, size, size)[0]
        _normalize_into(out[-1], thumbnail, rgb, scale, offset)
    return out


def fast_frame_tiles(
    frame: ScreenFrame,
    spec: TilingSpec = TilingSpec(),
    *,
    dtype: torch.dtype | None = None,
    threads: int | None = None,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """`fast_tiles` of a captured frame's BGRA pixels."""
    return fast_tiles(frame.pixels, spec, channels="BGRA", dtype=dtype, threads=threads, device=device)


def _resize(source: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Antialiased bicubic resize of a uint8 N x C x H x W tensor, in the pass order PIL uses.

    Both resize separably and round to 8 bits between the passes, so the order shows wherever
    the first pass overshoots (sharp edges). torch always goes horizontal first; newer Pillow
    goes vertical first when the height shrinks much more than the width (see
    `pil_resizes_vertically_first`), so that case runs as two single-axis resizes here.
    """
    source_height, source_width = source.shape[-2:]
    if pil_resizes_vertically_first(source_width, source_height, width, height):
        source = _interpolate(source, height, source_width)
    return _interpolate(source, height, width)


def _resize_on_device(source: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """`_resize` for any device: float passes, one axis at a time, each rounded to 8 bits as PIL does.

    torch's uint8 antialiased kernel is CPU-only; in float the two axes would be resized without the
    8-bit rounding between them, which PIL (the checkpoint's processor) does. Returns uint8.
    """
    import torch

    source_height, source_width = source.shape[-2:]
    image = source.to(torch.float32)

    def one_axis(image: torch.Tensor, new_height: int, new_width: int) -> torch.Tensor:
        if (new_height, new_width) == tuple(image.shape[-2:]):
            return image
        return _interpolate(image, new_height, new_width).round_().clamp_(0, 255)

    if pil_resizes_vertically_first(source_width, source_height, width, height):
        image = one_axis(image, height, source_width)
        image = one_axis(image, height, width)
    else:
        image = one_axis(image, source_height, width)
        image = one_axis(image, height, width)
    return image.to(torch.uint8)


def _interpolate(source: torch.Tensor, height: int, width: int) -> torch.Tensor:
    import torch.nn.functional as functional

    return functional.interpolate(source, size=(height, width), mode="bicubic", antialias=True, align_corners=False)


def pil_resizes_vertically_first(width: int, height: int, new_width: int, new_height: int) -> bool:
    """Whether the installed Pillow resizes `width` x `height` to the new size vertical pass first.

    Pillow 13 (python-pillow/Pillow#9549) does so when the height loses more than twice as many
    pixels as the width; earlier versions always go horizontal first. Which one is installed is
    found once by looking (`_pillow_can_go_vertical_first`), not by version number.
    """
    shrinks_a_lot = new_height < height and height - new_height > 2 * (width - new_width)
    return shrinks_a_lot and new_width != width and _pillow_can_go_vertical_first()


@functools.cache
def _pillow_can_go_vertical_first() -> bool:
    """Resize a small noise image where the two pass orders differ, and see which one Pillow took."""
    noise = np.random.default_rng(0).integers(0, 256, (64, 16), dtype=np.uint8)
    image = Image.fromarray(noise)
    direct = np.asarray(image.resize((24, 16), Image.Resampling.BICUBIC))
    vertical_first = image.resize((16, 16), Image.Resampling.BICUBIC).resize((24, 16), Image.Resampling.BICUBIC)
    return bool(np.array_equal(direct, np.asarray(vertical_first)))


def _normalize_into(
    target: torch.Tensor, source: torch.Tensor, rgb: tuple[int, int, int], scale: torch.Tensor, offset: torch.Tensor
) -> None:
    """target[..., c, :, :] = source[..., rgb[c], :, :] * scale[c] + offset[c], in one pass per channel.

    addcmul reads the uint8 plane, computes in float32 and writes straight into the (strided) target
    in its own dtype: no float32 copy of the tiles is ever made.
    """
    import torch

    for channel, position in enumerate(rgb):
        torch.addcmul(offset[channel], source[..., position, :, :], scale[channel], out=target[..., channel, :, :])
