"""Fixtures for the in-process backend: the tiny checkpoint (built once a session) and a loaded backend.

The Hugging Face environment is isolated at import, before any test module imports transformers:
offline mode, and a private modules cache for the checkpoint's remote code.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.tiny_vlm import isolate_hf_environment

isolate_hf_environment()

if TYPE_CHECKING:
    from inference.local import LocalBackend


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight VLM checkpoint directory that loads like Holotron-12B (see tests/support/tiny_vlm)."""
    from tests.support.tiny_vlm import build_tiny_checkpoint

    return build_tiny_checkpoint(tmp_path_factory.mktemp("checkpoints"))


@pytest.fixture(scope="session")
def tiny_backend(tiny_checkpoint: Path) -> Iterator[LocalBackend]:
    """The tiny checkpoint loaded once on the CPU in float32, tile budget 12 (tests that change it restore it)."""
    from inference.local import LocalBackend

    backend = LocalBackend(tiny_checkpoint, device="cpu", dtype="float32", max_tiles=12)
    backend.load()
    yield backend
    backend.unload()
