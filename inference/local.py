"""The in-process backend: Holotron-12B (a Nemotron-Nano-VL-v2 checkpoint) run here by Holodesk's own engine.

Holotron-3-Nano (a Nemotron-3-Nano-Omni checkpoint, architecture `NemotronH_Nano_Omni_Reasoning_V3`)
runs on the same engine (`engine.runner.Engine`: Nemotron-H with its mixture-of-experts layers, its
images resized whole by `engine.omni_images`) with the holotron3-nano profile.

The checkpoint is found offline (a local directory or the local Hugging Face cache, never the
network: `inference.checkpoint`), placed before any weight is read (`engine.placement`: device,
dtype, attention, the engine's memory plan against free memory), then loaded once by
`engine.runner.Engine` on a worker thread that reports progress. `generate` serves one request at
a time through the engine's own generation loop: greedy decoding that stops on the checkpoint's own
end-of-turn tokens and can be interrupted between prefill chunks and between tokens. No code from the
checkpoint runs.

State is kept across steps (`keep_state`, on by default): the engine keeps the cache at the end of
the last conversation and at the start of the oldest screenshot's turn, so a step whose prompt
extends the previous one, or whose window slid by one screenshot, prefills only what changed.

A checkpoint whose config.json says `model_type` qwen3_5 or qwen3_5_moe (H Company's Holo3, Holo3.1,
Holo4) goes to that family's engine (`engine.qwen35`, the same loop and kept state) instead; its
memory check is its weights against the free memory (the engine's memory plan is Holotron's).
Given the profile's name, a checkpoint of another family than the profile's is refused before a weight is read.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from holodesk.inference.checkpoint import CheckpointLocation, find_checkpoint
from holodesk.inference.engine.placement import (
    DEFAULT_CONTEXT,
    DEFAULT_PREFILL_CHUNK,
    Placement,
    available_memory_bytes,
    check_dtype,
    flash_attention_available,
    free_memory,
    normalize_device,
    place,
)
from holodesk.inference.engine.spec import OMNI_ARCHITECTURE, is_architecture, read_spec
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.generation import Generation
from holodesk.inference.hardware import HardwareReport, detect_hardware, gib
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest, ImageBudget
from holodesk.inference.qwen35_memory import CheckpointLayoutError, plan_checkpoint

if TYPE_CHECKING:
    from holodesk.inference.engine.runner import Engine, EngineResult

logger = logging.getLogger(__name__)

__all__ = ["GenerationInterrupted", "LoadProgress", "LocalBackend", "LocalGeneration", "block_window"]


def block_window(budget: ImageBudget) -> ImageBudget:
    """A screenshot window whose old screenshots leave in one block: an option, not the default.

    The default is the trained window (`drop_block` 1): the last `keep_screenshots` screenshots, older
    ones as the profile's placeholder text, as H Company's agent loop and the remote backend show them.
    The engine then resumes from the turn of the oldest screenshot still shown and prefills the last
    `keep_screenshots` observations again each step. With `drop_block` = `keep_screenshots` the prompt
    grows only at its end until the window is full, so the kept state serves every step but one in
    `keep_screenshots`; the price is that the model sees 1 to `keep_screenshots` screenshots, a
    history it was not trained on.
    """
    return dataclasses.replace(budget, drop_block=budget.keep_screenshots)


class ModelEngine(Protocol):
    """A model family's generation engine (`runner.Engine`, `qwen35.Qwen35Engine`): what the backend asks of it.

    Not the step loop (`automation.engine.StepEngine`), which proposes, approves and performs actions.
    """

    def generate(
        self,
        request: ChatRequest,
        *,
        max_new_tokens: int | None = None,
        on_token: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        top_logprobs: int = 0,
        ignore_stop: bool = False,
    ) -> EngineResult: ...

    def forget(self) -> None: ...


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
    """A generation with its token ids and prefill work, for callers (benchmarks, tests) that need more than text.

    `new_token_ids` ends with the stop token when the answer ended on one; `reused_tokens` of the prompt
    came from the state kept since the last step and `prefilled_tokens` went through the model.
    """

    text: str
    prompt_token_ids: tuple[int, ...]
    new_token_ids: tuple[int, ...]
    timings: StepTimings
    prefilled_tokens: int
    reused_tokens: int

    @property
    def generation(self) -> Generation:
        return Generation(text=self.text, timings=self.timings)


class LocalBackend:
    """Runs a checkpoint in this process. Load once with `load_async()`, then call `generate`.

    `checkpoint` is a directory or a Hugging Face repo id found in the local cache (default
    Holotron-12B). `device` is "cuda", "cuda:N" or "cpu"; `dtype` defaults to the checkpoint's own
    (bfloat16 for Holotron-12B). `max_tiles` is the profile's `ImageBudget.max_tiles`. Decoding is
    greedy; `ChatRequest.response_schema` is not enforced here (the profile's parser is the check), and
    `max_new_tokens` is capped at `max_new_tokens_cap`. `context` is the prompt length the memory check
    makes room for; `keep_state` keeps the conversation's cache between steps (see the module docstring).
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
        keep_state: bool = True,
        context: int = DEFAULT_CONTEXT,
        prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
        profile: str | None = None,
    ) -> None:
        if max_tiles < 1:
            raise ValueError(f"max_tiles must be at least 1, got {max_tiles}")
        check_dtype(dtype)
        self.checkpoint_spec = checkpoint
        self.device_name = normalize_device(device)
        self.dtype_name = dtype
        self.max_tiles = max_tiles
        self.max_new_tokens_cap = max_new_tokens_cap
        self.cache_dir = cache_dir
        self.revision = revision
        self.hardware_probe = hardware_probe
        self.load_wait_s = load_wait_s
        self.keep_state = keep_state
        self.context = context
        self.prefill_chunk = prefill_chunk
        self.profile = profile
        # Filled in by loading; read by doctor and the settings page.
        self.checkpoint: CheckpointLocation | None = None
        self.placement: Placement | None = None
        # What the user should know about the loaded model's speed or setup; None if nothing.
        self.load_notice: str | None = None
        self.load_seconds: float | None = None
        self._engine: Engine | None = None  # Holotron's, for doctor and the benchmarks
        self._runner: ModelEngine | None = None  # whichever family's engine generates
        self._load_future: Future[None] | None = None
        self._state_lock = threading.Lock()
        self._generate_lock = threading.Lock()
        # interrupt() stamps this; a generation asked for before the stamp stops at its next prefill chunk
        # or token.
        self._interrupted_at = float("-inf")

    # -- loading ---------------------------------------------------------------------------------

    @property
    def is_loaded(self) -> bool:
        return self._runner is not None

    @property
    def engine(self) -> Engine:
        """The loaded Holotron engine (for doctor and benchmarks); BackendError before loading."""
        if self._engine is None:
            if self._runner is not None:
                raise BackendError("The local model is a Qwen3.5 checkpoint: it has no Holotron engine.")
            raise BackendError("The local model is not loaded.")
        return self._engine

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
        except Exception as exc:  # anything from transformers, safetensors or torch
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
        # heavy: torch
        from holodesk.inference.engine.qwen35 import PROFILES as QWEN35_PROFILES
        from holodesk.inference.engine.qwen35 import is_qwen35

        if is_qwen35(checkpoint.path):
            self._check_profile(QWEN35_PROFILES, "a Qwen3.5 (Holo3, Holo3.1, Holo4)", checkpoint)
            self._load_qwen35(checkpoint, report, started)
            return

        if is_architecture(checkpoint.path, OMNI_ARCHITECTURE):
            self._check_profile(("holotron3-nano",), "a Holotron-3-Nano (Nemotron-3-Nano-Omni)", checkpoint)
        else:
            self._check_profile(("holotron",), "a Holotron-12B (Nemotron-Nano-VL-v2)", checkpoint)

        spec = read_spec(checkpoint.path)
        placement = place(
            spec,
            self.device_name,
            self.dtype_name,
            self.hardware_probe(),
            context=self.context,
            prefill_chunk=self.prefill_chunk,
            keep_state=self.keep_state,
            max_tiles=self.max_tiles,
            flash_available=flash_attention_available(),
            cpu_available=available_memory_bytes() if self.device_name == "cpu" else None,
        )
        self.placement = placement

        report(
            "weights",
            0.1,
            f"Loading {gib(placement.memory.weights)} of weights as {placement.dtype} on {placement.device}"
            f" with {placement.attention} attention",
        )
        import torch

        # heavy: torch
        from holodesk.inference.engine.runner import Engine

        try:
            engine = Engine(
                checkpoint.path,
                device=placement.device,
                dtype=placement.dtype,
                max_tiles=self.max_tiles,
                reuse=self.keep_state,
                prefill_chunk=self.prefill_chunk,
                attention=placement.attention,
                context=self.context,
            )
        except torch.cuda.OutOfMemoryError as exc:
            raise ModelLoadError(
                f"The GPU ran out of memory while loading ({exc}). Close other programs using {placement.device}"
                " or use the remote backend."
            ) from exc
        self.load_notice = placement.notice
        if placement.notice:
            logger.warning("%s", placement.notice)
        self._engine = engine
        self._runner = engine
        self.load_seconds = time.perf_counter() - started
        report("ready", 1.0, f"Model ready on {placement.device} in {self.load_seconds:.1f} s")

    def _check_profile(self, profiles: tuple[str, ...], family: str, checkpoint: CheckpointLocation) -> None:
        if self.profile is not None and self.profile not in profiles:
            raise ModelLoadError(
                f"{checkpoint.describe()} is {family} checkpoint: the in-process engine runs it with the"
                f" {' or '.join(profiles)} profile, not {self.profile}; choose that profile, or a checkpoint"
                f" for the {self.profile} profile"
            )

    def _load_qwen35(
        self, checkpoint: CheckpointLocation, report: Callable[[str, float, str], None], started: float
    ) -> None:
        # heavy: torch
        from holodesk.inference.engine.qwen35 import Qwen35Engine, checkpoint_dtype

        dtype = self.dtype_name or checkpoint_dtype(checkpoint.path)
        try:
            plan = plan_checkpoint(checkpoint.path, dtype=dtype)
        except (CheckpointLayoutError, OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot read the layout of {checkpoint.path}: {exc}") from exc
        needed = plan.total(self.context)
        room, where = free_memory(self.device_name, self.hardware_probe)
        if room is not None and needed > room:
            raise ModelLoadError(
                f"The model needs about {gib(needed)} as {dtype} ({plan.describe(self.context)}) but {where} has"
                f" {gib(room)} free: use a smaller model, another device, or the remote (vLLM) backend."
            )
        report("weights", 0.1, f"Loading {gib(plan.weights)} of weights as {dtype} on {self.device_name}")
        engine = Qwen35Engine(
            checkpoint.path,
            device=self.device_name,
            dtype=dtype,
            reuse=self.keep_state,
            prefill_chunk=self.prefill_chunk,
        )
        if self.device_name == "cpu":
            self.load_notice = "The model runs on the CPU: PyTorch's Gated DeltaNet scan and attention, no GPU kernels."
        self._runner = engine
        self.load_seconds = time.perf_counter() - started
        report("ready", 1.0, f"Model ready on {self.device_name} in {self.load_seconds:.1f} s")

    def unload(self) -> None:
        """Drop the model and free its memory; a later `load_async` loads it again."""
        with self._generate_lock, self._state_lock:
            if self._load_future is not None and not self._load_future.done():
                raise BackendError("the model is still loading; wait for it before unloading")
            self._engine = None
            self._runner = None
            self._load_future = None
        gc.collect()
        try:
            import torch
        except ImportError:  # nothing was loaded without torch: nothing to free
            return
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def forget(self) -> None:
        """Drop the state kept from earlier steps (a new task starts): the next step prefills everything."""
        with self._generate_lock:
            if self._runner is not None:
                self._runner.forget()

    def _require_loaded(self) -> ModelEngine:
        future = self._load_future
        if future is None:
            raise BackendError("The local model is not loaded: start loading it with load_async() (or load()) first.")
        if not future.done():
            logger.info("generate is waiting for the model to finish loading")
        try:
            future.result(timeout=self.load_wait_s)
        except TimeoutError:
            raise BackendError(f"The local model is still loading after {self.load_wait_s:.0f} s.") from None
        engine = self._runner
        if engine is None:
            raise BackendError("The local model was unloaded: load it again before generating.")
        return engine

    # -- generation ------------------------------------------------------------------------------

    def generate(self, request: ChatRequest) -> Generation:
        return self.generate_detailed(request).generation

    def generate_detailed(self, request: ChatRequest) -> LocalGeneration:
        """Run one request greedily; one at a time (callers on other threads wait their turn)."""
        asked = time.monotonic()
        engine = self._require_loaded()
        if request.max_new_tokens < 1:
            raise BackendError(f"max_new_tokens must be at least 1, got {request.max_new_tokens}")
        # heavy: torch
        from holodesk.inference.engine.kept_state import GenerationCancelled

        with self._generate_lock:
            try:
                result = engine.generate(
                    request,
                    max_new_tokens=min(request.max_new_tokens, self.max_new_tokens_cap),
                    cancelled=lambda: self._interrupted_at >= asked,
                )
            except GenerationCancelled:
                raise GenerationInterrupted("generation was interrupted (the run was stopped)") from None
            except (BackendError, ModelLoadError):
                raise
            except Exception as exc:  # anything from transformers or torch: said as a BackendError
                raise BackendError(f"Local generation failed: {type(exc).__name__}: {exc}") from exc
        return LocalGeneration(
            text=result.text,
            prompt_token_ids=result.prompt_ids,
            new_token_ids=result.new_ids,
            timings=result.timings,
            prefilled_tokens=result.prefilled_tokens,
            reused_tokens=result.reused_tokens,
        )

    def interrupt(self) -> None:
        """Stop the generation in progress (and any already waiting for its turn) at its next prefill chunk
        or token.

        Called from another thread when the user stops a run: the GPU is freed within one decode
        step instead of finishing an answer nobody will read. Later requests are not affected.
        """
        self._interrupted_at = time.monotonic()
