"""`holodesk doctor`'s model checks for the in-process backend: transformers' release, the GPU and its
kernels, the weights in the Hugging Face cache, and `--try`'s one real step through a profile.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from holodesk.app.cli.canned_screen import canned_screenshot
from holodesk.app.cli.doctor_report import CheckResult, DoctorOptions, Status, printable
from holodesk.inference.checkpoint import find_checkpoint
from holodesk.inference.engine.placement import DEFAULT_CONTEXT, free_memory
from holodesk.inference.engine.spec import read_spec, transformers_problem
from holodesk.inference.errors import InferenceError, ModelLoadError, ParseError
from holodesk.inference.hardware import MambaPath, detect_hardware
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.qwen35_memory import CheckpointLayoutError, plan_checkpoint

if TYPE_CHECKING:
    from holodesk.inference.checkpoint import CheckpointLocation


# The release the in-process engine is tested with (pyproject.toml's holotron extra pins it).
ENGINE_TRANSFORMERS = "5.19.0"


def check_transformers() -> CheckResult:
    """The in-process engine runs on transformers' native Nemotron-H, tested with ENGINE_TRANSFORMERS."""

    fix = f'pip install "transformers=={ENGINE_TRANSFORMERS}" (or: pip install ".[holotron]")'
    problem = transformers_problem()
    if problem is not None:
        return CheckResult("transformers", Status.FAIL, problem, fix=fix, blocking=True)
    version = importlib.metadata.version("transformers")
    if version != ENGINE_TRANSFORMERS:
        return CheckResult(
            "transformers",
            Status.WARN,
            f"{version} is not the release the in-process engine is tested with ({ENGINE_TRANSFORMERS})",
            fix=fix,
        )
    return CheckResult("transformers", Status.OK, version)


def check_gpu(options: DoctorOptions) -> Iterator[CheckResult]:
    """The local backend's torch, GPU and Mamba kernels (the other backends need none of them)."""

    wants_cuda = options.device == "cuda"
    report = detect_hardware()
    if report.torch.error:
        yield CheckResult(
            "torch",
            Status.FAIL,
            f"PyTorch is not usable: {report.torch.error}",
            fix='pip install ".[holotron]"',
            blocking=True,
        )
    else:
        yield CheckResult("torch", Status.OK, f"{report.torch.version} (CUDA {report.torch.cuda_version or 'none'})")
    if not report.devices:
        reason = report.cuda_error or "no NVIDIA GPU is visible to PyTorch"
        yield CheckResult(
            "cuda",
            Status.FAIL if wants_cuda else Status.INFO,
            f"no CUDA GPU on this machine ({reason})",
            fix="the local backend needs an NVIDIA GPU with about 32 GiB free (L40S / A100 class);"
            " without one, use a shared server: --backend remote --base-url URL"
            if wants_cuda
            else "",
            blocking=wants_cuda,
        )
    for device in report.devices:
        yield CheckResult(f"cuda:{device.index}", Status.OK, device.describe())
    for kernel in report.kernels:
        yield CheckResult(
            "kernel",
            Status.OK if kernel.importable else (Status.WARN if report.devices else Status.INFO),
            kernel.describe(),
            fix='pip install --no-build-isolation ".[cuda]"' if report.devices and not kernel.importable else "",
        )
    slow = report.path is MambaPath.SLOW_TORCH
    yield CheckResult("mamba path", Status.WARN if slow else Status.OK, report.verdict)
    if not report.torch.error and (options.device == "cpu" or not report.devices):
        yield check_cpu_paths()
    elif report.devices:
        yield check_gpu_paths()


def check_gpu_paths() -> CheckResult:
    """Which of the engine's GPU paths run for the Holo3.x and Holo4 models: the Gated DeltaNet's kernel."""
    # heavy: torch and Triton
    from holodesk.inference.engine.kernels import load_fla

    load = load_fla()
    graphs = "decoded tokens as one CUDA graph replay each"
    if load.loaded:
        return CheckResult(
            "gpu paths", Status.OK, f"Holo3 and Holo4 models here: flash-linear-attention's Triton delta rule; {graphs}"
        )
    return CheckResult(
        "gpu paths",
        Status.WARN,
        "Holo3 and Holo4 models here: transformers' PyTorch delta rule in prefill, about half the speed"
        f" (flash-linear-attention is not usable: {load.how}); {graphs}",
        fix='pip install "fla-core>=0.4" triton',
    )


def check_cpu_paths() -> CheckResult:
    """Which of the engine's CPU paths this CPU runs (the Holo3.x and Holo4 models on the CPU)."""
    # heavy: torch
    from holodesk.inference.engine.qwen35_cpu import bf16_products_available

    common = "decoded tokens on static buffers, prefill in 256-token chunks"
    if bf16_products_available():
        return CheckResult(
            "cpu paths",
            Status.OK,
            "Holo3 and Holo4 models here: bfloat16 products through oneDNN, the prefill's delta rule with them"
            f" (vLLM's CPU precision); {common}",
        )
    return CheckResult(
        "cpu paths",
        Status.INFO,
        "Holo3 and Holo4 models here: bfloat16 products through the stock GEMM and the prefill's delta rule in"
        " float32 (this CPU has neither avx512_bf16 nor AMX, so their steps run slower than on one that has"
        f" them); {common}",
    )


def check_model(options: DoctorOptions) -> Iterator[CheckResult]:
    """The weights, the engine's reading of their config, and where they would load, all before loading anything."""
    # looked up when called: tests replace it at its source; heavy: torch
    from holodesk.inference.engine.placement import available_memory_bytes, flash_attention_available, place
    from holodesk.inference.engine.qwen35 import is_qwen35

    try:
        found = find_checkpoint(options.model)
        if is_qwen35(found.path):
            yield from _check_qwen35_model(found, options)
            return
        spec = read_spec(found.path)
    except ModelLoadError as exc:
        yield CheckResult("weights", Status.FAIL, str(exc), blocking=True)
        return
    yield CheckResult("weights", Status.OK, found.describe())
    try:
        placement = place(
            spec,
            options.device,
            None,
            detect_hardware(),
            flash_available=flash_attention_available(),
            cpu_available=available_memory_bytes(),
        )
    except ModelLoadError as exc:
        yield CheckResult("load plan", Status.FAIL, str(exc), blocking=True)
        return
    yield CheckResult(
        "load plan", Status.WARN if placement.notice else Status.OK, placement.describe(), fix=placement.notice or ""
    )
    if options.try_step:
        yield try_one_step(str(found.path), options.device)


def _check_qwen35_model(found: CheckpointLocation, options: DoctorOptions) -> Iterator[CheckResult]:
    """A Qwen3.5 checkpoint (Holo3, Holo3.1, Holo4) for the in-process engine: its memory plan against
    what is free (from its headers, before loading), and with --try one step through the profile."""
    # heavy: torch
    from holodesk.inference.engine.qwen35 import PROFILES

    yield CheckResult("weights", Status.OK, f"{found.describe()}; a Qwen3.5 checkpoint (Holo3, Holo3.1, Holo4)")
    if options.profile not in PROFILES:
        yield CheckResult(
            "profile",
            Status.FAIL,
            f"the {options.profile} profile does not speak this checkpoint's format",
            fix=f"choose one of {', '.join(PROFILES)} (--profile or the settings file's model.profile)",
            blocking=True,
        )
        return
    try:
        plan = plan_checkpoint(found.path)
    except (CheckpointLayoutError, OSError, ValueError) as exc:
        yield CheckResult("load plan", Status.FAIL, f"cannot read the layout of {found.path}: {exc}", blocking=True)
        return
    needed = plan.total(DEFAULT_CONTEXT)
    try:
        room, where = free_memory(options.device, detect_hardware)
    except ModelLoadError as exc:
        yield CheckResult("load plan", Status.FAIL, str(exc), blocking=True)
        return
    if room is not None and needed > room:
        yield CheckResult(
            "load plan",
            Status.FAIL,
            f"needs {plan.describe(DEFAULT_CONTEXT)}, but {where} has {room / 2**30:.1f} GiB free",
            fix="a smaller Holo model, another device, or a vLLM server (--backend remote)",
            blocking=True,
        )
        return
    yield CheckResult("load plan", Status.OK, f"{plan.describe(DEFAULT_CONTEXT)} on {options.device}")
    if options.try_step:
        yield try_local_profile_step(str(found.path), options.device, options.profile)


def try_local_profile_step(model: str, device: str, profile_name: str) -> CheckResult:
    """Load a checkpoint in the in-process backend and propose one step on the canned screenshot through
    `profile_name` (never acted on): the proposal, or why there is none, in words."""
    # looked up when called: tests replace it at its source
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(model, device=device, profile=profile_name)
    try:
        started = time.perf_counter()
        backend.load()
        loaded_in = time.perf_counter() - started
        proposal = ModelPolicy(get_profile(profile_name), backend).propose(
            "Archive the first unread email.",
            [],
            [canned_screenshot()],
        )
    except ParseError as exc:
        return CheckResult(  # blocking: a model whose answers do not parse cannot run a task
            "try",
            Status.FAIL,
            f"loaded in {loaded_in:.1f} s; the model answered, but the answer did not parse: {printable(str(exc))}",
            fix=f"check that the checkpoint is an H Company model for the {profile_name} profile",
            blocking=True,
        )
    except InferenceError as exc:
        return CheckResult("try", Status.FAIL, printable(str(exc), limit=400), blocking=True)
    finally:
        backend.unload()
    timings = proposal.timings
    spent = f"{timings.total_s:.1f} s, {timings.tokens_in} tokens in, {timings.tokens_out} out"
    return CheckResult(
        "try",
        Status.OK,
        f"loaded in {loaded_in:.1f} s (in-process engine); one step ({spent}) proposed:"
        f" {printable(proposal.action.describe())}",
    )


def try_one_step(model: str, device: str) -> CheckResult:
    """Load the model in the in-process backend and run the engine's first contact on a canned screenshot.

    One holotron step is proposed (never acted on); the report says whether the answer is degenerate,
    prefill tokens/s, decode ms/token, peak memory and the kernels in use.
    """
    # heavy: torch; looked up when called: tests replace it at its source
    from holodesk.inference.engine.check import contact_request, first_contact
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(model, device=device)
    try:
        started = time.perf_counter()
        backend.load()
        loaded_in = time.perf_counter() - started
        report = first_contact(backend.engine, contact_request(canned_screenshot()))
    except InferenceError as exc:
        return CheckResult("try", Status.FAIL, printable(str(exc), limit=400), blocking=True)
    finally:
        backend.unload()
    detail = f"loaded in {loaded_in:.1f} s (in-process engine); " + "; ".join(report.lines())
    if report.problem:
        return CheckResult(
            "try",
            Status.FAIL,
            printable(detail, limit=800),
            fix="a degenerate answer on the real weights means the engine is broken here: report it",
            blocking=True,
        )
    return CheckResult("try", Status.OK, printable(detail, limit=800))
