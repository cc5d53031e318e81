"""A model that is not on this computer: the error a first run meets names `holodesk setup` as a way out."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodesk.inference.checkpoint import find_checkpoint
from holodesk.inference.errors import ModelLoadError


def test_a_repository_missing_from_the_cache_points_at_holodesk_setup(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError) as caught:
        find_checkpoint("Hcompany/Holo-3.1-0.8B", cache_dir=tmp_path)
    assert "run `holodesk setup` to choose a model that fits this computer and download it" in str(caught.value)
