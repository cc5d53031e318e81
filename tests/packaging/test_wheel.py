"""The wheel a user installs: one `holodesk` namespace holding all the code, the icons and prompts, and the command."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# Repository folder -> where it lives in an install (pyproject.toml's package-dir).
INSTALLED_AS = {"app": "holodesk/app", "automation": "holodesk/automation", "inference": "holodesk/inference"}
# Left out of the copy the wheel is built from: environments, caches and earlier builds.
NOT_COPIED = (".git", ".venv*", "build", "dist", "*.egg-info", ".*_cache", "__pycache__")


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy without build/: setuptools keeps what an earlier build put in build/lib and
    # ships it again, so a package left out of pyproject.toml passed here once any build had held it.
    source = tmp_path_factory.mktemp("source") / "holodesk"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_COPIED))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("holodesk-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        names.add("::entry_points::" + archive.read(entry_points).decode())
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        names.add("::metadata::" + archive.read(metadata).decode())
    return names


def test_the_top_level_holds_only_holodesk_and_its_metadata(wheel_names: set[str]) -> None:
    top = {name.split("/", 1)[0] for name in wheel_names if not name.startswith("::")}
    assert {t for t in top if not t.endswith(".dist-info")} == {"holodesk"}


def test_every_module_of_the_repository_is_installed(wheel_names: set[str]) -> None:
    for folder, installed in INSTALLED_AS.items():
        for source in (REPO / folder).rglob("*.py"):
            relative = source.relative_to(REPO / folder).as_posix()
            assert f"{installed}/{relative}" in wheel_names, f"{folder}/{relative} is not in the wheel"


def test_the_icons_and_prompts_ship(wheel_names: set[str]) -> None:
    for state in ("idle", "loading", "thinking", "waiting", "acting", "error"):
        assert f"holodesk/assets/icons/tray-{state}.svg" in wheel_names
    assert "holodesk/assets/icons/holodesk.svg" in wheel_names
    assert "holodesk/assets/prompts/holotron_navigation.txt" in wheel_names


def test_no_tests_benchmarks_or_test_kernels_ship(wheel_names: set[str]) -> None:
    files = {name for name in wheel_names if not name.startswith("::")}  # not the metadata's text (the README)
    assert not any(name.startswith(("tests/", "bench/", "holodesk/tests/")) for name in files)
    assert not any("mamba_ssm" in name or "nemotron_tiny" in name for name in files)


def test_the_gpu_less_install_requires_neither_torch_nor_transformers(wheel_names: set[str]) -> None:
    """The base requirements leave both to the holotron extra, which pins the engine's transformers."""
    (metadata,) = (name for name in wheel_names if name.startswith("::metadata::"))
    lines = metadata.splitlines()
    requirements = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    base = [r for r in requirements if "extra ==" not in r]
    assert base and not [r for r in base if r.lower().startswith(("torch", "transformers"))], base
    holotron = [r.split(";")[0].strip() for r in requirements if 'extra == "holotron"' in r]
    assert "transformers==5.19.0" in holotron and "torch==2.13.0" in holotron, holotron


def test_the_console_script_names_the_namespaced_entry_point(wheel_names: set[str]) -> None:
    (entry_points,) = (name for name in wheel_names if name.startswith("::entry_points::"))
    assert "holodesk = holodesk.app.cli.main:main" in entry_points
