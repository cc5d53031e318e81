"""The in-process backend: run Holotron-12B (or any Nemotron-VL-style checkpoint) with transformers here.

The checkpoint's own Python code is loaded with `trust_remote_code=True` from a local directory or
the local Hugging Face cache, never from the network. Loading is slow (tens of seconds for 25 GB),
so it runs once, on a worker thread, reporting progress; `generate` then serves one request at a
time on the loaded model. Before loading, the backend checks that the weights fit in the GPU's
free memory and says which Mamba path (fast kernels or slow fallback) will run.

Images are tiled by `inference.tiling`'s torch path instead of the processor's PIL code (about 4x
faster per screenshot, three screenshots a step) once a load-time probe has shown that both give the
same prompt tokens and pixels within two grey levels; otherwise the processor tiles as shipped.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageDraw

from holodesk.inference import tiling
from holodesk.inference.checkpoint import CheckpointLocation, find_checkpoint, saved_dtype_bytes
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.generation import Generation
from holodesk.inference.hardware import GIB, HardwareReport, MambaPath, detect_hardware, gib
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest, ImageBudget

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Attribute names image processors use for their tile limit: Nemotron-Nano-VL's first, then InternVL's.
TILE_LIMIT_ATTRIBUTES = ("max_num_tiles", "max_dynamic_patch", "max_tiles")
# Processor outputs the model's generate takes; others (num_patches, image_flags) are bookkeeping
# that Nemotron-VL's generate would pass on to the language model, which rejects unknown kwargs.
MODEL_INPUTS = ("input_ids", "attention_mask", "pixel_values")
CHAT_END_TOKENS = ("<|im_end|>",)
# The load-time tiling probe: a 16:9 screenshot (a 4x2 grid) and a tall strip (1x3), so two grids,
# their order in the batch and each image's tile count are checked; the strip's thumbnail is the
# case newer Pillow resizes vertical pass first. The strip is small so the probe stays near 0.2 s.
PROBE_SIZES = ((1920, 1080), (300, 900))
# How far the fast tiles may stray from the processor's: 2 of 255 grey levels before normalization,
# the bound inference/tiling.py is tested to (resize coefficients round differently on a few pixels).
PROBE_GREY_LEVELS = 2.0


class GenerationInterrupted(BackendError):
    """interrupt() stopped this generation part-way; there is no answer."""


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """One step of loading: `stage` names it, `fraction` (0..1) says how far along, `message` is for people."""

    stage: str
    fraction: float
    message: str


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """Where and how the model will be loaded, decided before touching any weights."""

    device: str
    dtype: str
    mamba_path: MambaPath
    # Bytes the weights and working memory need on the GPU; None on the CPU or when the size is unknown.
    required_bytes: int | None
    # Why this will be slow, when it will be; None on the fast path.
    slow_path_warning: str | None


@dataclass(frozen=True, slots=True)
class LocalGeneration:
    """A generation with its token ids, for callers (benchmarks, engine tests) that need more than text."""

    text: str
    prompt_token_ids: tuple[int, ...]
    new_token_ids: tuple[int, ...]
    timings: StepTimings

    @property
    def generation(self) -> Generation:
        return Generation(text=self.text, timings=self.timings)


def headroom_bytes(weight_bytes: int) -> int:
    """Memory beyond the weights: activations of a ~3,500-token prefill, the hybrid cache, CUDA's own."""
    return max(2 * GIB, weight_bytes // 10)


def normalize_device(device: str) -> str:
    """ "cuda" -> "cuda:0"; "cuda:N" and "cpu" as given; anything else is a ModelLoadError."""
    text = device.strip().lower()
    if text == "cpu":
        return "cpu"
    if text == "cuda":
        return "cuda:0"
    if text.startswith("cuda:") and text[5:].isdigit():
        return text
    raise ModelLoadError(f"unknown device {device!r}: use 'cuda', 'cuda:N' or 'cpu'")


def plan_load(checkpoint: CheckpointLocation, device: str, dtype: str | None, report: HardwareReport) -> LoadPlan:
    """Check the device and its free memory against the weights; refuse clearly when they cannot fit."""
    device = normalize_device(device)
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise ModelLoadError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
    if device == "cpu":
        # bf16 by default here too: Nemotron-VL's remote code casts image features to bf16 itself, so it
        # needs bf16 weights; float32 is for checkpoints (like the tiny test one) that allow it.
        chosen = dtype or "bfloat16"
        warning = (
            "Running on the CPU: every layer, Mamba included, runs as plain PyTorch code. Expect minutes per"
            " step with a 12B model; use a CUDA GPU or the remote backend for real work."
        )
        return LoadPlan(device, chosen, MambaPath.CPU, None, warning)

    if report.torch.error is not None:
        raise ModelLoadError(f"torch cannot be imported ({report.torch.error}); install holodesk[holotron]")
    index = int(device.split(":")[1])
    gpu = report.device(index)
    if gpu is None:
        if not report.devices:
            why = report.cuda_error or (
                f"torch {report.torch.version} was built without CUDA"
                if report.torch.cuda_version is None
                else "no CUDA device is visible (driver missing or CUDA_VISIBLE_DEVICES empty)"
            )
            raise ModelLoadError(
                f"No CUDA GPU to load the model on: {why}. Holotron-12B needs a CUDA GPU with about 28 GiB"
                " free; choose device 'cpu' to run it (very slowly) on the processor, or use the remote backend."
            )
        raise ModelLoadError(f"There is no {device}; this machine has {', '.join(d.label for d in report.devices)}.")

    chosen = dtype or "bfloat16"
    if chosen == "bfloat16" and gpu.capability < (8, 0):
        # Not switched to float16 for the user: Nemotron-VL's remote code casts image features to bf16.
        logger.warning("%s predates Ampere: bfloat16 runs emulated there and will be slow", gpu.label)
    required: int | None = None
    if checkpoint.weight_bytes > 0:
        weights = checkpoint.weight_bytes * DTYPE_BYTES[chosen] // saved_dtype_bytes(checkpoint.path)
        headroom = headroom_bytes(weights)
        required = weights + headroom
        if required > gpu.free_bytes:
            raise ModelLoadError(
                f"The model does not fit on {gpu.label}: it needs about {gib(required)} ({gib(weights)} of"
                f" {chosen} weights + {gib(headroom)} for activations and caches) but only"
                f" {gib(gpu.free_bytes)} of {gib(gpu.total_bytes)} is free. Close other programs using the GPU,"
                " pick a GPU with more memory, or use the remote (vLLM) backend."
            )
    else:
        logger.warning("no weight files found in %s: skipping the GPU memory check", checkpoint.path)

    warning = None
    if report.path is not MambaPath.FAST_CUDA:
        broken = "; ".join(k.describe() for k in report.kernels if not k.importable)
        warning = (
            f"The Mamba CUDA kernels are not usable ({broken}): the Mamba layers will run the slow PyTorch"
            " fallback, several times slower and with much more memory for long prompts. Install them with:"
            ' pip install --no-build-isolation "holodesk[cuda]"'
        )
    return LoadPlan(device, chosen, report.path, required, warning)


def kernels_in_use(model: Any) -> bool | None:
    """Whether the loaded model's Mamba layers will take the CUDA-kernel path.

    Nemotron-H's remote code, like transformers' Bamba and Mamba-2, decides with a module-level
    `is_fast_path_available` and the weights' device; read both. None when no layer says.
    """
    import sys

    flags: list[bool] = []
    for module in model.modules():
        if not hasattr(module, "in_proj"):
            continue
        flag = getattr(sys.modules.get(type(module).__module__), "is_fast_path_available", None)
        if isinstance(flag, bool):
            on_cuda = any(p.device.type == "cuda" for p in module.parameters(recurse=False)) or any(
                p.device.type == "cuda" for p in module.in_proj.parameters()
            )
            flags.append(flag and on_cuda)
    return all(flags) if flags else None


def set_tile_limit(processor: Any, max_tiles: int) -> str | None:
    """Set the image processor's tile limit attribute; return its name, or None if it has none."""
    image_processor = getattr(processor, "image_processor", None)
    for name in TILE_LIMIT_ATTRIBUTES:
        if image_processor is not None and hasattr(image_processor, name):
            setattr(image_processor, name, max_tiles)
            return name
    return None


def _model_auto_class(path: Path) -> str:
    """AutoModelForCausalLM where the checkpoint's auto_map offers it, else AutoModel (its remote class)."""
    try:
        auto_map = json.loads((path / "config.json").read_text(encoding="utf-8")).get("auto_map", {})
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path / 'config.json'}: {exc}") from exc
    if "AutoModelForCausalLM" in auto_map or "AutoModel" not in auto_map:
        return "AutoModelForCausalLM"
    return "AutoModel"


class _TokenClock:
    """A generate() streamer that only timestamps: the prompt arrives first (2-D), then each new token (1-D).

    The first token's arrival ends prefill (vision encoder + prompt forward + first pick); the
    tokens are moved to the CPU as they come, so the times are true on CUDA too.
    """

    def __init__(self) -> None:
        self.first_token_at: float | None = None
        self.tokens = 0

    def put(self, value: Any) -> None:
        if getattr(value, "dim", lambda: 1)() > 1:
            return
        if self.first_token_at is None:
            self.first_token_at = time.perf_counter()
        self.tokens += 1

    def end(self) -> None:
        pass


class FastImageProcessor:
    """Stands in for the processor's image processor: tiles PIL images with `inference.tiling.fast_tiles`.

    Nemotron-Nano-VL's processor (and the tiny test one, which mirrors it) calls its image processor
    with the list of images and reads back `pixel_values` (every image's tiles, in order) and
    `num_patches` (tiles per image, from which it expands each `<image>` placeholder). This returns
    exactly those two, the tiles written straight into one tensor of the model's dtype (no float32
    copy to cast later). Attributes it does not define (image_size, patch_size...) are the stock
    image processor's, so the processor reads the same settings either way.
    """

    def __init__(self, stock: Any, dtype: torch.dtype) -> None:
        self.stock = stock
        self.dtype = dtype
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
        pixel_values = torch.empty((sum(grid.count for grid in grids), 3, size, size), dtype=self.dtype)
        start = 0
        for image, grid in zip(flat, grids, strict=True):
            # One image's pixels at a time (a 1080p RGB copy is 6 MB), tiled into its slice of the batch.
            pixels = np.asarray(image if image.mode == "RGB" else image.convert("RGB"))
            tiling.fast_tiles(pixels, spec, channels="RGB", out=pixel_values[start : start + grid.count])
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
    prompt = _render_prompt(stock_processor, probe_request(images))
    expected = _processor_inputs(stock_processor, prompt, images)
    before = (adapter.fast_calls, adapter.stock_calls)
    actual = _processor_inputs(fast_processor, prompt, images)
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


@dataclass(slots=True)
class _Loaded:
    model: Any
    processor: Any
    tokenizer: Any
    device: Any
    dtype: Any
    plan: LoadPlan
    stop_token_ids: list[int]
    pad_token_id: int | None
    # The processor with FastImageProcessor standing in for its image processor; None: the stock path.
    fast_processor: Any = None
    fast_image_processor: FastImageProcessor | None = None


class LocalBackend:
    """Runs a checkpoint in this process. Load once with `load_async()`, then call `generate`.

    `checkpoint` is a directory or a Hugging Face repo id found in the local cache (default
    Holotron-12B). `device` is "cuda", "cuda:N" or "cpu"; `dtype` defaults to bfloat16, on the GPU
    and the CPU alike; "float32" (or "float16") must be asked for. `max_tiles` is the profile's
    `ImageBudget.max_tiles`. Decoding is greedy; `ChatRequest.response_schema` is not enforced here
    (the profile's parser is the check), and `max_new_tokens` is capped at `max_new_tokens_cap`.

    `fast_tiling` (default on) lets `inference.tiling` cut the images into tiles instead of the
    processor's PIL code, if a probe at load time finds both agree; after loading, the attribute
    `fast_tiling` says whether it is in use and `fast_tiling_reason` why (for doctor and benchmarks).
    """

    def __init__(
        self,
        checkpoint: str | Path | None = None,
        *,
        device: str = "cuda",
        dtype: str | None = None,
        max_tiles: int = ImageBudget().max_tiles,
        max_new_tokens_cap: int = 4096,
        cache_dir: str | Path | None = None,
        revision: str | None = None,
        hardware_probe: Callable[[], HardwareReport] = detect_hardware,
        load_wait_s: float | None = None,
        fast_tiling: bool = True,
    ) -> None:
        if max_tiles < 1:
            raise ValueError(f"max_tiles must be at least 1, got {max_tiles}")
        if dtype is not None and dtype not in DTYPE_BYTES:
            raise ModelLoadError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
        self.checkpoint_spec = checkpoint
        self.device_name = normalize_device(device)
        self.dtype_name = dtype
        self.max_tiles = max_tiles
        self.max_new_tokens_cap = max_new_tokens_cap
        self.cache_dir = cache_dir
        self.revision = revision
        self.hardware_probe = hardware_probe
        self.load_wait_s = load_wait_s
        self.fast_tiling_requested = fast_tiling
        # Filled in by loading; read by doctor and the settings page.
        self.checkpoint: CheckpointLocation | None = None
        self.plan: LoadPlan | None = None
        self.slow_path_warning: str | None = None
        self.load_seconds: float | None = None
        # Whether the loaded model's images are tiled by inference.tiling (True) or the processor, and why.
        self.fast_tiling = False
        self.fast_tiling_reason = "not loaded"
        self._loaded: _Loaded | None = None
        self._load_future: Future[None] | None = None
        self._state_lock = threading.Lock()
        self._generate_lock = threading.Lock()
        # interrupt() stamps this; a generation asked for before the stamp stops at its next token.
        self._interrupted_at = float("-inf")

    # -- loading ---------------------------------------------------------------------------------

    @property
    def is_loaded(self) -> bool:
        return self._loaded is not None

    def load_async(self, progress: Callable[[LoadProgress], None] | None = None) -> Future[None]:
        """Start loading on a worker thread (once: later calls return the same future, unless it failed).

        `progress` is called on the worker thread: a GUI must hand it to its own thread.
        The future's exception is a ModelLoadError saying what went wrong and what to do; calling
        again after a failure (weights downloaded meanwhile, GPU freed) tries again.
        """
        with self._state_lock:
            current = self._load_future
            if current is not None and not (current.done() and current.exception() is not None):
                return current
            future: Future[None] = Future()
            future.set_running_or_notify_cancel()
            self._load_future = future
        thread = threading.Thread(
            target=self._load_into, args=(future, progress), name="holodesk-model-load", daemon=True
        )
        thread.start()
        return future

    def load(self, progress: Callable[[LoadProgress], None] | None = None) -> None:
        """Load and wait (for scripts and tests); raises ModelLoadError."""
        self.load_async(progress).result()

    def _load_into(self, future: Future[None], progress: Callable[[LoadProgress], None] | None) -> None:
        try:
            self._load(progress)
        except ModelLoadError as exc:
            future.set_exception(exc)
        except Exception as exc:  # anything from the remote code, transformers or torch
            logger.exception("loading the local model failed")
            future.set_exception(ModelLoadError(f"Loading the model failed: {type(exc).__name__}: {exc}"))
        else:
            future.set_result(None)

    def _load(self, progress: Callable[[LoadProgress], None] | None) -> None:
        def report(stage: str, fraction: float, message: str) -> None:
            logger.info("model load: %s", message)
            if progress is not None:
                try:
                    progress(LoadProgress(stage, fraction, message))
                except Exception:  # a broken progress display must not break loading
                    logger.exception("load progress callback failed")

        started = time.perf_counter()
        report("locating", 0.0, "Locating the checkpoint")
        checkpoint = find_checkpoint(self.checkpoint_spec, cache_dir=self.cache_dir, revision=self.revision)
        self.checkpoint = checkpoint

        report("checking", 0.05, f"Checking {self.device_name} for {checkpoint.describe()}")
        plan = plan_load(checkpoint, self.device_name, self.dtype_name, self.hardware_probe())
        self.plan = plan

        report("processor", 0.1, "Loading the processor (tokenizer, image tiling, chat template)")
        import torch
        import transformers

        processor = transformers.AutoProcessor.from_pretrained(
            checkpoint.path, trust_remote_code=True, local_files_only=True
        )
        if set_tile_limit(processor, self.max_tiles) is None:
            logger.warning("the image processor has no tile limit attribute: max_tiles=%d is ignored", self.max_tiles)
        tokenizer = getattr(processor, "tokenizer", processor)
        dtype = getattr(torch, plan.dtype)

        report("tiling", 0.15, "Checking the fast image tiling against the processor's")
        fast_processor, adapter = self._choose_tiling(processor, dtype)

        report("weights", 0.2, f"Loading {gib(checkpoint.weight_bytes)} of weights as {plan.dtype} on {plan.device}")
        auto_class = getattr(transformers, _model_auto_class(checkpoint.path))
        load_kwargs: dict[str, Any] = {"torch_dtype": dtype, "trust_remote_code": True, "local_files_only": True}
        direct_to_gpu = plan.device != "cpu" and _accelerate_available()
        if direct_to_gpu:
            load_kwargs["device_map"] = {"": plan.device}  # straight to the GPU, no 25 GB copy in RAM
        try:
            model = auto_class.from_pretrained(checkpoint.path, **load_kwargs)
            if not direct_to_gpu and plan.device != "cpu":
                report("device", 0.9, f"Moving the weights to {plan.device}")
                model = model.to(plan.device)
        except torch.cuda.OutOfMemoryError as exc:
            raise ModelLoadError(
                f"The GPU ran out of memory while loading ({exc}). Close other programs using {plan.device}"
                " or use the remote backend."
            ) from exc
        model.eval()

        in_use = kernels_in_use(model)
        warning = plan.slow_path_warning
        if plan.mamba_path is MambaPath.FAST_CUDA and in_use is False:
            warning = (
                "mamba-ssm and causal-conv1d import here, but the checkpoint's Mamba layers did not pick them up:"
                " the slow PyTorch fallback will run."
            )
        elif in_use is True:
            warning = None
        self.slow_path_warning = warning
        if warning:
            logger.warning("%s", warning)

        stop_ids = _stop_token_ids(tokenizer)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (stop_ids[0] if stop_ids else None)
        self._loaded = _Loaded(
            model=model,
            processor=processor,
            tokenizer=tokenizer,
            device=torch.device(plan.device),
            dtype=dtype,
            plan=plan,
            stop_token_ids=stop_ids,
            pad_token_id=pad_id,
            fast_processor=fast_processor,
            fast_image_processor=adapter,
        )
        self.load_seconds = time.perf_counter() - started
        report("ready", 1.0, f"Model ready on {plan.device} in {self.load_seconds:.1f} s")

    def _choose_tiling(self, processor: Any, dtype: torch.dtype) -> tuple[Any, FastImageProcessor | None]:
        """The processor with the fast tiler in place of its image processor, if it passes the probe.

        The stock processor is left as it is (a shallow copy carries the adapter), so its image processor
        still answers direct calls and keeps the tile limit that the adapter reads. On any doubt the
        answer is (None, None): the processor's own tiling, slower but the checkpoint's definition.
        """
        if not self.fast_tiling_requested:
            self.fast_tiling, self.fast_tiling_reason = False, "off: fast_tiling=False was asked for"
            logger.info("image tiling: the processor's own (fast tiling turned off)")
            return None, None
        stock = getattr(processor, "image_processor", None)
        adapter: FastImageProcessor | None = None
        fast_processor: Any = None
        if stock is None:
            agree, found = False, "the processor has no image processor to stand in for"
        else:
            try:
                adapter = FastImageProcessor(stock, dtype)
                fast_processor = copy.copy(processor)
                fast_processor.image_processor = adapter
                agree, found = compare_tiling(processor, fast_processor, adapter, dtype)
            except Exception as exc:  # the checkpoint's processor code or the fast path broke: not used then
                agree, found = False, f"the probe failed: {type(exc).__name__}: {exc}"
        if not agree:
            self.fast_tiling, self.fast_tiling_reason = False, f"off: {found}"
            logger.warning("fast image tiling is off, the processor tiles the images instead (slower): %s", found)
            return None, None
        self.fast_tiling, self.fast_tiling_reason = True, f"on: {found}"
        logger.info("image tiling: fast path (%s)", found)
        return fast_processor, adapter

    def unload(self) -> None:
        """Drop the model and free its memory; a later `load_async` loads it again."""
        with self._generate_lock, self._state_lock:
            if self._load_future is not None and not self._load_future.done():
                raise BackendError("the model is still loading; wait for it before unloading")
            self._loaded = None
            self._load_future = None
            self.fast_tiling, self.fast_tiling_reason = False, "not loaded"
        gc.collect()
        with contextlib.suppress(Exception):  # torch may be absent or CUDA unusable: nothing to free then
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()

    def _require_loaded(self) -> _Loaded:
        future = self._load_future
        if future is None:
            raise BackendError("The local model is not loaded: start loading it with load_async() (or load()) first.")
        if not future.done():
            logger.info("generate is waiting for the model to finish loading")
        try:
            future.result(timeout=self.load_wait_s)
        except TimeoutError:
            raise BackendError(f"The local model is still loading after {self.load_wait_s:.0f} s.") from None
        loaded = self._loaded
        if loaded is None:
            raise BackendError("The local model was unloaded: load it again before generating.")
        return loaded

    # -- generation ------------------------------------------------------------------------------

    def set_max_tiles(self, max_tiles: int) -> None:
        """Change the tile budget (the profile's ImageBudget.max_tiles) for later requests."""
        if max_tiles < 1:
            raise ValueError(f"max_tiles must be at least 1, got {max_tiles}")
        with self._generate_lock:
            self.max_tiles = max_tiles
            if self._loaded is not None:
                set_tile_limit(self._loaded.processor, max_tiles)
                if self._loaded.fast_image_processor is not None:
                    # The adapter reads the limit the stock image processor now holds.
                    self._loaded.fast_image_processor.refresh()

    def generate(self, request: ChatRequest) -> Generation:
        return self.generate_detailed(request).generation

    def generate_detailed(self, request: ChatRequest) -> LocalGeneration:
        """Run one request greedily; one at a time (callers on other threads wait their turn)."""
        asked_at = time.monotonic()
        loaded = self._require_loaded()
        with self._generate_lock:
            try:
                return self._generate(loaded, request, asked_at)
            except (BackendError, ModelLoadError):
                raise
            except Exception as exc:
                raise BackendError(f"Local generation failed: {type(exc).__name__}: {exc}") from exc

    def interrupt(self) -> None:
        """Stop the generation in progress (and any already waiting for its turn) at the next token.

        Called from another thread when the user stops a run: the GPU is freed within one decode
        step instead of finishing an answer nobody will read. Later requests are not affected.
        """
        self._interrupted_at = time.monotonic()

    def _generate(self, loaded: _Loaded, request: ChatRequest, asked_at: float | None = None) -> LocalGeneration:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        asked_at = time.monotonic() if asked_at is None else asked_at
        backend = self

        class _StopWhenInterrupted(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                stop = backend._interrupted_at >= asked_at
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)

        if request.max_new_tokens < 1:
            raise BackendError(f"max_new_tokens must be at least 1, got {request.max_new_tokens}")
        started = time.perf_counter()
        prompt = _render_prompt(loaded.processor, request)
        processor = loaded.processor if loaded.fast_processor is None else loaded.fast_processor
        inputs = _processor_inputs(processor, prompt, list(request.images))
        model_inputs: dict[str, Any] = {}
        for name in MODEL_INPUTS:
            if name in inputs:
                value = inputs[name].to(loaded.device)
                # Processors return float32 pixels (the fast path: already the model's); the vision tower
                # runs in the model's dtype.
                model_inputs[name] = value.to(loaded.dtype) if name == "pixel_values" else value
        prompt_ids = model_inputs["input_ids"]
        clock = _TokenClock()
        max_new_tokens = min(request.max_new_tokens, self.max_new_tokens_cap)
        if loaded.device.type == "cuda":
            torch.cuda.synchronize(loaded.device)
        generate_started = time.perf_counter()
        with torch.inference_mode():
            output = loaded.model.generate(
                **model_inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                num_beams=1,
                eos_token_id=loaded.stop_token_ids or None,
                pad_token_id=loaded.pad_token_id,
                streamer=clock,
                stopping_criteria=StoppingCriteriaList([_StopWhenInterrupted()]),
            )
        if loaded.device.type == "cuda":
            torch.cuda.synchronize(loaded.device)
        generate_ended = time.perf_counter()

        if self._interrupted_at >= asked_at:
            raise GenerationInterrupted("generation was interrupted (the run was stopped)")
        sequence = getattr(output, "sequences", output)[0].to("cpu")
        prompt_row = prompt_ids[0].to("cpu")
        # Nemotron-VL's generate returns prompt + answer when given input_ids; other code returns the answer only.
        if sequence.shape[0] >= prompt_row.shape[0] and torch.equal(sequence[: prompt_row.shape[0]], prompt_row):
            sequence = sequence[prompt_row.shape[0] :]
        new_ids = tuple(int(t) for t in sequence.tolist())
        text = loaded.tokenizer.decode(list(new_ids), skip_special_tokens=True)
        first_token_at = clock.first_token_at or generate_ended
        timings = StepTimings(
            preprocess_s=generate_started - started,
            prefill_s=first_token_at - generate_started,
            decode_s=generate_ended - first_token_at,
            total_s=time.perf_counter() - started,
            tokens_in=int(prompt_row.shape[0]),
            tokens_out=len(new_ids),
        )
        return LocalGeneration(
            text=text,
            prompt_token_ids=tuple(int(t) for t in prompt_row.tolist()),
            new_token_ids=new_ids,
            timings=timings,
        )


def _render_prompt(processor: Any, request: ChatRequest) -> str:
    """The chat template applied to the request (the processor's template, else the tokenizer's)."""
    template_owner = processor if getattr(processor, "chat_template", None) else getattr(processor, "tokenizer", None)
    if template_owner is None or not getattr(template_owner, "chat_template", None):
        raise BackendError("the checkpoint has no chat template, so the request cannot be turned into a prompt")
    return template_owner.apply_chat_template(
        request.messages, tokenize=False, add_generation_prompt=True, **request.chat_template_kwargs
    )


def _processor_inputs(processor: Any, prompt: str, images: list[Image.Image]) -> Any:
    """The processor's tensors for one prompt and its images (the same call for generate and the probe)."""
    return processor(text=[prompt], images=images or None, return_tensors="pt")


def _stop_token_ids(tokenizer: Any) -> list[int]:
    """The tokenizer's EOS and the ChatML end-of-turn token: greedy decoding stops at either."""
    ids: list[int] = []
    if tokenizer.eos_token_id is not None:
        ids.append(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    ids.extend(int(vocab[token]) for token in CHAT_END_TOKENS if token in vocab and vocab[token] not in ids)
    return ids


def _accelerate_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("accelerate") is not None
