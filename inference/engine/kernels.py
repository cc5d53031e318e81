"""The GPU kernels the engine binds into transformers' layers after loading: mamba-ssm's Triton scans for
Nemotron-H's Mamba-2 layers, flash-linear-attention's Triton delta rule for Qwen3.5's Gated DeltaNet.

transformers (5.19) picks a kernel when its modeling module is imported, by importing the kernel's
package; a package that fails to import leaves the PyTorch reference bound for the process's life,
with nothing said. mamba-ssm installed without its CUDA build (no compiler on the machine) is such a
package: its `__init__` imports the compiled Mamba-1 selective scan, which the Mamba-2 Triton kernels
never call. So the engine loads the kernels itself, after the model is loaded:
- mamba-ssm's Triton modules are imported with the package registered but its `__init__` not run
  (the compiled build, where present, imports normally and is used the same way);
- each kernel replaces the function of the layers' transformers module that the layer's forward calls,
  through an adapter that runs the kernel on CUDA tensors only and transformers' PyTorch reference
  otherwise. That holds on the CPU too: where the package imports, transformers has bound the kernel
  itself, for every device, and a CPU tensor would reach a Triton kernel;
- what was bound, or why not, is said in words for the log and for `holodesk doctor`.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from torch import nn

from holodesk.inference.hardware import one_line

MAMBA_MIXERS = ("NemotronHMamba2Mixer",)
DELTANETS = ("Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet")
INSTALL = (
    'MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE pip install --no-build-isolation "mamba-ssm>=2.2"'
    ' "fla-core>=0.4" triton'
)


@dataclass(frozen=True, slots=True)
class KernelLoad:
    """The functions of one kernel package by the name transformers' module calls them, or why there are none."""

    package: str
    functions: dict[str, Callable[..., Any]]
    how: str  # "Triton", "compiled" or the one-line reason they did not load

    @property
    def loaded(self) -> bool:
        return bool(self.functions)


def _mamba_package() -> ModuleType | None:
    """mamba-ssm's package, imported normally where its compiled part loads, else registered without its
    `__init__` (which imports only that compiled part and Mamba-1's modules). None when not installed."""
    if "mamba_ssm" in sys.modules:
        return sys.modules["mamba_ssm"]
    spec = importlib.util.find_spec("mamba_ssm")
    if spec is None or spec.submodule_search_locations is None:
        return None
    try:
        return importlib.import_module("mamba_ssm")
    except ImportError:  # the compiled selective scan is absent: the Triton modules stand alone
        package = importlib.util.module_from_spec(spec)
        sys.modules["mamba_ssm"] = package
        return package


def _forget_mamba() -> None:
    """Take mamba-ssm's modules out of the import system after a failed load (the next load starts clean)."""
    for name in [name for name in sys.modules if name == "mamba_ssm" or name.startswith("mamba_ssm.")]:
        del sys.modules[name]


def load_mamba() -> KernelLoad:
    """mamba-ssm's Triton chunk scan (prefill) and state update (decode), named as Nemotron-H's module names them."""
    try:
        package = _mamba_package()
        if package is None:
            return KernelLoad("mamba-ssm", {}, "mamba-ssm is not installed")
        combined = importlib.import_module("mamba_ssm.ops.triton.ssd_combined")
        update = importlib.import_module("mamba_ssm.ops.triton.selective_state_update")
        functions = {
            "mamba2_chunk_scan": combined.mamba_chunk_scan_combined,
            "mamba2_selective_state_update": update.selective_state_update,
        }
    except Exception as exc:  # ImportError, AttributeError, or Triton's own errors (no GPU driver, a version mismatch)
        _forget_mamba()
        return KernelLoad("mamba-ssm", {}, one_line(exc))
    compiled = importlib.util.find_spec("selective_scan_cuda") is not None
    return KernelLoad("mamba-ssm", functions, "compiled" if compiled else "Triton")


def load_fla() -> KernelLoad:
    """flash-linear-attention's Triton chunked delta rule, named as Qwen3.5's module names it."""
    try:
        module = importlib.import_module("fla.ops.gated_delta_rule")
    except Exception as exc:  # ImportError, or Triton's own errors
        absent = isinstance(exc, ModuleNotFoundError) and exc.name == "fla"
        reason = "fla-core is not installed" if absent else one_line(exc)
        return KernelLoad("flash-linear-attention", {}, reason)
    functions = {"torch_chunk_gated_delta_rule": module.chunk_gated_delta_rule}
    return KernelLoad("flash-linear-attention", functions, "Triton")


Function = Callable[..., Any]


def on_cuda(kernel: Function, original: Function) -> Function:
    """`kernel` where the first tensor argument is on a CUDA device, `original` elsewhere.

    transformers' call passes arguments the kernel may not take (its own `**kwargs`); only the kernel's
    parameters reach it, as transformers' own binding does.
    """
    accepted = set(inspect.signature(kernel).parameters)

    def call(*args: Any, **kwargs: Any) -> Any:
        if args[0].device.type != "cuda":
            return original(*args, **kwargs)
        return kernel(*args, **{key: value for key, value in kwargs.items() if key in accepted})

    return call


# transformers' PyTorch reference for each (module, name) replaced, so that binding twice wraps it, not an adapter.
_ORIGINALS: dict[tuple[str, str], Callable[..., Any]] = {}


def bind(layers: list[nn.Module], load: KernelLoad) -> None:
    """Replace, in each of `layers`' transformers modules, the functions `load` provides."""
    modules = {type(layer).__module__: sys.modules[type(layer).__module__] for layer in layers}
    for module in modules.values():
        for name, kernel in load.functions.items():
            # transformers' binding wraps its PyTorch function with functools.wraps: unwrap reaches it
            original = _ORIGINALS.setdefault((module.__name__, name), inspect.unwrap(getattr(module, name)))
            setattr(module, name, on_cuda(kernel, original))


def bind_kernels(model: nn.Module, device_type: str) -> list[str]:
    """Bind the kernels `model`'s layers can use; on a CUDA device, what runs now, in words (one per family of
    layers present). On the CPU nothing is said: its tensors take transformers' PyTorch code either way."""
    words: list[str] = []
    for names, loader, what, fallback in (
        (MAMBA_MIXERS, load_mamba, "Mamba-2 layers", "transformers' PyTorch scan"),
        (DELTANETS, load_fla, "Gated DeltaNet layers' prefill", "transformers' PyTorch delta rule"),
    ):
        layers = [module for module in model.modules() if type(module).__name__ in names]
        if not layers:
            continue
        load = loader()
        if load.loaded:
            bind(layers, load)
            words.append(f"{load.package}'s {load.how} kernels in {len(layers)} {what}")
        else:
            words.append(f"{fallback} in {len(layers)} {what}: {load.package} not usable ({load.how}); {INSTALL}")
    return words if device_type == "cuda" else []
