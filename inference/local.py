"""The in-process backend: run Holotron-12B (or any Nemotron-VL-style checkpoint) with transformers here.

The checkpoint's own Python code is loaded with `trust_remote_code=True` from a local directory or
the local Hugging Face cache, never from the network. Loading is slow (tens of seconds for 25 GB),
so it runs once, on a worker thread, reporting progress; `generate` then serves one request at a
time on the loaded model. What is decided before loading (device, bf16, attention, kernels, memory)
is `inference.load_plan`'s; the processor, the prompt and the fast tiling are
`inference.processor_adapter`'s. Decoding stops on the checkpoint's own end-of-turn tokens, read
from its generation config and tokenizer.
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

from holodesk.inference.checkpoint import CheckpointLocation, find_checkpoint
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.generation import Generation
from holodesk.inference.hardware import HardwareReport, MambaPath, detect_hardware, gib
from holodesk.inference.load_plan import (
    DTYPE_BYTES,
    LoadPlan,
    attention_config,
    flash_attention_available,
    import_errors,
    mamba_rmsnorm_error,
    normalize_device,
    plan_load,
    read_checkpoint_facts,
)
from holodesk.inference.policy import StepTimings
from holodesk.inference.processor_adapter import (
    FastImageProcessor,
    compare_tiling,
    load_processor,
    processor_inputs,
    render_prompt,
    set_tile_limit,
)
from holodesk.inference.profiles.base import ChatRequest, ImageBudget

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

__all__ = [
    "FastImageProcessor",
    "GenerationInterrupted",
    "LoadPlan",
    "LoadProgress",
    "LocalBackend",
    "LocalGeneration",
    "kernels_in_use",
    "plan_load",
]

# Processor outputs the model's generate takes; others (num_patches, image_flags, token_type_ids) are
# bookkeeping that Nemotron-VL's generate would pass on to the language model, which rejects them.
MODEL_INPUTS = ("input_ids", "attention_mask", "pixel_values")


class GenerationInterrupted(BackendError):
    """interrupt() stopped this generation part-way; there is no answer."""


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """One step of loading: `stage` names it, `fraction` (0..1) says how far along, `message` is for people."""

    stage: str
    fraction: float
    message: str


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
    On CUDA the fast tiler uploads each uint8 image and makes the tiles on the GPU; `tiling_device`
    overrides where ("cpu" runs that same device path on the CPU, which is how tests hold it).
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
        tiling_device: str | None = None,
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
        # Where the fast tiler makes the tiles: None = the model's device when it is CUDA (the uint8 frame is
        # uploaded and tiled there), else the CPU kernel; "cpu" runs the device path on the CPU (tests).
        self.tiling_device = tiling_device
        # Filled in by loading; read by doctor and the settings page.
        self.checkpoint: CheckpointLocation | None = None
        self.plan: LoadPlan | None = None
        # What the user should know about the loaded model's speed or setup; None if nothing.
        self.load_notice: str | None = None
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
        facts = read_checkpoint_facts(checkpoint.path)
        plan = plan_load(
            checkpoint,
            self.device_name,
            self.dtype_name,
            self.hardware_probe(),
            facts=facts,
            mamba_error=mamba_rmsnorm_error() if facts.nemotron_vl else None,
            flash_available=flash_attention_available(),
            import_error=import_errors() if facts.nemotron_vl else None,
        )
        self.plan = plan

        report("processor", 0.1, "Loading the processor (tokenizer, image tiling, chat template)")
        import torch
        import transformers

        processor = load_processor(checkpoint.path)
        if set_tile_limit(processor, self.max_tiles) is None:
            logger.warning("the image processor has no tile limit attribute: max_tiles=%d is ignored", self.max_tiles)
        tokenizer = getattr(processor, "tokenizer", processor)
        dtype = getattr(torch, plan.dtype)

        report("tiling", 0.15, "Checking the fast image tiling against the processor's")
        fast_processor, adapter = self._choose_tiling(processor, dtype)

        report(
            "weights",
            0.2,
            f"Loading {gib(checkpoint.weight_bytes)} of weights as {plan.dtype} on {plan.device}"
            f" with {plan.attention} attention",
        )
        auto_class = getattr(transformers, _model_auto_class(checkpoint.path))
        config = transformers.AutoConfig.from_pretrained(checkpoint.path, trust_remote_code=True, local_files_only=True)
        load_kwargs: dict[str, Any] = {
            "config": attention_config(config, plan.attention),
            "attn_implementation": plan.attention,
            "torch_dtype": dtype,
            "trust_remote_code": True,
            "local_files_only": True,
        }
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
        notice = plan.notice
        if plan.mamba_path is MambaPath.FAST_CUDA and in_use is False:
            notice = (
                "mamba-ssm and causal-conv1d import here, but the checkpoint's Mamba layers did not pick them up:"
                " their PyTorch scan runs on the GPU (slower)."
            )
        self.load_notice = notice
        if notice:
            logger.warning("%s", notice)

        stop_ids = stop_token_ids(checkpoint.path, tokenizer, getattr(model, "generation_config", None))
        if not stop_ids:
            raise ModelLoadError(
                f"{checkpoint.path} names no end-of-turn token (generation_config.json eos_token_id or the"
                " tokenizer's eos_token): generation would never stop"
            )
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
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
                adapter = FastImageProcessor(stock, dtype, device=self._tiling_device())
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

    def _tiling_device(self) -> str | None:
        if self.tiling_device is not None:
            return normalize_device(self.tiling_device)
        return self.device_name if self.device_name.startswith("cuda") else None

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

        asked: float = time.monotonic() if asked_at is None else asked_at
        backend = self

        class _StopWhenInterrupted(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                stop = backend._interrupted_at >= asked
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device)

        if request.max_new_tokens < 1:
            raise BackendError(f"max_new_tokens must be at least 1, got {request.max_new_tokens}")
        started = time.perf_counter()
        prompt = render_prompt(loaded.processor, request)
        processor = loaded.processor if loaded.fast_processor is None else loaded.fast_processor
        inputs = processor_inputs(processor, prompt, list(request.images))
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

        if self._interrupted_at >= asked:
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


def stop_token_ids(path: Path, tokenizer: Any, generation_config: Any = None) -> list[int]:
    """The checkpoint's own end tokens: generation_config.json's eos_token_id(s), then the tokenizer's EOS.

    Nemotron-Nano-v2 ends a turn with `<SPECIAL_12>`; whatever it is, it is read from the checkpoint,
    never assumed (a ChatML `<|im_end|>` would never come and the model would talk to the token limit).
    """
    ids: list[int] = []

    def add(value: Any) -> None:
        values = value if isinstance(value, list | tuple) else [value]
        ids.extend(int(v) for v in values if isinstance(v, int) and not isinstance(v, bool) and int(v) not in ids)

    saved = path / "generation_config.json"
    if saved.is_file():
        try:
            add(json.loads(saved.read_text(encoding="utf-8")).get("eos_token_id"))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot read {saved}: {exc}") from exc
    if generation_config is not None:
        add(getattr(generation_config, "eos_token_id", None))
    add(getattr(tokenizer, "eos_token_id", None))
    return ids


def _accelerate_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("accelerate") is not None
