"""The tiny real-layout checkpoint (float32, tests/conftest.py's `tiny_checkpoint`) loaded once by the engine.

The engine needs transformers' native Nemotron-H, which the holotron extra (and so the test extra)
pins. A transformers without it is a usage error here, never a skip: a skipped engine tier would pass
unseen.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holodesk.inference.engine.runner import Engine
from holodesk.inference.engine.spec import transformers_problem


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    problem = transformers_problem()
    if problem is not None and any(here in item.path.parents for item in items):
        raise pytest.UsageError(f"the in-process engine's tests cannot run: {problem}")


@pytest.fixture(scope="session")
def real_layout_checkpoint(tiny_checkpoint: Path) -> Path:
    return tiny_checkpoint


@pytest.fixture(scope="session")
def engine(real_layout_checkpoint: Path) -> Engine:
    return Engine(real_layout_checkpoint, device="cpu", dtype="float32")
