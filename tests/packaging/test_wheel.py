"""The wheel a user installs carries the icons and prompts, and the `holodesk` command."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_wheel_ships_assets_and_the_console_script(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("holodesk-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for state in ("idle", "loading", "thinking", "waiting", "acting", "error"):
        assert f"assets/icons/tray-{state}.svg" in names
    assert "assets/icons/holodesk.svg" in names
    assert "assets/prompts/holotron_navigation.txt" in names
    assert "app/main.py" in names and "inference/local.py" in names and "automation/engine.py" in names
    assert not any(name.startswith(("tests/", "bench/")) for name in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "holodesk = app.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
