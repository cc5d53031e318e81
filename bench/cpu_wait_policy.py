"""OpenMP's wait policy on the CPU: the tiny model's decode speed with spinning and with sleeping threads.

torch's CPU kernels run on OpenMP threads, which by default spin for a while after each parallel
region before they sleep. The model runs thousands of small kernels per token; when the machine's
cores are busy with other programs (a user's desktop, or a test suite's servers), every spin takes a
core from them and the decode slows down many times over. `holodesk` sets OMP_WAIT_POLICY=PASSIVE
unless the user set it (holodesk.app.cli.main), and so does the test command.

Each case is a fresh process (OpenMP reads the variable once, when torch loads): the tiny random
checkpoint (bench/nemotron_tiny, float32) in the engine, one unmeasured answer, then a text prompt
decoded for a fixed number of tokens past any stop token. Measured with OpenMP's default (the
variable unset) and with PASSIVE, on the machine as it is and with one CPU-bound process per core
beside it (`busy`), interleaved round by round (--quick: one round as it is, 16 tokens).

    python -m bench --only cpu_wait_policy       # or: python -m bench.cpu_wait_policy [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from bench.harness import BenchResult, BenchSettings, format_table, machine_description, stats_of, write_results
from holodesk.inference.engine.spec import transformers_problem
from holodesk.inference.profiles.base import ChatRequest

NAME = "cpu_wait_policy"
POLICIES = ("unset", "PASSIVE")  # OpenMP's own default, and holodesk's
LOADS = ("as is", "busy")
CHILD_TIMEOUT_S = 600.0
BURNER = "while True: pass"


def decode_ms_per_token(checkpoint: Path, tokens: int) -> float:
    """In this process: the engine's decode time per token on the CPU (after one unmeasured answer)."""
    import logging

    import transformers

    # heavy: torch
    from holodesk.inference.engine.runner import Engine

    transformers.utils.logging.set_verbosity_error()  # the pure-torch Mamba notice is expected on a CPU
    logging.getLogger("transformers").setLevel(logging.ERROR)
    engine = Engine(checkpoint, dtype="float32", reuse=False)
    request = ChatRequest([{"role": "user", "content": "Open the settings and turn on dark mode."}])
    engine.generate(request, max_new_tokens=4, ignore_stop=True)
    answer = engine.generate(request, max_new_tokens=tokens, ignore_stop=True)
    return answer.timings.decode_s * 1000 / max(1, len(answer.new_ids) - 1)


@contextlib.contextmanager
def busy_cores(load: str) -> Iterator[None]:
    """With "busy", one CPU-bound process per core while the block runs; "as is" adds nothing."""
    burners = []
    if load == "busy":
        burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(timeout=10)


def measure(checkpoint: Path, policy: str, tokens: int) -> float:
    """A child process's decode ms per token under `policy`."""
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if policy != "unset":
        env["OMP_WAIT_POLICY"] = policy
    done = subprocess.run(
        [sys.executable, "-m", "bench.cpu_wait_policy", "--child", str(checkpoint), "--tokens", str(tokens)],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the decode process under {policy} exited {done.returncode}: {done.stderr[-1500:]}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["ms_per_token"])


def run(settings: BenchSettings) -> BenchResult:
    # heavy: safetensors, torch
    from bench.nemotron_tiny import build_nemotron_tiny

    result = BenchResult(NAME)
    problem = transformers_problem()
    if problem:
        result.notes.append(f"not run: {problem}")
        return result
    rounds = 1 if settings.quick else settings.rounds(3)
    tokens = 16 if settings.quick else 128
    # The quick run (a smoke run, the test suite's) leaves out the busy load: it would take every core
    # from whatever runs beside it for as long as its cases load torch.
    loads = LOADS[:1] if settings.quick else LOADS
    times: dict[tuple[str, str], list[float]] = {(load, policy): [] for load in loads for policy in POLICIES}
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as work:
        checkpoint = build_nemotron_tiny(Path(work) / "nemotron_tiny", dtype="float32")
        for round_index in range(rounds):
            for load in loads:
                # Alternate which policy goes first, so that neither always meets a warmer machine.
                order = POLICIES if round_index % 2 == 0 else POLICIES[::-1]
                with busy_cores(load):
                    for policy in order:
                        times[load, policy].append(measure(checkpoint, policy, tokens))
    for load in loads:
        for policy in POLICIES:
            result.add(f"decode per token, {load}, OMP_WAIT_POLICY={policy}", stats_of(times[load, policy]))
        ratios = [a / p for a, p in zip(times[load, "unset"], times[load, "PASSIVE"], strict=True)]
        result.add(f"{load}: unset / PASSIVE time per token", stats_of(ratios, "x"))
    result.notes.append(
        f"{tokens} tokens decoded per case, {os.cpu_count()} cores, busy = one CPU-bound process per core;"
        f" load average at the end {os.getloadavg()[0]:.1f}"
    )
    if settings.quick:
        result.notes.append("quick run: the machine as it is only (the busy load is the full run's)")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu_wait_policy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer tokens")
    parser.add_argument("--repeats", type=int, default=15, help="measured rounds (scaled: 15 gives 3)")
    parser.add_argument("--output", type=Path, help="also write the JSON results here")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # a measured process: the checkpoint
    parser.add_argument("--tokens", type=int, default=128, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child is not None:
        print(json.dumps({"ms_per_token": decode_ms_per_token(arguments.child, arguments.tokens)}))
        return 0
    started = time.perf_counter()
    result = run(BenchSettings(repeats=arguments.repeats, quick=arguments.quick))
    print(format_table(result.figures))
    for note in result.notes:
        print(f"[{NAME}] {note}")
    if arguments.output is not None:
        write_results(arguments.output, [result], machine_description(), time.perf_counter() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
