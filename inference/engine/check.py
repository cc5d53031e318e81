"""First contact with a loaded engine: does it answer sensibly, how fast, on which kernels, in how much memory.

`first_contact` runs one request and reports, in words and figures: whether the answer is degenerate
(empty, or one token repeated: what a cache that never reaches the language model produces), decode
milliseconds per token next to the floor the memory bandwidth allows (every token reads every weight
once), prefill tokens per second, peak memory (CUDA's allocator peak, or the process's peak RSS on a
CPU), and which fast paths are in use: mamba-ssm's and causal-conv1d's kernels (transformers picks
them when they import; they run on CUDA only) and flash-attention.

`contact_request` is the one request both `holodesk doctor --try` and `bench.gpu_step` send first.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import resource
from dataclasses import dataclass

import torch

from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.kernels import load_mamba
from holodesk.inference.engine.memory import weight_elements
from holodesk.inference.engine.runner import Engine
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.holotron import HolotronProfile

# A run of this many identical tokens ends a degenerate answer.
REPEAT_RUN = 8
CONTACT_TASK = "Archive the first unread email."
# Where transformers looks for each kernel beside mamba-ssm's (package, module path, function); mamba-ssm's
# are loaded as the engine loads them (kernels.load_mamba: also a build without its compiled part).
KERNELS = {
    "causal-conv1d": ("causal_conv1d", "causal_conv1d_fn"),
    "flash-attention": ("flash_attn", "flash_attn_func"),
}


def degenerate(token_ids: tuple[int, ...] | list[int]) -> str | None:
    """Why an answer looks broken (in words), or None."""
    if not token_ids:
        return "the answer is empty"
    run = 1
    for previous, token in itertools.pairwise(token_ids):
        run = run + 1 if token == previous else 1
        if run >= REPEAT_RUN:
            return f"token {token} repeats {REPEAT_RUN} times in a row (a cache that never reaches the model does this)"
    return None


def kernels_available(device: torch.device) -> dict[str, bool]:
    """For each fast path: whether it imports here and can run on `device` (all of them need CUDA)."""
    cuda = device.type == "cuda"
    mamba = load_mamba()
    found = {
        "mamba-ssm chunk scan": cuda and "mamba2_chunk_scan" in mamba.functions,
        "mamba-ssm state update": cuda and "mamba2_selective_state_update" in mamba.functions,
    }
    for name, (module, function) in KERNELS.items():
        try:
            usable = hasattr(importlib.import_module(module), function)
        except Exception:  # a kernel package that is absent or broken (CUDA mismatch) is not in use
            usable = False
        found[name] = usable and cuda
    return found


@dataclass(frozen=True, slots=True)
class ContactReport:
    answer: str
    problem: str | None
    prompt_tokens: int
    new_tokens: int
    prefill_tokens_per_s: float
    decode_ms_per_token: float
    decode_floor_ms: float | None
    peak_memory_bytes: int
    peak_memory_kind: str
    kernels: dict[str, bool]
    attention: str

    def lines(self) -> list[str]:
        floor = f" (bandwidth floor {self.decode_floor_ms:.2f} ms)" if self.decode_floor_ms is not None else ""
        used = ", ".join(f"{name}: {'yes' if on else 'no'}" for name, on in self.kernels.items())
        return [
            f"answer: {self.answer[:200]!r}" + (f" - DEGENERATE: {self.problem}" if self.problem else ""),
            f"prefill: {self.prompt_tokens} tokens at {self.prefill_tokens_per_s:.0f} tokens/s",
            f"decode: {self.decode_ms_per_token:.2f} ms/token over {self.new_tokens} tokens{floor}",
            f"peak memory ({self.peak_memory_kind}): {self.peak_memory_bytes / 1024**3:.2f} GiB",
            f"attention: {self.attention}; kernels in use: {used}",
        ]


def first_contact(engine: Engine, request: ChatRequest, *, bandwidth_tb_s: float | None = None) -> ContactReport:
    """Run `request` once (fresh state) and report; `bandwidth_tb_s` gives the decode floor."""
    engine.forget()
    on_cuda = engine.device.type == "cuda"
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(engine.device)
    result = engine.generate(request)
    timings = result.timings
    decoded = max(len(result.new_ids) - 1, 1)  # the first token comes out of the prefill
    weight_bytes = weight_elements(engine.spec) * torch.finfo(engine.dtype).bits // 8
    if on_cuda:
        peak, kind = torch.cuda.max_memory_allocated(engine.device), f"CUDA allocator on {engine.device}"
    else:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "process RSS"
    return ContactReport(
        answer=result.text,
        problem=degenerate(result.new_ids),
        prompt_tokens=len(result.prompt_ids),
        new_tokens=len(result.new_ids),
        prefill_tokens_per_s=result.prefilled_tokens / max(timings.prefill_s, 1e-9),
        decode_ms_per_token=timings.decode_s * 1000 / decoded,
        decode_floor_ms=weight_bytes / (bandwidth_tb_s * 1e12) * 1000 if bandwidth_tb_s else None,
        peak_memory_bytes=int(peak),
        peak_memory_kind=kind,
        kernels=kernels_available(engine.device),
        attention=engine.model.language_model.config._attn_implementation,
    )


def contact_request(frame: ScreenFrame, max_new_tokens: int = 64) -> ChatRequest:
    """The first-contact request: one navigation step on `frame` through the Holotron profile."""
    profile = HolotronProfile()
    request = profile.navigation_request(CONTACT_TASK, [], [profile.prepare_image(frame)])
    return dataclasses.replace(request, max_new_tokens=max_new_tokens)
