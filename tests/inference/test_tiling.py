"""Dynamic tiling: the PIL reference is the checkpoint's processor, and the fast path matches it.

Tolerance of the fast path: every value within 2 grey levels of the reference (2/255 before
normalization, so 2 / 255 / min(std) ~ 0.030 after), and the mean absolute difference under
2e-4 (normalized), the same grid and tile count. Both resize with the same bicubic kernel and
8-bit rounding; what remains is fixed-point rounding in the coefficients, on well under 1% of values.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from holodesk.automation.screen import frame_from_image
from holodesk.inference.tiling import (
    CLIP_MEAN,
    CLIP_STD,
    TileGrid,
    TilingSpec,
    choose_grid,
    fast_frame_tiles,
    fast_tiles,
    pil_resizes_vertically_first,
    reference_frame_tiles,
    reference_tiles,
)
from tests.support.reference_image_processor import NemotronNanoVLV2ImageProcessor, closest_grid

GREY_LEVELS = 2
MAX_ABS_DIFF = GREY_LEVELS / 255 / min(CLIP_STD) + 1e-5
MAX_MEAN_DIFF = 2e-4

# Common screens, the two-monitor desktop, odd and tiny sizes, a tall strip, and one exactly on a grid.
SIZES = [(1920, 1080), (1366, 768), (3286, 1080), (1023, 767), (37, 19), (513, 2049), (800, 600), (1024, 512)]


def desktop_image(width: int, height: int, seed: int = 0) -> Image.Image:
    """Flat UI-like content (windows, text) with a noise patch: sharp edges are where resizes differ."""
    rng = np.random.default_rng(seed)
    image = Image.new("RGB", (width, height), (32, 96, 160))
    draw = ImageDraw.Draw(image)
    for index in range(max(6, width * height // 20_000)):
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        size_x, size_y = int(rng.integers(2, 300)), int(rng.integers(2, 150))
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        draw.rectangle((x, y, x + size_x, y + size_y), fill=colour)
        draw.text((x + 2, y + 2), f"Item {index}", fill=(0, 0, 0))
    noise = rng.integers(0, 256, (max(1, height // 4), max(1, width // 4), 3), dtype=np.uint8)
    image.paste(Image.fromarray(noise), (width // 2, height // 2))
    return image


def bgra(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image.convert("RGBA"))[:, :, [2, 1, 0, 3]])


@pytest.mark.parametrize(
    ("size", "grid"),
    [
        ((1920, 1080), TileGrid(4, 2, True)),  # 9 tiles, as test_local.py counts for a full-HD screenshot
        ((2560, 1440), TileGrid(4, 2, True)),
        ((1280, 1024), TileGrid(4, 3, True)),
        ((500, 500), TileGrid(1, 1, False)),  # one tile: no thumbnail
        ((513, 2049), TileGrid(1, 4, True)),
        ((3286, 1080), TileGrid(6, 2, True)),
    ],
)
def test_grid_choice_for_known_sizes(size: tuple[int, int], grid: TileGrid) -> None:
    assert choose_grid(*size) == grid
    assert grid.count == grid.columns * grid.rows + int(grid.thumbnail)


def test_grid_choice_agrees_with_the_checkpoint_processor_for_every_tile_limit() -> None:
    rng = np.random.default_rng(1)
    sizes = [(int(w), int(h)) for w, h in rng.integers(1, 4000, (150, 2))] + [(1280, 1024), (1000, 800), (512, 512)]
    for max_tiles in range(1, 13):
        spec = TilingSpec(max_tiles=max_tiles)
        for width, height in sizes:
            grid = choose_grid(width, height, spec)
            assert (grid.columns, grid.rows) == closest_grid(width, height, max_tiles, 512), (width, height, max_tiles)
            assert grid.columns * grid.rows <= max_tiles


@pytest.mark.parametrize("size", [(1920, 1080), (1023, 767), (37, 19), (500, 500)], ids=str)
def test_reference_is_exactly_the_checkpoint_processor(size: tuple[int, int]) -> None:
    image = desktop_image(*size)
    processor = NemotronNanoVLV2ImageProcessor(norm_mean=list(CLIP_MEAN), norm_std=list(CLIP_STD))
    expected = processor.preprocess([image])["pixel_values"]
    got = reference_tiles(image)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.asarray(expected), rtol=0, atol=1e-6)


@pytest.mark.parametrize("size", SIZES, ids=str)
def test_fast_path_matches_the_reference(size: tuple[int, int]) -> None:
    image = desktop_image(*size, seed=size[0])
    expected = torch.from_numpy(reference_tiles(image))
    got = fast_tiles(bgra(image))
    assert got.dtype == torch.float32
    assert got.shape == expected.shape == (choose_grid(*size).count, 3, 512, 512)
    difference = (got - expected).abs()
    assert float(difference.max()) <= MAX_ABS_DIFF
    assert float(difference.mean()) < MAX_MEAN_DIFF


@pytest.mark.parametrize("size", [(2560, 1440), (1366, 768), (513, 2049), (37, 19)], ids=str)
def test_the_device_path_matches_the_reference(size: tuple[int, int]) -> None:
    """The code CUDA runs (upload, float passes rounded to 8 bits, normalize there), here on the CPU."""
    image = desktop_image(*size, seed=size[1])
    expected = torch.from_numpy(reference_tiles(image))
    got = fast_tiles(bgra(image), device="cpu", dtype=torch.float32)
    assert got.shape == expected.shape and got.device.type == "cpu"
    difference = (got - expected).abs()
    assert float(difference.max()) <= MAX_ABS_DIFF
    assert float(difference.mean()) < MAX_MEAN_DIFF
    # Not the uint8 CPU kernel in disguise: the two paths differ somewhere, within the same bound.
    assert not torch.equal(got, fast_tiles(bgra(image)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_device_path_on_cuda_matches_the_reference() -> None:
    image = desktop_image(2560, 1440)
    got = fast_tiles(bgra(image), device="cuda", dtype=torch.bfloat16)
    assert got.device.type == "cuda" and got.dtype == torch.bfloat16
    difference = (got.float().cpu() - torch.from_numpy(reference_tiles(image))).abs()
    # bf16 keeps 8 bits of mantissa: one more rounding step on top of the grey-level bound.
    assert float(difference.max()) <= MAX_ABS_DIFF + 2.0**-7 * 2.7


def test_fast_path_from_a_captured_frame_and_from_rgb_agree() -> None:
    image = desktop_image(1366, 768)
    frame = frame_from_image(image)
    from_frame = fast_frame_tiles(frame)
    torch.testing.assert_close(from_frame, fast_tiles(np.asarray(image), channels="RGB"), rtol=0, atol=0)
    reference = torch.from_numpy(reference_frame_tiles(frame))
    assert float((from_frame - reference).abs().max()) <= MAX_ABS_DIFF


def test_pass_order_follows_the_installed_pillow() -> None:
    # 1920x1080 -> 2048x1024 widens and shrinks the height: Pillow 13 goes vertical first there,
    # earlier Pillow horizontal first. Whichever is installed, the fast path must agree within tolerance.
    image = desktop_image(1920, 1080, seed=7)
    expected = np.asarray(image.resize((2048, 1024), Image.Resampling.BICUBIC))
    horizontal_first = np.asarray(
        image.resize((2048, 1080), Image.Resampling.BICUBIC).resize((2048, 1024), Image.Resampling.BICUBIC)
    )
    assert pil_resizes_vertically_first(1920, 1080, 2048, 1024) == (not np.array_equal(expected, horizontal_first))
    assert not pil_resizes_vertically_first(2560, 1440, 2048, 1024)  # the width shrinks more
    assert not pil_resizes_vertically_first(100, 100, 200, 120)  # the height grows


def test_bfloat16_output_and_a_reused_buffer() -> None:
    pixels = bgra(desktop_image(1920, 1080))
    full = fast_tiles(pixels)
    half = fast_tiles(pixels, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half, full.to(torch.bfloat16), rtol=0, atol=0.02)
    buffer = torch.full_like(full, float("nan"))
    assert fast_tiles(pixels, out=buffer) is buffer
    torch.testing.assert_close(buffer, full, rtol=0, atol=0)
    with pytest.raises(ValueError, match="out has shape"):
        fast_tiles(pixels, out=torch.empty(2, 3, 512, 512))


def test_spec_comes_from_the_loaded_image_processor() -> None:
    processor = NemotronNanoVLV2ImageProcessor(max_num_tiles=1, norm_mean=list(CLIP_MEAN), norm_std=list(CLIP_STD))
    spec = TilingSpec.from_image_processor(processor)
    assert spec == TilingSpec(max_tiles=1)
    tiles = fast_tiles(bgra(desktop_image(1920, 1080)), spec)
    assert tiles.shape == (1, 3, 512, 512)  # one tile, no thumbnail
    np.testing.assert_allclose(
        tiles.numpy(), np.asarray(processor.preprocess([desktop_image(1920, 1080)])["pixel_values"]), atol=MAX_ABS_DIFF
    )


def test_bad_pixels_are_refused() -> None:
    with pytest.raises(ValueError, match="uint8 BGRA"):
        fast_tiles(np.zeros((10, 10, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="uint8 RGB"):
        fast_tiles(np.zeros((10, 10, 4), dtype=np.uint8), channels="RGB")
    with pytest.raises(ValueError, match="positive"):
        choose_grid(0, 10)


def test_thread_count_is_scoped_to_the_call() -> None:
    pixels = bgra(desktop_image(640, 480))
    before = torch.get_num_threads()
    single = fast_tiles(pixels, threads=1)
    assert torch.get_num_threads() == before
    torch.testing.assert_close(fast_tiles(pixels, threads=None), single, rtol=0, atol=0)
    assert torch.get_num_threads() == before
