"""`python -m bench` runs each benchmark to the end: every one in its quick mode, as the command runs it.

Each benchmark is its own `python -m bench --only NAME --quick` process (the command's exit status is
1 when a benchmark crashed, and its results file names the crash), so a benchmark that breaks fails
here with its traceback. The engine benchmark's side-by-side reference (an older commit's engine in a
child process, bench/engine_reference.py) must run too wherever that commit is in the clone.
Benchmarks on a display carry its markers; the ones that run the tiny model for minutes are marked
`bench`, which the quick loop (`tests/run.sh --quick`) leaves out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import BENCHMARKS
from bench.engine import REFERENCE
from bench.engine_reference import REFERENCE_COMMIT, REPOSITORY

TIMEOUT_S = 900  # the tiny model's benchmarks take minutes on two loaded cores

MARKS = {
    "startup": [pytest.mark.display],
    "capture": [pytest.mark.display],
    "parsing": [],
    "engine": [pytest.mark.display],
    "model_step": [pytest.mark.bench],
    "engine_reuse": [pytest.mark.bench],
    "cpu_wait_policy": [pytest.mark.bench],
    "decode_ops": [pytest.mark.bench],
    "deltanet_cpu": [pytest.mark.bench],
    "holo31_cpu_step": [pytest.mark.bench, pytest.mark.vllm],  # its quick mode serves the tiny checkpoint
    "memory": [pytest.mark.display],
    "eval_scaling": [pytest.mark.display, pytest.mark.chromium],
    "overlay": [pytest.mark.display],
    "wayland": [pytest.mark.display, pytest.mark.wayland],
    "gpu_step": [],
}


def run_benchmark(name: str, folder: Path) -> dict[str, Any]:
    output = folder / "results.json"
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
    command = ["--only", name, "--quick", "--repeats", "1", "--warmup", "0", "--output", str(output)]
    finished = subprocess.run(
        [sys.executable, "-m", "bench", *command],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    shown = f"exit status {finished.returncode}\n{finished.stdout[-4000:]}\n{finished.stderr[-4000:]}"
    assert finished.returncode == 0, shown
    result = json.loads(output.read_text())["benchmarks"][name]
    assert not [note for note in result["notes"] if note.startswith("crashed")], shown
    return result


def test_every_benchmark_has_a_test_here() -> None:
    assert set(MARKS) == set(BENCHMARKS)


def reference_commit_is_here() -> bool:
    probe = ["git", "-C", str(REPOSITORY), "cat-file", "-e", f"{REFERENCE_COMMIT}^{{commit}}"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


@pytest.mark.parametrize("name", [pytest.param(name, marks=MARKS[name]) for name in BENCHMARKS])
def test_the_benchmark_runs_to_the_end_in_its_quick_mode(name: str, tmp_path: Path) -> None:
    result = run_benchmark(name, tmp_path)
    if name == "gpu_step":  # needs CUDA and a checkpoint: it says why it did not run
        assert result["notes"] == [
            "skipped: give --gpu-model and --gpu-screens on a CUDA machine (python -m bench.gpu_step)"
        ]
        return
    assert result["figures"], f"{name} measured nothing: {result['notes']}"
    if name == "holo31_cpu_step":
        # vLLM, transformers and the engine were given the same prompt: the same tokens, counted by each.
        figures = {figure["name"]: figure["median"] for figure in result["figures"]}
        for history in (1, 10):
            served = figures[f"vLLM, history {history}: prompt tokens"]
            assert served == figures[f"transformers, history {history}: prompt tokens"] > 1000
            assert served == figures[f"engine, history {history}: prompt tokens"]
            assert figures[f"vLLM, history {history}: peak RSS"] > 1.0  # GiB: the server's processes, all of them
        return
    if name == "decode_ops":  # the static decoders call fewer operators a token than transformers' forward
        calls = {figure["name"]: figure["median"] for figure in result["figures"]}
        for family in ("Holotron (Nemotron-H)", "Holo3.1 (Qwen3.5)"):
            static = calls[f"{family}, static decoder: outermost aten calls a token"]
            assert 0 < static < calls[f"{family}, transformers' forward: outermost aten calls a token"]
        return
    if name == "deltanet_cpu":  # both within bfloat16's precision of the rule's definition, float32 far closer
        errors = {figure["name"]: figure["median"] for figure in result["figures"] if "error" in figure["name"]}
        assert len(errors) == 4 and all(0 < error < 2e-2 for error in errors.values()), errors
        return
    if name != "engine":
        return
    # The reference runs the older checkout's own input layer beside today's engine.
    if not reference_commit_is_here():  # a shallow clone: said in the notes, not a crash
        assert any(f"reference engine ({REFERENCE_COMMIT[:10]}) skipped" in note for note in result["notes"])
        return
    assert result["extra"]["reference_commit"] == REFERENCE_COMMIT
    overhead = result["extra"][REFERENCE]["overhead"]
    assert overhead["n"] >= 7 and overhead["median"] > 0  # steps 2..8 of each run, measured
