"""Decide how a checkpoint will load, before touching any weights: device, dtype, attention, kernels.

Reads the checkpoint's config.json (its architecture, whether it is the test stand-in) and the
hardware report, and refuses with a clear ModelLoadError what cannot work. For Holotron-12B's
architecture (`NemotronH_Nano_VL_V2`) that means: bf16 weights only (its remote code casts image
features to bf16 itself), mamba-ssm importable (its `modeling_nemotron_h.py` imports mamba-ssm's Triton
RMSNorm unconditionally) and a CUDA GPU (that kernel has no CPU path). The tiny stand-in checkpoint,
marked in its config.json, is the only one of that architecture allowed on the CPU.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodesk.inference.checkpoint import CheckpointLocation, saved_dtype_bytes
from holodesk.inference.errors import ModelLoadError
from holodesk.inference.hardware import GIB, HardwareReport, MambaPath, gib

logger = logging.getLogger(__name__)

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
# Holotron-12B's base architecture: Nemotron-Nano-12B-v2-VL.
NEMOTRON_VL_ARCHITECTURE = "NemotronH_Nano_VL_V2"
# The key in config.json that marks the tiny test stand-in (inference/standin), the one checkpoint
# of that architecture allowed on the CPU.
STANDIN_MARKER = "holodesk_standin"
# What Nemotron-H's modeling file imports at module top; without it the checkpoint does not import.
MAMBA_RMSNORM = ("mamba_ssm.ops.triton.layernorm_gated", "rmsnorm_fn")
KERNEL_INSTALL = 'pip install --no-build-isolation "holodesk[cuda]"'


@dataclass(frozen=True, slots=True)
class CheckpointFacts:
    """What config.json says about loading: its architectures, whether it is the stand-in."""

    architectures: tuple[str, ...]
    standin: bool

    @property
    def nemotron_vl(self) -> bool:
        return NEMOTRON_VL_ARCHITECTURE in self.architectures


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """Where and how the model will be loaded, decided before touching any weights."""

    device: str
    dtype: str
    mamba_path: MambaPath
    # Bytes the weights and working memory need on the GPU; None on the CPU or when the size is unknown.
    required_bytes: int | None
    # Something the user should know about this plan (an emulated dtype, the stand-in on the CPU); None if nothing.
    notice: str | None
    # "flash_attention_2" when flash-attn imports and the device is CUDA, else "sdpa".
    attention: str = "sdpa"


def read_checkpoint_facts(path: Path) -> CheckpointFacts:
    """The architectures and the stand-in marker from `path`/config.json; a clear error if it is unreadable."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {path / 'config.json'}: {exc}") from exc
    architectures = config.get("architectures") or ()
    if not isinstance(architectures, list | tuple) or not all(isinstance(a, str) for a in architectures):
        raise ModelLoadError(f"{path / 'config.json'}: 'architectures' must be a list of names")
    return CheckpointFacts(architectures=tuple(architectures), standin=config.get(STANDIN_MARKER) is True)


def flash_attention_available() -> bool:
    """Whether flash-attn is installed (its import is checked by transformers when it is chosen)."""
    return importlib.util.find_spec("flash_attn") is not None


def choose_attention(device: str, flash_available: bool) -> str:
    """flash_attention_2 on CUDA when flash-attn is installed, otherwise sdpa (never the config's default)."""
    return "flash_attention_2" if device.startswith("cuda") and flash_available else "sdpa"


def mamba_rmsnorm_error() -> str | None:
    """Why `from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn` fails here, or None if it works."""
    module_name, symbol = MAMBA_RMSNORM
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a broken compiled extension raises more than ImportError
        return f"{type(exc).__name__}: {exc}"
    if not callable(getattr(module, symbol, None)):
        return f"{module_name} has no {symbol}"
    return None


# What the checkpoint's own files import besides transformers: its image processor imports torchvision
# (which must be the build made for the installed torch), its RADIO vision tower einops.
REMOTE_CODE_IMPORTS = ("torchvision", "einops")
HOLOTRON_INSTALL = 'pip install "holodesk[holotron]" (torch 2.13.0 with torchvision 0.28.0, einops)'


def import_errors(modules: tuple[str, ...] = REMOTE_CODE_IMPORTS) -> str | None:
    """Why some of `modules` do not import here ("name: error; ..."), or None when all do.

    A torchvision built for another torch imports with "operator torchvision::nms does not exist".
    """
    found = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a mismatched build raises RuntimeError or OSError, not only ImportError
            lines = str(exc).strip().splitlines()
            found.append(f"{name}: {type(exc).__name__}: {lines[0] if lines else ''}")
    return "; ".join(found) or None


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


def requirements_for(facts: CheckpointFacts) -> str | None:
    """One line on what this architecture needs, for doctor and the load plan; None when nothing special."""
    if not facts.nemotron_vl:
        return None
    if facts.standin:
        return "the tiny test stand-in of Nemotron-Nano-VL: bf16, mamba-ssm's RMSNorm; allowed on the CPU"
    return (
        f"{NEMOTRON_VL_ARCHITECTURE} (Holotron-12B) needs bf16 weights, mamba-ssm (its modeling code imports"
        " mamba-ssm's Triton RMSNorm) and a CUDA GPU; it has no CPU path"
    )


def plan_load(
    checkpoint: CheckpointLocation,
    device: str,
    dtype: str | None,
    report: HardwareReport,
    *,
    facts: CheckpointFacts | None = None,
    mamba_error: str | None = None,
    flash_available: bool = False,
    import_error: str | None = None,
) -> LoadPlan:
    """Check architecture, device, dtype, kernels and free memory; refuse clearly what cannot work.

    `mamba_error` is `mamba_rmsnorm_error()`'s answer and `import_error` `import_errors()`'s (passed in
    so that planning imports nothing).
    """
    device = normalize_device(device)
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise ModelLoadError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_BYTES)}")
    facts = facts if facts is not None else read_checkpoint_facts(checkpoint.path)
    chosen = dtype or "bfloat16"
    if facts.nemotron_vl:
        if chosen != "bfloat16":
            raise ModelLoadError(
                f"{NEMOTRON_VL_ARCHITECTURE} runs in bfloat16 only: its code casts image features to bfloat16"
                f" itself, so {chosen} weights fail in the vision projector. Leave the dtype at bfloat16."
            )
        problems = []
        if import_error is not None:
            problems.append(
                f"its own code cannot import what it needs ({import_error}); install them with: {HOLOTRON_INSTALL},"
                " torchvision being the build made for the installed torch"
            )
        if mamba_error is not None:
            problems.append(
                "it cannot load without mamba-ssm: its modeling_nemotron_h.py imports"
                f" mamba_ssm.ops.triton.layernorm_gated.rmsnorm_fn ({mamba_error}); on a machine with a CUDA GPU"
                f" and nvcc: {KERNEL_INSTALL}"
            )
        if problems:
            raise ModelLoadError(f"{NEMOTRON_VL_ARCHITECTURE}: " + "; and ".join(problems) + ".")
    attention = choose_attention(device, flash_available)
    if device == "cpu":
        if facts.nemotron_vl and not facts.standin:
            raise ModelLoadError(
                f"{NEMOTRON_VL_ARCHITECTURE} (Holotron-12B) cannot run on the CPU: its Mamba layers use mamba-ssm's"
                " Triton kernel, which needs a CUDA GPU. Use a CUDA GPU or the remote (OpenAI-compatible) backend."
            )
        if not facts.standin:
            raise ModelLoadError(
                f"{checkpoint.path} cannot be loaded on the CPU: only the tiny test stand-in runs on the CPU."
                " Use a CUDA GPU or the remote (OpenAI-compatible) backend."
            )
        return LoadPlan(
            device, chosen, MambaPath.CPU, None, "the tiny test stand-in on the CPU (tests only)", attention
        )

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
                " free; use the remote backend otherwise."
            )
        raise ModelLoadError(f"There is no {device}; this machine has {', '.join(d.label for d in report.devices)}.")

    notices = []
    if chosen == "bfloat16" and gpu.capability < (8, 0):
        # Not switched to float16 for the user: Nemotron-VL's remote code casts image features to bf16.
        notices.append(f"{gpu.label} predates Ampere: bfloat16 runs emulated there and will be slow")
        logger.warning("%s", notices[-1])
    if report.path is MambaPath.SLOW_TORCH:
        broken = "; ".join(k.describe() for k in report.kernels if not k.importable) or "kernels missing"
        notices.append(
            f"The Mamba scan kernels are not usable ({broken}): the Mamba layers run their PyTorch scan on the GPU"
            f" (slower). Install them with: {KERNEL_INSTALL}"
        )
    notice = " ".join(notices) or None
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
    return LoadPlan(device, chosen, report.path, required, notice, attention)


def attention_config(config: Any, attention: str) -> Any:
    """Put `attention` into the config and its language-model and vision sub-configs, and return it.

    Nemotron-VL's config constructor pushes its own default (flash_attention_2) into `text_config` and
    the vision config's `use_flash_attn`; `from_pretrained(attn_implementation=...)` sets only the top
    level, so the sub-models would still ask for flash attention. Set all three explicitly.
    """
    config._attn_implementation = attention
    for name in ("text_config", "llm_config"):
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "_attn_implementation"):
            sub._attn_implementation = attention
    vision = getattr(config, "vision_config", None)
    if vision is not None and hasattr(vision, "use_flash_attn"):
        vision.use_flash_attn = attention.startswith("flash_attention")
    return config
