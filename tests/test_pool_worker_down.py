"""The vLLM pool's hook on a parallel worker that goes down (tests/support/vllm_pool.py), on a real pytest-xdist run.

A throwaway suite in its own folder registers the pool's plugin as tests/conftest.py does. A worker that
finished hands the controller the servers it started, and the controller prints them; a worker that died
(at its start, or in the middle of a test) sent nothing, and the run must say why it died (its own words,
xdist's "node down" and "crashed"), not end in an INTERNALERROR from the pool's hook that hides it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

CONFTEST = """
import os, sys
from tests.support import vllm_pool

def pytest_configure(config):
    config.pluginmanager.register(vllm_pool.PoolPlugin(), "holodesk-vllm-pool")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if os.environ["HOW"] == "dies at start":
        sys.stderr.write("the worker's own cause: its checkpoint folder is gone\\n")
        sys.stderr.flush()
        os._exit(3)
    # What a worker whose pool started a server hands over at its end.
    config.stash[vllm_pool.STARTS_KEY] = [("tiny-server", 12.0)]
"""

TEST = """
import os, signal

def test_one():
    if os.environ["HOW"] == "dies in a test":
        os.kill(os.getpid(), signal.SIGKILL)
"""


def run_suite(root: Path, how: str) -> subprocess.CompletedProcess[str]:
    (root / "conftest.py").write_text(CONFTEST)
    (root / "test_one.py").write_text(TEST)
    # Not this test's own worker's variables (PYTEST_XDIST_WORKER would make the suite's controller a worker).
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env |= {"HOW": how, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1", "--max-worker-restart", "0"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_worker_that_finished_hands_over_the_servers_it_started(tmp_path: Path) -> None:
    run = run_suite(tmp_path, "finishes")
    said = run.stdout + run.stderr
    assert run.returncode == 0, said
    assert "vLLM servers the pool started: 1; their tests waited 12 s for them (tiny-server 12 s)" in said


@pytest.mark.parametrize(
    ("how", "cause"),
    [
        ("dies at start", "the worker's own cause: its checkpoint folder is gone"),
        ("dies in a test", "worker 'gw0' crashed while running 'test_one.py::test_one'"),
    ],
)
def test_a_worker_that_died_is_reported_with_its_own_cause(tmp_path: Path, how: str, cause: str) -> None:
    run = run_suite(tmp_path, how)
    said = run.stdout + run.stderr
    assert run.returncode != 0, said
    assert "INTERNALERROR" not in said and "workeroutput" not in said, said
    assert cause in said, said
    assert "[gw0] node down" in said and "worker gw0 crashed and worker restarting disabled" in said, said
