"""The Linux desktop entries validate, run the real commands, and install where XDG says."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
from pathlib import Path

import pytest

LINUX = Path(__file__).resolve().parents[2] / "packaging" / "linux"
ENTRIES = sorted(LINUX.glob("*.desktop"))


def read_entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are case-sensitive in desktop files
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def test_there_are_the_three_entries():
    assert [p.name for p in ENTRIES] == [
        "holodesk-autostart.desktop",
        "holodesk-new-task.desktop",
        "holodesk.desktop",
    ]


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: p.name)
def test_entries_pass_desktop_file_validate(path):
    validator = shutil.which("desktop-file-validate")
    if validator is None:
        pytest.fail("Debian's desktop-file-utils is missing (tests/run.sh installs it)", pytrace=False)
    result = subprocess.run([validator, str(path)], capture_output=True, text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: p.name)
def test_entries_run_holodesk_commands_that_exist(path):
    from holodesk.app.cli.main import build_parser

    entry = read_entry(path)
    command = entry["Exec"].split()
    assert command[0] == "holodesk"
    build_parser().parse_args(command[1:])  # exits (fails the test) on an unknown subcommand
    assert entry["Icon"] == "holodesk"
    # Once the command is gone (the package purged), a copied entry does nothing: desktops skip an
    # entry whose TryExec is not installed, autostart included.
    assert entry["TryExec"] == command[0]


def test_install_script_puts_entries_and_icon_in_xdg_folders(tmp_path):
    # PATH without holodesk, as at login: the script finds the project's .venv and writes its path.
    env = {
        **os.environ,
        "PATH": "/usr/bin:/bin",
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    subprocess.run(["bash", str(LINUX / "install-desktop-files.sh"), "--autostart"], env=env, check=True)
    installed = [
        tmp_path / "data/applications/holodesk.desktop",
        tmp_path / "data/applications/holodesk-new-task.desktop",
        tmp_path / "config/autostart/holodesk.desktop",
    ]
    for path in installed:
        command = read_entry(path)["Exec"].split()
        assert Path(command[0]).is_absolute() and os.access(command[0], os.X_OK), command
        assert read_entry(path)["TryExec"] == command[0]  # the same installation's command
    assert read_entry(installed[1])["Exec"].endswith("holodesk trigger prompt")
    assert (tmp_path / "data/icons/hicolor/scalable/apps/holodesk.svg").is_file()
    validator = shutil.which("desktop-file-validate")
    assert validator is not None
    for path in installed:
        assert subprocess.run([validator, str(path)], capture_output=True).returncode == 0
