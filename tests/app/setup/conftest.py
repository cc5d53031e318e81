"""The setup tests' shared fixture: a throwaway home (tests/app/setup/homes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.app.setup.homes import make_home


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return make_home(tmp_path)
