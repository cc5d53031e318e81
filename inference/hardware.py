"""What this machine can run the model on: CUDA devices with their memory, and the Mamba kernels.

Used by `holodesk doctor` and by the in-process backend before it loads weights. Importing this
module imports neither torch nor the kernels: every probe imports what it needs when called, so
the command line starts fast and a broken CUDA install shows up as a report, not a crash.
"""

from __future__ import annotations

import enum
import importlib
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass

GIB = 1024**3


def gib(num_bytes: int | float) -> str:
    """Bytes as GiB with one decimal, the unit every memory message uses."""
    return f"{num_bytes / GIB:.1f} GiB"


@dataclass(frozen=True, slots=True)
class CudaDevice:
    """One CUDA device as torch sees it. Memory in bytes; `free_bytes` is what the driver reports free now."""

    index: int
    name: str
    total_bytes: int
    free_bytes: int
    capability: tuple[int, int] = (0, 0)

    @property
    def label(self) -> str:
        return f"cuda:{self.index} ({self.name})"

    def describe(self) -> str:
        return f"{self.label}: {gib(self.free_bytes)} free of {gib(self.total_bytes)}"


@dataclass(frozen=True, slots=True)
class KernelStatus:
    """Whether one kernel package imports with the functions the Mamba layers call.

    `version` is the installed distribution's version (None when not installed); `error` is the
    one-line reason the import failed (None when it worked).
    """

    package: str
    version: str | None
    importable: bool
    error: str | None = None
    build: str = "compiled"  # mamba-ssm: "Triton" where its compiled part is absent and its Triton kernels load

    def describe(self) -> str:
        if self.importable:
            return f"{self.package} {self.version or '(unknown version)'}: ok ({self.build} kernels)"
        installed = f"{self.version} installed but " if self.version else ""
        return f"{self.package}: {installed}not usable ({self.error})"


class MambaPath(enum.Enum):
    """Which implementation the Mamba layers will run."""

    FAST_CUDA = "fast CUDA kernels"
    # mamba-ssm's kernels load (Triton, or compiled) but causal-conv1d does not: PyTorch's convolution beside them.
    KERNELS_NO_CONV = "mamba-ssm's kernels, PyTorch's convolution (causal-conv1d missing)"
    # mamba-ssm's RMSNorm imports but the scan kernels or causal-conv1d do not: the layers' PyTorch scan on the GPU.
    SLOW_TORCH = "PyTorch scan on the GPU (scan kernels missing)"
    # No CUDA GPU: the engine's PyTorch path on the CPU; fine for a tiny checkpoint, minutes a step for Holotron-12B.
    CPU = "CPU (PyTorch scan; a tiny checkpoint only, Holotron-12B would take minutes a step)"


@dataclass(frozen=True, slots=True)
class TorchStatus:
    """The installed torch: its version, the CUDA it was built for, and why it failed to import if it did."""

    version: str | None
    cuda_version: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class HardwareReport:
    """Everything doctor prints and the backend checks before loading."""

    torch: TorchStatus
    devices: tuple[CudaDevice, ...]
    kernels: tuple[KernelStatus, ...]
    path: MambaPath
    verdict: str
    # Why no device was listed when torch imported (a driver error, for instance); None otherwise.
    cuda_error: str | None = None

    def device(self, index: int) -> CudaDevice | None:
        return next((device for device in self.devices if device.index == index), None)

    @property
    def kernels_usable(self) -> bool:
        return all(kernel.importable for kernel in self.kernels) and bool(self.kernels)


# The kernel packages Nemotron-H's Mamba-2 layers use: mamba-ssm, loaded as the engine loads it
# (inference/engine/kernels.py), and causal-conv1d, whose functions the probe imports (a package can
# import while its compiled extension is broken).
KERNEL_PACKAGES = ("mamba-ssm", "causal-conv1d")
_CONV_SYMBOLS = (("causal_conv1d", "causal_conv1d_fn"), ("causal_conv1d", "causal_conv1d_update"))


def one_line(exc: BaseException) -> str:
    """An exception as one line for a report: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe_kernel(package: str) -> KernelStatus:
    """Import one kernel package (`mamba-ssm` or `causal-conv1d`) and the functions the model calls."""
    if package not in KERNEL_PACKAGES:
        raise ValueError(f"unknown kernel package {package!r}; expected one of {sorted(KERNEL_PACKAGES)}")
    version = _distribution_version(package)
    if package == "mamba-ssm":
        # heavy: torch and Triton; the engine loads mamba-ssm this way (without its compiled part if absent)
        from holodesk.inference.engine.kernels import load_mamba

        load = load_mamba()
        if load.loaded:
            return KernelStatus(package, version, True, build=load.how)
        return KernelStatus(package, version, False, load.how)
    try:
        for module_name, symbol in _CONV_SYMBOLS:
            module = importlib.import_module(module_name)
            if not callable(getattr(module, symbol, None)):
                return KernelStatus(package, version, False, f"{module_name} has no {symbol}")
    # A compiled extension built for another torch or CUDA fails with OSError or RuntimeError,
    # not only ImportError; any of them means the fast path is off.
    except Exception as exc:  # any of the kinds above turns the fast path off
        return KernelStatus(package, version, False, one_line(exc))
    return KernelStatus(package, version, True)


def mamba_kernels() -> tuple[KernelStatus, ...]:
    """The status of mamba-ssm and causal-conv1d, in that order."""
    return tuple(probe_kernel(package) for package in KERNEL_PACKAGES)


def torch_status() -> TorchStatus:
    try:
        import torch
    except Exception as exc:  # a broken torch install fails with OSError or RuntimeError too
        return TorchStatus(None, None, one_line(exc))
    return TorchStatus(torch.__version__, torch.version.cuda)


def cuda_devices() -> tuple[tuple[CudaDevice, ...], str | None]:
    """Every visible CUDA device with its memory now, and the error that hid them if there was one."""
    try:
        import torch
    except Exception as exc:  # a broken torch install fails with OSError or RuntimeError too
        return (), one_line(exc)
    try:
        if not torch.cuda.is_available():
            return (), None
        devices = []
        for index in range(torch.cuda.device_count()):
            properties = torch.cuda.get_device_properties(index)
            free, total = torch.cuda.mem_get_info(index)
            devices.append(
                CudaDevice(
                    index=index,
                    name=properties.name,
                    total_bytes=int(total),
                    free_bytes=int(free),
                    capability=(properties.major, properties.minor),
                )
            )
        return tuple(devices), None
    except Exception as exc:  # a driver/runtime mismatch raises RuntimeError from deep inside torch
        return (), one_line(exc)


def mamba_path(devices: Sequence[CudaDevice], kernels: Sequence[KernelStatus]) -> MambaPath:
    """Which path the Mamba layers take: the kernels need both a CUDA device and both packages."""
    if not devices:
        return MambaPath.CPU
    if kernels and all(kernel.importable for kernel in kernels):
        return MambaPath.FAST_CUDA
    if any(kernel.package == "mamba-ssm" and kernel.importable for kernel in kernels):
        return MambaPath.KERNELS_NO_CONV
    return MambaPath.SLOW_TORCH


def verdict(path: MambaPath, devices: Sequence[CudaDevice], kernels: Sequence[KernelStatus]) -> str:
    """One line for doctor: which path will run, and what to do about it."""
    if path is MambaPath.FAST_CUDA:
        return f"Mamba layers will use the fast CUDA kernels on {devices[0].label}."
    if path is MambaPath.KERNELS_NO_CONV:
        build = next(kernel.build for kernel in kernels if kernel.package == "mamba-ssm")
        return (
            f"Mamba layers will use mamba-ssm's {build} kernels on {devices[0].label}, and PyTorch's convolution"
            " (causal-conv1d is not usable; where a CUDA compiler exists, pip install --no-build-isolation"
            ' "holodesk[cuda]" adds it).'
        )
    if path is MambaPath.SLOW_TORCH:
        missing = ", ".join(kernel.package for kernel in kernels if not kernel.importable) or "the kernels"
        return (
            f"{missing} not usable on {devices[0].label}: the Mamba layers run transformers' PyTorch scan on the"
            " GPU (correct, several times slower). Install them on this GPU machine with:"
            ' pip install --no-build-isolation "holodesk[cuda]"'
        )
    return (
        "No CUDA GPU: the in-process engine would run on the CPU, fine for a tiny test checkpoint but minutes a step"
        " for Holotron-12B. Use a machine with a CUDA GPU, or the remote (OpenAI-compatible) backend."
    )


def detect_hardware() -> HardwareReport:
    """Probe torch, the CUDA devices and the Mamba kernels (imports torch; takes a moment)."""
    torch_info = torch_status()
    devices, cuda_error = cuda_devices() if torch_info.error is None else ((), None)
    kernels = mamba_kernels()
    path = mamba_path(devices, kernels)
    return HardwareReport(
        torch=torch_info,
        devices=devices,
        kernels=kernels,
        path=path,
        verdict=verdict(path, devices, kernels),
        cuda_error=cuda_error,
    )
