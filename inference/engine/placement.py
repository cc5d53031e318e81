"""Where and how the engine will load a checkpoint, decided before any weight is read.

Device ("cuda", "cuda:N" or "cpu"), dtype (the checkpoint's own unless asked otherwise), attention
(flash-attention on CUDA when it imports, else PyTorch's sdpa) and whether it fits: the engine's
memory plan (`memory.plan_memory`: weights from the safetensors headers, the hybrid cache for the
context, the prefill and vision peaks) against the GPU's free memory, or the machine's available
memory on the CPU. What cannot work is refused with a ModelLoadError in words and numbers; what
works but slowly (no Mamba kernels on CUDA, bfloat16 before Ampere, any run on the CPU) becomes the
plan's notice. Imports neither torch nor transformers.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holodesk.inference.engine.memory import MemoryPlan, plan_memory
from holodesk.inference.engine.spec import ModelSpec
from holodesk.inference.errors import ModelLoadError
from holodesk.inference.hardware import HardwareReport, MambaPath, gib

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
KERNEL_INSTALL = 'pip install --no-build-isolation "holodesk[cuda]"'
# What the prompt of a step can reach: three screenshots of 13 tiles (3 x 3,328 image tokens) and
# the history's text, with room to spare.
DEFAULT_CONTEXT = 16384
DEFAULT_PREFILL_CHUNK = 2048


@dataclass(frozen=True, slots=True)
class Placement:
    """The decided load: device, dtype, attention, the memory it needs, what the user should know."""

    device: str
    dtype: str
    attention: str
    mamba_path: MambaPath
    memory: MemoryPlan
    # Bytes the device has for it (the GPU's free memory, the CPU's available memory); None if unknown.
    available_bytes: int | None
    notice: str | None

    def describe(self) -> str:
        room = f" of {gib(self.available_bytes)} available" if self.available_bytes is not None else ""
        return (
            f"{self.dtype} on {self.device}, {self.attention} attention, Mamba: {self.mamba_path.value};"
            f" memory: {self.memory.describe()}{room}"
        )


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


def check_dtype(dtype: str | None) -> None:
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise ModelLoadError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")


def flash_attention_available() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The kernel's MemAvailable (what can be allocated without swapping); None where it does not say."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def free_memory(device: str, probe: Callable[[], HardwareReport]) -> tuple[int | None, str]:
    """What a model loaded on `device` can take, and the words for where: the machine's available memory
    on the CPU (None when unknown), the GPU's free memory on CUDA (`probe` is asked only then); a
    ModelLoadError when there is no such GPU."""
    device = normalize_device(device)
    if device == "cpu":
        return available_memory_bytes(), "this machine's memory"
    gpu = probe().device(int(device.split(":")[1]))
    if gpu is None:
        raise ModelLoadError(f"There is no {device} to load the model on; use device 'cpu'.")
    return gpu.free_bytes, gpu.label


def place(
    spec: ModelSpec,
    device: str,
    dtype: str | None,
    report: HardwareReport,
    *,
    context: int = DEFAULT_CONTEXT,
    prefill_chunk: int = DEFAULT_PREFILL_CHUNK,
    keep_state: bool = True,
    max_tiles: int = 12,
    flash_available: bool = False,
    cpu_available: int | None = None,
) -> Placement:
    """Check device, dtype and memory for `spec`; refuse clearly what cannot work."""
    device = normalize_device(device)
    check_dtype(dtype)
    chosen = dtype or (spec.dtype if spec.dtype in DTYPE_BYTES else "bfloat16")
    memory = plan_memory(
        spec,
        dtype_bytes=DTYPE_BYTES[chosen],
        context=context,
        prefill_chunk=prefill_chunk,
        keep_state=keep_state,
        max_tiles=max_tiles,
    )
    if device == "cpu":
        notice = (
            "The model runs on the CPU: PyTorch's Mamba scan and attention, no GPU kernels. A tiny checkpoint"
            " answers in seconds; Holotron-12B would take minutes a step. Use a CUDA GPU or the remote backend."
        )
        if cpu_available is not None and memory.total > cpu_available:
            raise ModelLoadError(
                f"The model does not fit in this machine's memory: it needs about {gib(memory.total)}"
                f" ({memory.describe()}) but only {gib(cpu_available)} is available."
                " Use a CUDA GPU or the remote (vLLM) backend."
            )
        return Placement(device, chosen, "sdpa", MambaPath.CPU, memory, cpu_available, notice)

    if report.torch.error is not None:
        raise ModelLoadError(f"torch cannot be imported ({report.torch.error}); install holodesk[holotron]")
    gpu = report.device(int(device.split(":")[1]))
    if gpu is None:
        if not report.devices:
            why = report.cuda_error or (
                f"torch {report.torch.version} was built without CUDA"
                if report.torch.cuda_version is None
                else "no CUDA device is visible (driver missing or CUDA_VISIBLE_DEVICES empty)"
            )
            raise ModelLoadError(
                f"No CUDA GPU to load the model on: {why}. The model needs about {gib(memory.total)} on a CUDA"
                " GPU; use the remote backend otherwise."
            )
        raise ModelLoadError(f"There is no {device}; this machine has {', '.join(d.label for d in report.devices)}.")
    if memory.total > gpu.free_bytes:
        raise ModelLoadError(
            f"The model does not fit on {gpu.label}: it needs about {gib(memory.total)} ({memory.describe()})"
            f" but only {gib(gpu.free_bytes)} of {gib(gpu.total_bytes)} is free. Close other programs using the"
            " GPU, pick a GPU with more memory, or use the remote (vLLM) backend."
        )
    notices = []
    if chosen == "bfloat16" and gpu.capability < (8, 0):
        notices.append(f"{gpu.label} predates Ampere: bfloat16 runs emulated there and will be slow.")
    if report.path is MambaPath.SLOW_TORCH:
        broken = "; ".join(k.describe() for k in report.kernels if not k.importable) or "kernels missing"
        notices.append(
            f"The Mamba kernels are not usable ({broken}): the Mamba layers run transformers' PyTorch scan on the"
            f" GPU (slower). Install them with: {KERNEL_INSTALL}"
        )
    attention = "flash_attention_2" if flash_available else "sdpa"
    return Placement(device, chosen, attention, report.path, memory, gpu.free_bytes, " ".join(notices) or None)
