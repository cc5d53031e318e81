"""Fixtures for the in-process backend: the tiny real-layout checkpoint loaded once a session.

The checkpoints themselves (`tiny_checkpoint`, `answering_checkpoint`) and the Hugging Face
isolation live in tests/conftest.py, so engine, app and end-to-end tests share them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from holodesk.inference.local import LocalBackend


@pytest.fixture(scope="session")
def tiny_backend(tiny_checkpoint: Path) -> Iterator[LocalBackend]:
    """The tiny checkpoint loaded once on the CPU (float32, its saved dtype), tile budget 12."""
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(tiny_checkpoint, device="cpu", max_tiles=12)
    backend.load()
    yield backend
    backend.unload()
