"""`python -m bench`: run the benchmarks, print one table (median and spread), write bench/results.json.

    python -m bench                       # everything this machine can run (a few minutes)
    python -m bench --only capture,parsing --repeats 30
    python -m bench --quick               # a smoke run: fewer rounds and sizes, figures not to quote
    python -m bench --gpu-model /models/Holotron-12B --gpu-screens shots/   # adds gpu_step on a GPU

Benchmarks are not tests: a goal that is not met is reported, not failed. The exit status is 1
only when a benchmark itself crashed (a bug), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from bench import gpu_step

# Before anything imports transformers: offline, a private remote-code cache, and quiet about the
# slow CPU Mamba path (expected here; bench.gpu_step reports the kernels where they matter).
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from bench.harness import BenchResult, BenchSettings, format_table, machine_description, offline_hub, write_results

# In run order; the overlay last (its Qt child process is the slowest to start).
BENCHMARKS = (
    "startup",
    "capture",
    "parsing",
    "engine",
    "model_step",
    "engine_reuse",
    "cpu_wait_policy",
    "decode_ops",
    "deltanet_cpu",
    "holo31_cpu_step",
    "memory",
    "eval_scaling",
    "overlay",
    "wayland",
    "gpu_step",
)
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results.json"


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--skip", help="comma-separated benchmarks not to run")
    parser.add_argument("--repeats", type=int, default=15, help="measured rounds per figure (default 15; scales all)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds before each interleaved set")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and rounds: a smoke run")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the JSON results")
    parser.add_argument("--gpu-model", type=Path, help="Holotron-12B checkpoint folder: run gpu_step (needs CUDA)")
    parser.add_argument(
        "--gpu-screens", type=Path, nargs="+", help="PNG screenshots or folders for gpu_step (default: canned desktops)"
    )
    parser.add_argument("--gpu-steps", type=int, default=10, help="steps gpu_step runs")
    arguments = parser.parse_args(argv)
    selected = list(BENCHMARKS)
    if arguments.only:
        selected = [name.strip() for name in arguments.only.split(",") if name.strip()]
    skipped = {name.strip() for name in (arguments.skip or "").split(",") if name.strip()}
    unknown = [name for name in [*selected, *skipped] if name not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    if arguments.repeats < 1 or arguments.warmup < 0:
        parser.error("--repeats must be at least 1 and --warmup at least 0")
    arguments.selected = [name for name in BENCHMARKS if name in selected and name not in skipped]
    return arguments


def run_gpu_step(arguments: argparse.Namespace) -> BenchResult:
    if arguments.gpu_model is None:
        result = BenchResult("gpu_step")
        result.notes.append("skipped: give --gpu-model and --gpu-screens on a CUDA machine (python -m bench.gpu_step)")
        return result
    try:
        device_name = gpu_step.require_cuda("cuda")
    except gpu_step.GpuUnavailable as exc:
        result = BenchResult("gpu_step")
        result.notes.append(f"skipped: {exc}")
        return result
    options = gpu_step.parse_arguments(
        [str(arguments.gpu_model), *map(str, arguments.gpu_screens or []), "--steps", str(arguments.gpu_steps)]
    )
    return gpu_step.bench_result(gpu_step.run_steps(options, device_name))


def run_one(name: str, arguments: argparse.Namespace, settings: BenchSettings) -> BenchResult:
    if name == "gpu_step":
        return run_gpu_step(arguments)
    module = importlib.import_module(f"bench.{name}")
    return module.run(settings)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    offline_hub()
    # One process, several X servers (an Xvfb per benchmark, XWayland in bench.wayland).
    from holodesk.automation.xlib_connections import give_each_connection_its_own_tables

    give_each_connection_its_own_tables()
    settings = BenchSettings(repeats=arguments.repeats, warmup=arguments.warmup, quick=arguments.quick)
    machine = machine_description()
    print(
        f"{machine['cpu']}, {machine['cores']} cores, {machine['ram_gib']} GiB; Python {machine['python']},"
        f" torch {machine['torch']}, transformers {machine['transformers']}",
        flush=True,
    )
    started = time.perf_counter()
    results: list[BenchResult] = []
    crashed = False
    for name in arguments.selected:
        print(f"running {name} ...", flush=True)
        began = time.perf_counter()
        try:
            result = run_one(name, arguments, settings)
        except Exception as exc:  # one broken benchmark must not lose the others' figures
            crashed = True
            traceback.print_exc()
            result = BenchResult(name)
            result.notes.append(f"crashed: {type(exc).__name__}: {exc}")
        result.extra["seconds"] = round(time.perf_counter() - began, 1)
        results.append(result)
    seconds = time.perf_counter() - started
    print()
    print(format_table([figure for result in results for figure in result.figures]))
    print()
    for result in results:
        for note in result.notes:
            print(f"[{result.benchmark}] {note}")
    write_results(arguments.output, results, machine, seconds)
    print(f"\n{len(results)} benchmarks in {seconds:.0f} s; results in {arguments.output}")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
