"""The parallel workers' groups (tests/support/parallel.py), on a real pytest-xdist run of a small suite.

A throwaway suite in its own folder: tests of the vLLM pool (its `vllm_pool` fixture) in two files,
a `vllm`-marked file with no pool, `wayland`-marked tests in two files, benchmarks (`bench`) in one
file, and plain files. (A test that uses a pooled server through its own fixture only is found by the
pool's `item_specs`, which needs real servers' specs: the real suite decides that one.) Each test
writes which worker ran it. Run with the test command's own worker options, every test of the pool
must land on one worker (the pool plans in one process), every GNOME-stack test on one worker, the two
long groups must be the first two handed out, a plain file stays on one worker, and the benchmarks of
one file run on both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import parallel, timeline

REPO = Path(__file__).resolve().parent.parent

CONFTEST = """
import pytest
from tests.support import parallel, timeline

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    parallel.group_items(items)

@pytest.fixture(scope="session")
def vllm_pool():
    return "the pool"  # what the real suite's pool fixture is named: the tests using it are one group

def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: talks to vLLM")
    config.addinivalue_line("markers", "wayland: the GNOME stack")
    config.addinivalue_line("markers", "bench: a benchmark")
    config.pluginmanager.register(parallel.ParallelPlugin(), "holodesk-parallel")
    recorder = timeline.plugin_for()
    if recorder is not None:
        config.pluginmanager.register(recorder, "holodesk-timeline")
"""

TEST = """
import os, pathlib, time, pytest
{mark}
@pytest.mark.parametrize("n", range({count}))
def test_{name}(n, {fixtures}):
    log = pathlib.Path(os.environ["RUN_LOG"])
    with log.open("a") as f:
        f.write(f"{{os.environ['PYTEST_XDIST_WORKER']}} {name}\\n")
    if "bench" in "{name}":
        time.sleep(1)  # a benchmark takes a while: the other worker is free for the next one meanwhile
"""


def _suite(root: Path) -> None:
    (root / "conftest.py").write_text(CONFTEST)
    files = {
        # The plain files first in collection: front-loading must still start the long groups first.
        "test_a_plain": ("", 6),
        "test_b_plain": ("", 6),
        "test_c_vllm": ("pytestmark = pytest.mark.vllm", 4),  # the pool's users
        "test_cc_own_server": ("pytestmark = pytest.mark.vllm", 2),  # marked vllm, a server of its own
        "test_d_wayland": ("pytestmark = pytest.mark.wayland", 3),
        "test_e_plain": ("", 6),
        "test_f_vllm": ("pytestmark = pytest.mark.vllm", 4),
        "test_g_wayland": ("pytestmark = pytest.mark.wayland", 3),
        "test_h_bench": ("pytestmark = pytest.mark.bench", 4),
    }
    for name, (mark, count) in files.items():
        fixtures = "vllm_pool" if name.endswith("_vllm") else "tmp_path"
        text = TEST.format(mark=mark, count=count, name=name.removeprefix("test_"), fixtures=fixtures)
        (root / f"{name}.py").write_text(text)


def test_each_long_group_runs_on_one_worker_and_they_start_first(tmp_path: Path) -> None:
    _suite(tmp_path)
    log = tmp_path / "run.log"
    recorded = tmp_path / "timeline.jsonl"
    env = {**os.environ, "RUN_LOG": str(log), "PYTHONPATH": str(REPO), "HOLODESK_TEST_TIMELINE": str(recorded)}
    options = ["-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder"]  # as tests/run.sh gives them
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    ran = [line.split() for line in log.read_text().splitlines()]
    assert len(ran) == 38
    workers = {name: {worker for worker, test in ran if test == name} for _, name in ran}
    # Each of the long groups on one worker, whichever it is.
    assert len(workers["c_vllm"] | workers["f_vllm"]) == 1, ran
    assert len(workers["d_wayland"] | workers["g_wayland"]) == 1, ran
    # Every plain file on one worker (its module fixtures set up once).
    assert all(len(workers[name]) == 1 for name in ("a_plain", "b_plain", "cc_own_server", "e_plain")), ran
    # The benchmarks are a group each: two workers share one file's.
    assert len(workers["h_bench"]) == 2, ran
    # Each worker's first test belongs to a long group: vLLM on one, the GNOME stack on the other.
    first = {worker: test for worker, test in reversed(ran)}
    assert sorted(first.values()) == ["c_vllm", "d_wayland"], ran
    # The timeline (tests/support/timeline.py) has each test once, on the worker that ran it, in its group.
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    recorded_runs = [[line["worker"], line["test"].split("::")[1].split("[")[0][5:]] for line in lines]
    assert sorted(recorded_runs) == sorted(ran)
    assert {line["group"] for line in lines if "_vllm.py" in line["test"]} == {parallel.VLLM}
    assert all(line["end"] >= line["start"] for line in lines)
    summary = timeline.summary(lines)
    assert summary.count(" tests, busy ") == 2 and " s  vllm" in summary, summary
