"""The processor side of the in-process backend: load it, render requests, tile images fast, and probe.

`load_processor` loads the checkpoint's processor through its own files: Nemotron-Nano-VL's processor
names its image processor by class name ("NemotronNanoVLV2ImageProcessor"), which transformers 4.53.3
finds only once that class is registered, so it is registered first from the checkpoint's own
`image_processing.py`. `render_prompt` turns an OpenAI-style message list (roles system, user,
assistant; content parts text and image) into the prompt through the checkpoint's chat template.

`FastImageProcessor` stands in for the image processor with `inference.tiling` (about 4x faster per
screenshot), once `compare_tiling` has shown that both give the same prompt tokens and pixels within
two grey levels on screenshot-like probe images.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageDraw

from holodesk.inference import tiling
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.profiles.base import ChatRequest

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

# Attribute names image processors use for their tile limit: Nemotron-Nano-VL's first, then InternVL's.
TILE_LIMIT_ATTRIBUTES = ("max_num_tiles", "max_dynamic_patch", "max_tiles")
# The load-time tiling probe: a 16:9 screenshot (a 4x2 grid) and a tall strip (1x3), so two grids,
# their order in the batch and each image's tile count are checked; the strip's thumbnail is the
# case newer Pillow resizes vertical pass first. The strip is small so the probe stays near 0.2 s.
PROBE_SIZES = ((1920, 1080), (300, 900))
# How far the fast tiles may stray from the processor's: 2 of 255 grey levels before normalization,
# the bound inference/tiling.py is tested to (resize coefficients round differently on a few pixels).
PROBE_GREY_LEVELS = 2.0
# What the request may hold (the profiles send these; the checkpoint's template knows no others).
ROLES = ("system", "user", "assistant")
PART_TYPES = ("text", "image")
# Nemotron-Nano-VL takes at most 4 images a request.
MAX_IMAGES = 4


def register_image_processor(path: Path) -> Any:
    """Register the checkpoint's own image processor class with AutoImageProcessor; return it.

    None when preprocessor_config.json names no remote image processor (a stock one needs nothing).
    The class is registered under the checkpoint's config class, both read from its own files.
    """
    from transformers import AutoConfig, AutoImageProcessor
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    try:
        preprocessor = json.loads((path / "preprocessor_config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path / 'preprocessor_config.json'}: {exc}") from exc
    reference = (preprocessor.get("auto_map") or {}).get("AutoImageProcessor")
    if isinstance(reference, list | tuple):  # (slow, fast) pairs are allowed in auto_map
        reference = next((r for r in reference if r), None)
    if not isinstance(reference, str):
        return None
    image_processor_class: Any = get_class_from_dynamic_module(reference, str(path))
    config_class = type(AutoConfig.from_pretrained(path, trust_remote_code=True, local_files_only=True))
    from transformers.image_processing_utils_fast import BaseImageProcessorFast

    if issubclass(image_processor_class, BaseImageProcessorFast):
        AutoImageProcessor.register(config_class, fast_image_processor_class=image_processor_class, exist_ok=True)
    else:
        AutoImageProcessor.register(config_class, slow_image_processor_class=image_processor_class, exist_ok=True)
    return image_processor_class


def load_processor(path: Path) -> Any:
    """The checkpoint's processor, its image processor class registered first (see the module docstring).

    transformers finds a registered image processor by class name; when several checkpoints in one
    process ship classes of the same name (two stand-ins, an update), it may hand back another
    checkpoint's class, so the image processor is rebuilt from this checkpoint's own class if needed.
    """
    import transformers

    image_processor_class = register_image_processor(path)
    processor = transformers.AutoProcessor.from_pretrained(path, trust_remote_code=True, local_files_only=True)
    current = getattr(processor, "image_processor", None)
    if image_processor_class is not None and current is not None and type(current) is not image_processor_class:
        processor.image_processor = image_processor_class.from_pretrained(path, local_files_only=True)
    return processor


def check_messages(messages: list[dict[str, Any]]) -> int:
    """Check an OpenAI-style message list against what the checkpoint's template renders; return its image count."""
    images = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise BackendError(f"message {index} has role {role!r}; the local backend takes {', '.join(ROLES)}")
        content = message.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise BackendError(f"message {index}: content must be text or a list of parts")
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind not in PART_TYPES:
                raise BackendError(f"message {index}: part type {kind!r}; the local backend takes text and image")
            images += kind == "image"
    if images > MAX_IMAGES:
        raise BackendError(f"the request has {images} images; the model takes at most {MAX_IMAGES}")
    return images


def set_tile_limit(processor: Any, max_tiles: int) -> str | None:
    """Set the image processor's tile limit attribute; return its name, or None if it has none."""
    image_processor = getattr(processor, "image_processor", None)
    for name in TILE_LIMIT_ATTRIBUTES:
        if image_processor is not None and hasattr(image_processor, name):
            setattr(image_processor, name, max_tiles)
            return name
    return None


def render_prompt(processor: Any, request: ChatRequest) -> str:
    """The chat template applied to the request (the processor's template, else the tokenizer's)."""
    template_owner = processor if getattr(processor, "chat_template", None) else getattr(processor, "tokenizer", None)
    if template_owner is None or not getattr(template_owner, "chat_template", None):
        raise BackendError("the checkpoint has no chat template, so the request cannot be turned into a prompt")
    images = check_messages(list(request.messages))
    if images != len(request.images):
        raise BackendError(
            f"the messages hold {images} image parts but the request carries {len(request.images)} images"
        )
    return template_owner.apply_chat_template(
        request.messages, tokenize=False, add_generation_prompt=True, **request.chat_template_kwargs
    )


def processor_inputs(processor: Any, prompt: str, images: list[Image.Image]) -> Any:
    """The processor's tensors for one prompt and its images (the same call for generate and the probe)."""
    return processor(text=[prompt], images=images or None, return_tensors="pt")


class FastImageProcessor:
    """Stands in for the processor's image processor: tiles PIL images with `inference.tiling.fast_tiles`.

    Nemotron-Nano-VL's processor (and the tiny test one, which mirrors it) calls its image processor
    with the list of images and reads back `pixel_values` (every image's tiles, in order) and
    `num_patches` (tiles per image, from which it expands each `<image>` placeholder). This returns
    exactly those two, the tiles written straight into one tensor of the model's dtype (no float32
    copy to cast later). Attributes it does not define (image_size, patch_size...) are the stock
    image processor's, so the processor reads the same settings either way.
    """

    def __init__(self, stock: Any, dtype: torch.dtype, device: str | None = None) -> None:
        self.stock = stock
        self.dtype = dtype
        # Where the tiles are made: None, the CPU's uint8 kernel; a device (the model's), the device path.
        self.device = device
        self.spec = tiling.TilingSpec.from_image_processor(stock)
        # Calls answered by the fast path and calls handed to the stock one: the probe needs to know that
        # the processor really went through __call__/preprocess here, not through some other method.
        self.fast_calls = 0
        self.stock_calls = 0

    def refresh(self) -> None:
        """Re-read the stock image processor's settings (after its tile limit changed)."""
        self.spec = tiling.TilingSpec.from_image_processor(self.stock)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the adapter lacks. "stock" itself is refused so that copy/pickle, which
        # probe attributes before __init__ has run, get an AttributeError instead of endless recursion.
        if name == "stock":
            raise AttributeError(name)
        return getattr(self.stock, name)

    def __call__(self, images: Any = None, return_tensors: str | None = None, **kwargs: Any) -> Any:
        import torch
        from transformers import BatchFeature

        flat = _flat_images(images)
        if not flat or not all(isinstance(image, Image.Image) for image in flat):
            # Arrays or tensors: the app sends PIL images only, but the stock code knows every input type.
            self.stock_calls += 1
            return self.stock(images, return_tensors=return_tensors, **kwargs)
        extra = {name: value for name, value in kwargs.items() if value is not None}
        if extra:
            # Per-call settings the spec does not follow; refusing makes the probe fall back to the stock path.
            raise TypeError(f"the fast tiler does not take image processor arguments {sorted(extra)}")
        spec = self.spec
        grids = [tiling.choose_grid(image.width, image.height, spec) for image in flat]
        size = spec.tile_size
        pixel_values = torch.empty(
            (sum(grid.count for grid in grids), 3, size, size), dtype=self.dtype, device=self.device or "cpu"
        )
        start = 0
        for image, grid in zip(flat, grids, strict=True):
            # One image's pixels at a time (a 1080p RGB copy is 6 MB), tiled into its slice of the batch.
            pixels = np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
            tiling.fast_tiles(
                pixels, spec, channels="RGB", out=pixel_values[start : start + grid.count], device=self.device
            )
            start += grid.count
        self.fast_calls += 1
        # num_patches as a tensor: Nemotron-Nano-VL's processor calls .tolist() on it.
        data = {"pixel_values": pixel_values, "num_patches": torch.tensor([grid.count for grid in grids])}
        return BatchFeature(data=data, tensor_type=return_tensors)

    # Processors that call preprocess directly get the same answer.
    preprocess = __call__


def _flat_images(images: Any) -> list[Any]:
    """A single image, a list of images or a batch (list of lists) as one flat list, in order."""
    if images is None:
        return []
    if not isinstance(images, list | tuple):
        return [images]
    flat: list[Any] = []
    for item in images:
        flat.extend(_flat_images(item) if isinstance(item, list | tuple) else [item])
    return flat


def probe_images() -> list[Image.Image]:
    """Screenshot-like images for the tiling probe: a gradient desktop, windows with text, a noise patch.

    Flat areas, hard edges, small text and noise are where two resize implementations part ways (the
    noise overshoots and clips), so agreement here stands for agreement on real screens.
    """
    rng = np.random.default_rng(2024)
    images = []
    for width, height in PROBE_SIZES:
        rows = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None]
        columns = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :]
        background = np.stack(
            [30 + 60 * rows + 0 * columns, 80 + 50 * columns + 0 * rows, 140 + 80 * rows * columns], axis=2
        )
        image = Image.fromarray(background.astype(np.uint8), "RGB")
        draw = ImageDraw.Draw(image)
        for index in range(12):
            left, top = int(rng.integers(0, width * 3 // 4)), int(rng.integers(0, height * 3 // 4))
            right = min(width - 1, left + int(rng.integers(40, width // 2)))
            bottom = min(height - 1, top + int(rng.integers(30, height // 2)))
            fill = tuple(int(v) for v in rng.integers(0, 256, 3))
            draw.rectangle((left, top, right, bottom), fill=fill, outline=(0, 0, 0))
            draw.rectangle((left, top, right, min(bottom, top + 18)), fill=(40, 40, 48))
            draw.text((left + 4, top + 4), f"Window {index} - Inbox", fill=(255, 255, 255))
            draw.text((left + 4, top + 26), "Archive  Reply  Forward", fill=(0, 0, 0))
        noise = rng.integers(0, 256, (height // 6, width // 6, 3), dtype=np.uint8)
        image.paste(Image.fromarray(noise, "RGB"), (width // 3, height // 2))
        images.append(image)
    return images


def probe_request(images: list[Image.Image]) -> ChatRequest:
    """A request with the probe images, shaped like the profiles' (placeholders in a user turn)."""
    content: list[dict[str, Any]] = [{"type": "image"} for _ in images]
    content.append({"type": "text", "text": "Where is the Archive button?"})
    return ChatRequest(messages=[{"role": "user", "content": content}], images=images, max_new_tokens=1)


def compare_tiling(
    stock_processor: Any, fast_processor: Any, adapter: FastImageProcessor, dtype: torch.dtype
) -> tuple[bool, str]:
    """Run the stock and the fast processor on the probe request; (agree, what was found).

    Agreement: identical input_ids and attention_mask (so every image got the same tile count), and
    pixel values of the same shape within PROBE_GREY_LEVELS of the stock ones once both are in the
    model's dtype (the stock path casts too, so one rounding step of that dtype is allowed on top).
    """
    import torch

    images = probe_images()
    prompt = render_prompt(stock_processor, probe_request(images))
    expected = processor_inputs(stock_processor, prompt, images)
    before = (adapter.fast_calls, adapter.stock_calls)
    actual = processor_inputs(fast_processor, prompt, images)
    if adapter.fast_calls == before[0] or adapter.stock_calls != before[1]:
        return False, "the processor did not take its tiles from the fast path (it tiles by some other method)"
    for name in ("input_ids", "attention_mask"):
        want, got = expected.get(name), actual.get(name)
        if want is None and got is None:
            continue
        if want is None or got is None or not torch.equal(torch.as_tensor(want), torch.as_tensor(got)):
            return False, f"{name} differ from the processor's on the probe images"
    want, got = expected.get("pixel_values"), actual.get("pixel_values")
    if want is None or got is None:
        return False, "the probe produced no pixel values"
    if tuple(got.shape) != tuple(want.shape) or got.dtype != dtype:
        return False, f"tiles of {tuple(got.shape)} {got.dtype}, the processor's are {tuple(want.shape)} in {dtype}"
    got = got.to("cpu")  # the device path's tiles are on the model's device
    reference = want.to(dtype).float()
    # Grey levels undo the normalization's scale, channel by channel: normalized = grey / (255 * std) - ...
    to_grey = 255.0 * torch.tensor(adapter.spec.std, dtype=torch.float32).view(1, 3, 1, 1)
    # In place, pass by pass: the probe's 13 tiles are 10 M values, and loading should not wait on copies.
    rounding = reference.abs().mul_(torch.finfo(dtype).eps)  # at least one unit in the last place of the dtype
    excess = got.float().sub_(reference).abs_().sub_(rounding).clamp_(min=0).mul_(to_grey)
    worst = float(excess.max())
    # The slack is float32 noise only: a difference of exactly 2 levels comes back as 2.0000x from the scaling.
    if worst > PROBE_GREY_LEVELS + 0.01:
        return False, (
            f"tiles differ from the processor's by up to {worst:.1f} grey levels on the probe images"
            f" (at most {PROBE_GREY_LEVELS:g} allowed)"
        )
    tokens = int(torch.as_tensor(expected["input_ids"]).shape[-1])
    return True, (
        f"same {tokens} prompt tokens as the processor on the probe images, tiles within {worst:.2f} grey levels"
    )
