"""The tiny real-layout checkpoint (float32) built once and loaded once by the in-process engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodesk.inference.engine.runner import Engine


@pytest.fixture(scope="session")
def real_layout_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.support.nemotron_tiny import build_nemotron_tiny

    return build_nemotron_tiny(tmp_path_factory.mktemp("engine") / "nemotron_tiny", dtype="float32")


@pytest.fixture(scope="session")
def engine(real_layout_checkpoint: Path) -> Engine:
    return Engine(real_layout_checkpoint, device="cpu", dtype="float32")
