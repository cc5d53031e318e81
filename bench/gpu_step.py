"""Figure 6: Holotron-12B steps on a GPU, next to the floors the GPU's bandwidth and matrix rate allow.

For a machine with a CUDA GPU and the real weights (it refuses at once without CUDA):
    python -m bench.gpu_step --gpu-model /models/Holotron-12B            # canned desktop screenshots
    python -m bench.gpu_step /models/Holotron-12B screens/ --steps 10     # your own PNG screenshots

loads the checkpoint through `inference.local.LocalBackend` (Holodesk's in-process engine, bf16), first
runs the engine's first contact (`holodesk.inference.engine.check`: is the answer degenerate, prefill
tokens/s, decode ms/token against the bandwidth floor, peak memory, kernels in use) on the first
screenshot, then N navigation steps through the app's own policy (`ModelPolicy` with the holotron
profile) on the screenshots (used in turn; each step shows the last three, as the engine does, with
the earlier steps in the history, the engine's state kept between steps; without screenshots, made-up
1920x1080 desktops), and prints per step whether the answer parsed and what it
proposed (never executed), next to prefill and decode tokens per second, step latency and peak VRAM
(torch.cuda.max_memory_allocated), each with its floor:
- decode: every new token reads every weight once, so a token takes at least
  weight bytes / memory bandwidth;
- prefill: a forward pass costs about 2 x parameters FLOPs per token, so the prompt takes at least
  2 x parameters x prompt tokens / peak bf16 FLOP/s.
Bandwidth and FLOP/s come from GPU_TABLE by the device's name, or from --bandwidth / --tflops.
The JSON report goes to stdout's last line and to --output if given.

"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness import BenchResult, stats_of
from bench.screens import desktop_picture
from holodesk.automation.proposal import PastStep
from holodesk.automation.screen import frame_from_image
from holodesk.inference.engine.memory import weight_elements
from holodesk.inference.errors import InferenceError, ParseError
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile

if TYPE_CHECKING:
    from holodesk.inference.local import LocalBackend

TASK = "Archive every unread newsletter in my mail"
KEEP_SCREENSHOTS = 3


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """What bounds a GPU: memory bandwidth (TB/s) and dense bf16 tensor throughput (TFLOP/s)."""

    name: str
    bandwidth_tb_s: float
    bf16_tflops: float

    def __post_init__(self) -> None:
        if not (self.bandwidth_tb_s > 0 and self.bf16_tflops > 0):
            raise ValueError(f"bandwidth and TFLOP/s must be positive, got {self.bandwidth_tb_s}, {self.bf16_tflops}")


# Matched against torch.cuda.get_device_name(), first match wins: the more specific names come first.
# Vendor datasheet figures, dense (no sparsity). The H200 has the H100 SXM's compute with faster memory.
GPU_TABLE: tuple[tuple[tuple[str, ...], GpuSpec], ...] = (
    (("H200",), GpuSpec("H200", 4.8, 989.0)),
    (("H100", "PCIE"), GpuSpec("H100 PCIe", 2.0, 756.0)),
    (("H100",), GpuSpec("H100 SXM", 3.35, 989.0)),
    (("A100", "80GB"), GpuSpec("A100 80GB", 2.0, 312.0)),
    (("A100",), GpuSpec("A100 40GB", 1.555, 312.0)),
    (("L40S",), GpuSpec("L40S", 0.864, 362.0)),
)


class GpuUnavailable(RuntimeError):
    """No CUDA device to run on: said before anything is loaded."""


def gpu_spec(device_name: str, bandwidth_tb_s: float | None = None, bf16_tflops: float | None = None) -> GpuSpec:
    """The spec for a device name, with either figure overridden; a ValueError if unknown and not given."""
    upper = device_name.upper()
    known = next((spec for words, spec in GPU_TABLE if all(word in upper for word in words)), None)
    bandwidth = bandwidth_tb_s if bandwidth_tb_s is not None else known.bandwidth_tb_s if known else None
    tflops = bf16_tflops if bf16_tflops is not None else known.bf16_tflops if known else None
    if bandwidth is None or tflops is None:
        names = ", ".join(spec.name for _, spec in GPU_TABLE)
        raise ValueError(
            f"no figures for {device_name!r} (known: {names}): give --bandwidth TB/s and --tflops bf16 TFLOP/s"
        )
    return GpuSpec(known.name if known else device_name, bandwidth, tflops)


def decode_floor_s(weight_bytes: int, spec: GpuSpec) -> float:
    """The least time one decoded token can take: all weights read once from memory."""
    return weight_bytes / (spec.bandwidth_tb_s * 1e12)


def prefill_floor_s(parameters: int, tokens: int, spec: GpuSpec) -> float:
    """The least time a prompt of `tokens` can take: 2 FLOPs per parameter per token at peak rate."""
    return 2 * parameters * tokens / (spec.bf16_tflops * 1e12)


CANNED_SEEDS = (0, 1, 2)


def canned_screenshots() -> list[Any]:
    """Made-up 1920x1080 desktops (bench.screens), for a check without recorded screenshots."""

    return [desktop_picture(1920, 1080, seed=seed) for seed in CANNED_SEEDS]


def printable(text: str, limit: int = 100) -> str:
    """Model text made safe for a terminal: control characters escaped, one line, at most `limit` characters."""
    cleaned = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 3] + "..."


def format_step(number: int, step: dict[str, Any]) -> str:
    """One line per step: parsed or not and what was proposed, then the speeds next to their ceilings."""
    outcome = f"proposed {step['proposed']}" if step["parsed"] else f"did not parse: {step['proposed']}"
    prefill = step["prefill_tokens_per_s"]
    decode = step["decode_tokens_per_s"]
    speeds = (
        f"prefill {prefill or 0:,.0f} tok/s (ceiling {step['prefill_ceiling_tokens_per_s'] or 0:,.0f}),"
        f" decode {decode or 0:,.1f} tok/s (ceiling {step['decode_ceiling_tokens_per_s']:,.1f}),"
        f" peak VRAM {step['peak_vram_bytes'] / 2**30:.1f} GiB"
    )
    return f"step {number}: {outcome} | {speeds}"


def find_screenshots(paths: Sequence[Path]) -> list[Path]:
    """PNG files named directly or found in the named folders (sorted), in the order given."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir() if p.suffix.lower() == ".png" and p.is_file()))
        elif path.is_file() and path.suffix.lower() == ".png":
            found.append(path)
        else:
            raise ValueError(f"{path} is neither a PNG file nor a folder")
    if not found:
        raise ValueError(f"no PNG screenshots in {', '.join(map(str, paths))}")
    return found


def parse_arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gpu_step",
        description="Holotron-12B steps on a CUDA GPU: throughput, latency and VRAM next to the hardware floors.",
    )
    parser.add_argument(
        "checkpoint", type=Path, nargs="?", help="checkpoint folder of Holotron-12B (or a compatible model)"
    )
    parser.add_argument(
        "screenshots", type=Path, nargs="*", help="PNG screenshots, or folders of them (default: canned desktops)"
    )
    parser.add_argument("--gpu-model", type=Path, help="the checkpoint folder (instead of the first argument)")
    parser.add_argument("--steps", type=int, default=10, help="steps to run (screenshots are reused in turn)")
    parser.add_argument("--warmup", type=int, default=1, help="steps run first and not reported")
    parser.add_argument("--max-new-tokens", type=int, default=128, help="cap on each answer's tokens")
    parser.add_argument("--max-tiles", type=int, default=12, help="tile budget of each screenshot")
    parser.add_argument("--device", default="cuda", help="cuda or cuda:N")
    parser.add_argument("--bandwidth", type=float, help="memory bandwidth in TB/s (overrides the table)")
    parser.add_argument("--tflops", type=float, help="dense bf16 TFLOP/s (overrides the table)")
    parser.add_argument("--output", type=Path, help="also write the JSON report here")
    parser.add_argument(
        "--transformers-decode",
        action="store_true",
        help="decode through transformers' forward instead of the static decoder's CUDA graph (the side-by-side)",
    )
    arguments = parser.parse_args(argv)
    if arguments.gpu_model is not None:
        if arguments.checkpoint is not None:  # with --gpu-model every positional argument is a screenshot
            arguments.screenshots = [arguments.checkpoint, *arguments.screenshots]
        arguments.checkpoint = arguments.gpu_model
    if arguments.checkpoint is None:
        parser.error("name the checkpoint: --gpu-model PATH (or as the first argument)")
    if arguments.steps < 1 or arguments.warmup < 0 or arguments.max_new_tokens < 1 or arguments.max_tiles < 1:
        parser.error("--steps, --max-new-tokens and --max-tiles must be at least 1, --warmup at least 0")
    for name in ("bandwidth", "tflops"):
        value = getattr(arguments, name)
        if value is not None and value <= 0:
            parser.error(f"--{name} must be positive")
    return arguments


def require_cuda(device: str) -> str:
    """The CUDA device's name, or GpuUnavailable saying why there is none (before any loading)."""
    try:
        import torch
    except ImportError as exc:
        raise GpuUnavailable(f"torch is not installed ({exc}): install holodesk[holotron] on a GPU machine") from exc
    if not torch.cuda.is_available():
        why = "torch was built without CUDA" if torch.version.cuda is None else "no CUDA device is visible"
        raise GpuUnavailable(
            f"bench.gpu_step needs a CUDA GPU and {why} (torch {torch.__version__}). Run it on the GPU machine"
            " with the weights; the CPU benchmarks are `python -m bench`."
        )
    index = int(device.split(":")[1]) if ":" in device else 0
    return str(torch.cuda.get_device_name(index))


def _step_report(timings: Any, peak_bytes: int, parameters: int, weight_bytes: int, spec: GpuSpec) -> dict[str, Any]:
    decode_tokens = max(0, timings.tokens_out - 1)  # the first token comes out of the prefill
    # Tokens whose state the engine kept from the last step cost nothing: rates and floors count the rest.
    computed = timings.tokens_in - timings.tokens_reused
    prefill_floor = prefill_floor_s(parameters, computed, spec)
    token_floor = decode_floor_s(weight_bytes, spec)
    return {
        "tokens_in": timings.tokens_in,
        "tokens_prefilled": computed,
        "tokens_out": timings.tokens_out,
        "preprocess_s": timings.preprocess_s,
        "prefill_s": timings.prefill_s,
        "decode_s": timings.decode_s,
        "step_s": timings.total_s,
        "prefill_tokens_per_s": computed / timings.prefill_s if timings.prefill_s > 0 else None,
        "decode_tokens_per_s": decode_tokens / timings.decode_s if timings.decode_s > 0 and decode_tokens else None,
        "prefill_floor_s": prefill_floor,
        "decode_floor_s_per_token": token_floor,
        "prefill_ceiling_tokens_per_s": computed / prefill_floor if prefill_floor > 0 else None,
        "decode_ceiling_tokens_per_s": 1 / token_floor,
        "peak_vram_bytes": peak_bytes,
    }


def load_backend(arguments: argparse.Namespace) -> LocalBackend:
    """The checkpoint loaded by the in-process backend in bf16 (ModelLoadError says why not)."""
    # looked up when called: tests replace it at its source
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(
        arguments.checkpoint, device=arguments.device, dtype="bfloat16", max_tiles=arguments.max_tiles
    )
    backend.load()
    if arguments.transformers_decode:
        backend.engine.static_decode = False  # generate reads it at each answer
    decode = "transformers' forward" if arguments.transformers_decode else "the engine's"
    print(f"engine paths: {'; '.join(backend.engine.paths) or 'none'}; decode: {decode}", file=sys.stderr)
    return backend


def run_steps(arguments: argparse.Namespace, device_name: str, backend: LocalBackend) -> dict[str, Any]:
    """Run the steps on the loaded backend, return the report (needs CUDA: call require_cuda first)."""
    import torch
    from PIL import Image

    spec = gpu_spec(device_name, arguments.bandwidth, arguments.tflops)
    if arguments.screenshots:
        screenshots = [str(path) for path in find_screenshots(arguments.screenshots)]
        pictures = [Image.open(path).convert("RGB") for path in screenshots]
    else:
        screenshots = [f"canned desktop {seed}" for seed in CANNED_SEEDS]
        pictures = canned_screenshots()
    profile = get_profile("holotron")
    engine = backend.engine
    parameters = weight_elements(engine.spec)
    weight_bytes = parameters * torch.finfo(engine.dtype).bits // 8
    policy = ModelPolicy(profile, _CappedBackend(backend, arguments.max_new_tokens))
    frames = [frame_from_image(picture) for picture in pictures]
    history: list[PastStep] = []
    steps: list[dict[str, Any]] = []
    for index in range(arguments.warmup + arguments.steps):
        shown = [frames[(index - back) % len(frames)] for back in range(KEEP_SCREENSHOTS - 1, -1, -1)]
        torch.cuda.reset_peak_memory_stats()
        try:
            proposal = policy.propose(TASK, history, shown[-min(index + 1, KEEP_SCREENSHOTS) :])
            timings, parsed, proposed = proposal.timings, True, proposal.action.describe()
            history.append(PastStep(proposal.action, proposal.note, proposal.thought))
        except ParseError as exc:
            # A malformed answer is still a timed step; it adds nothing to the history.
            timings, parsed, proposed = exc.timings, False, str(exc)
        peak = torch.cuda.max_memory_allocated()
        if index >= arguments.warmup and timings is not None:
            step = _step_report(timings, peak, parameters, weight_bytes, spec)
            step.update(parsed=parsed, proposed=printable(proposed))
            steps.append(step)
            print(format_step(len(steps), step), file=sys.stderr, flush=True)
    summary = {
        key: statistics.median(s[key] for s in steps if s[key] is not None)
        for key in (
            "step_s",
            "prefill_s",
            "decode_s",
            "prefill_tokens_per_s",
            "decode_tokens_per_s",
            "tokens_in",
            "tokens_prefilled",
        )
        if any(s[key] is not None for s in steps)
    }
    summary["peak_vram_gib"] = max(s["peak_vram_bytes"] for s in steps) / 2**30
    summary["decode_ceiling_tokens_per_s"] = 1 / decode_floor_s(weight_bytes, spec)
    if "decode_tokens_per_s" in summary:
        summary["decode_fraction_of_ceiling"] = summary["decode_tokens_per_s"] / summary["decode_ceiling_tokens_per_s"]
    prefill_fractions = [s["prefill_floor_s"] / s["prefill_s"] for s in steps if s["prefill_s"] > 0]
    if prefill_fractions:
        summary["prefill_fraction_of_ceiling"] = statistics.median(prefill_fractions)
    return {
        "device": device_name,
        "gpu": dataclasses.asdict(spec),
        "checkpoint": str(engine.spec.path),
        "parameters": parameters,
        "weight_bytes_bf16": weight_bytes,
        "mamba_kernels": backend.load_notice is None,
        "memory_plan": _planned(backend),
        "screenshots": screenshots,
        "parsed_steps": sum(1 for step in steps if step["parsed"]),
        "summary": summary,
        "steps": steps,
    }


def _planned(backend: LocalBackend) -> dict[str, int] | None:
    """The memory the engine planned before loading (what placement checked against free memory), in bytes."""
    placement = backend.placement
    if placement is None:
        return None
    plan = placement.memory
    return {
        "weights": plan.weights,
        "cache": plan.cache,
        "prefill_peak": plan.prefill_peak,
        "vision_peak": plan.vision_peak,
        "total": plan.total,
    }


class _CappedBackend:
    """The backend with every request's max_new_tokens capped (the benchmark's --max-new-tokens)."""

    def __init__(self, backend: Any, max_new_tokens: int) -> None:
        self.backend = backend
        self.max_new_tokens = max_new_tokens

    def generate(self, request: Any) -> Any:
        capped = dataclasses.replace(request, max_new_tokens=min(request.max_new_tokens, self.max_new_tokens))
        return self.backend.generate(capped)

    def interrupt(self) -> None:
        self.backend.interrupt()


def bench_result(report: dict[str, Any]) -> BenchResult:
    """The report as `python -m bench` figures: measured per step, each next to its hardware bound."""
    result = BenchResult("gpu_step")
    steps = report["steps"]
    result.add("step latency", stats_of([s["step_s"] * 1000 for s in steps]))
    result.add("prefill floor", stats_of([s["prefill_floor_s"] * 1000 for s in steps]))
    result.add("prefill", stats_of([s["prefill_s"] * 1000 for s in steps]), baseline="prefill floor")
    token_floor = [s["decode_floor_s_per_token"] * 1000 for s in steps]
    result.add("decode per token floor", stats_of(token_floor))
    per_token = [s["decode_s"] * 1000 / (s["tokens_out"] - 1) for s in steps if s["tokens_out"] > 1]
    if per_token:
        result.add("decode per token", stats_of(per_token), baseline="decode per token floor")
    result.add("peak VRAM", stats_of([s["peak_vram_bytes"] / 2**30 for s in steps], "GiB"))
    result.notes.append(format_summary(report))
    result.extra = {key: value for key, value in report.items() if key != "steps"}
    return result


def format_summary(report: dict[str, Any]) -> str:
    summary = report["summary"]
    lines = [f"{report['device']} ({report['gpu']['name']}): {len(report['steps'])} steps of {report['checkpoint']}"]
    for key, value in summary.items():
        lines.append(f"  {key:32s} {value:.4g}")
    plan = report.get("memory_plan")
    if plan is not None:
        lines.append(
            f"  memory planned before loading      {plan['total'] / 2**30:.1f} GiB (weights"
            f" {plan['weights'] / 2**30:.1f}), measured peak {summary['peak_vram_gib']:.1f} GiB"
        )
    if "parsed_steps" in report:
        lines.append(f"  answers that parsed               {report['parsed_steps']} of {len(report['steps'])}")
    if not report["mamba_kernels"]:
        lines.append("  (the Mamba scan kernels were not used: the layers ran their PyTorch scan)")
    return "\n".join(lines)


def first_contact_report(
    arguments: argparse.Namespace, device_name: str, spec: GpuSpec, backend: LocalBackend
) -> dict[str, Any]:
    """The in-process engine's first contact with the loaded checkpoint, as a JSON-ready report."""
    from PIL import Image

    # heavy: torch
    from holodesk.inference.engine.check import contact_request, first_contact

    image = (
        Image.open(find_screenshots(arguments.screenshots)[0]).convert("RGB")
        if arguments.screenshots
        else canned_screenshots()[0]
    )
    report = first_contact(
        backend.engine,
        contact_request(frame_from_image(image), arguments.max_new_tokens),
        bandwidth_tb_s=spec.bandwidth_tb_s,
    )
    return {
        "device": arguments.device,
        "gpu": dataclasses.asdict(spec),
        "checkpoint": str(arguments.checkpoint),
        "engine": "in-process",
        "first_contact": dataclasses.asdict(report),
        "lines": report.lines(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        device_name = require_cuda(arguments.device)
        spec = gpu_spec(device_name, arguments.bandwidth, arguments.tflops)  # an unknown GPU fails before loading
        if arguments.screenshots:
            find_screenshots(arguments.screenshots)
    except (GpuUnavailable, ValueError) as exc:
        print(f"bench.gpu_step: {exc}", file=sys.stderr)
        return 2
    try:
        backend = load_backend(arguments)
        contact = first_contact_report(arguments, device_name, spec, backend)
    except InferenceError as exc:
        print(f"bench.gpu_step: {exc}", file=sys.stderr)
        return 2
    print("\n".join([f"{device_name}, first contact:", *contact["lines"]]), file=sys.stderr)
    report = run_steps(arguments, device_name, backend)
    report["first_contact"] = contact["first_contact"]
    print(format_summary(report), file=sys.stderr)
    text = json.dumps(report)
    if arguments.output is not None:
        arguments.output.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
