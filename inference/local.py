"""The in-process backend: run Holotron-12B (or any Nemotron-VL-style checkpoint) with transformers here.

The checkpoint's own Python code is loaded with `trust_remote_code=True` from a local directory or
the local Hugging Face cache, never from the network. Loading is slow (tens of seconds for 25 GB),
so it runs once, on a worker thread, reporting progress; `generate` then serves one request at a
time on the loaded model. Before loading, the backend checks that the weights fit in the GPU's
free memory and says which Mamba path (fast kernels or slow fallback) will run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.checkpoint import CheckpointLocation, find_checkpoint, saved_dtype_bytes
from inference.errors import BackendError, ModelLoadError
from inference.generation import Generation
from inference.hardware import GIB, HardwareReport, MambaPath, detect_hardware, gib
from inference.policy import StepTimings
from inference.profiles.base import ChatRequest, ImageBudget

logger = logging.getLogger(__name__)

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Attribute names image processors use for their tile limit: Nemotron-Nano-VL's first, then InternVL's.
TILE_LIMIT_ATTRIBUTES = ("max_num_tiles", "max_dynamic_patch", "max_tiles")
# Processor outputs the model's generate takes; others (num_patches, image_flags) are bookkeeping
# that Nemotron-VL's generate would pass on to the language model, which rejects unknown kwargs.
MODEL_INPUTS = ("input_ids", "attention_mask", "pixel_values")
CHAT_END_TOKENS = ("<|im_end|>",)


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


class LocalBackend:
    """Runs a checkpoint in this process. Load once with `load_async()`, then call `generate`.

    `checkpoint` is a directory or a Hugging Face repo id found in the local cache (default
    Holotron-12B). `device` is "cuda", "cuda:N" or "cpu"; `dtype` defaults to bfloat16, on the GPU
    and the CPU alike; "float32" (or "float16") must be asked for. `max_tiles` is the profile's
    `ImageBudget.max_tiles`. Decoding is greedy; `ChatRequest.response_schema` is not enforced here
    (the profile's parser is the check), and `max_new_tokens` is capped at `max_new_tokens_cap`.
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
        # Filled in by loading; read by doctor and the settings page.
        self.checkpoint: CheckpointLocation | None = None
        self.plan: LoadPlan | None = None
        self.slow_path_warning: str | None = None
        self.load_seconds: float | None = None
        self._loaded: _Loaded | None = None
        self._load_future: Future[None] | None = None
        self._state_lock = threading.Lock()
        self._generate_lock = threading.Lock()

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

        report("weights", 0.2, f"Loading {gib(checkpoint.weight_bytes)} of weights as {plan.dtype} on {plan.device}")
        dtype = getattr(torch, plan.dtype)
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
        )
        self.load_seconds = time.perf_counter() - started
        report("ready", 1.0, f"Model ready on {plan.device} in {self.load_seconds:.1f} s")

    def unload(self) -> None:
        """Drop the model and free its memory; a later `load_async` loads it again."""
        with self._generate_lock, self._state_lock:
            if self._load_future is not None and not self._load_future.done():
                raise BackendError("the model is still loading; wait for it before unloading")
            self._loaded = None
            self._load_future = None
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

    def generate(self, request: ChatRequest) -> Generation:
        return self.generate_detailed(request).generation

    def generate_detailed(self, request: ChatRequest) -> LocalGeneration:
        """Run one request greedily; one at a time (callers on other threads wait their turn)."""
        loaded = self._require_loaded()
        with self._generate_lock:
            try:
                return self._generate(loaded, request)
            except (BackendError, ModelLoadError):
                raise
            except Exception as exc:
                raise BackendError(f"Local generation failed: {type(exc).__name__}: {exc}") from exc

    def _generate(self, loaded: _Loaded, request: ChatRequest) -> LocalGeneration:
        import torch

        if request.max_new_tokens < 1:
            raise BackendError(f"max_new_tokens must be at least 1, got {request.max_new_tokens}")
        started = time.perf_counter()
        prompt = _render_prompt(loaded.processor, request)
        inputs = loaded.processor(text=[prompt], images=list(request.images) or None, return_tensors="pt")
        model_inputs: dict[str, Any] = {}
        for name in MODEL_INPUTS:
            if name in inputs:
                value = inputs[name].to(loaded.device)
                # Processors return float32 pixels; the vision tower runs in the model's dtype.
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
            )
        if loaded.device.type == "cuda":
            torch.cuda.synchronize(loaded.device)
        generate_ended = time.perf_counter()

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
