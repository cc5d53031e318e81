"""bench.memory's real-app child: its settings select the scripted backend, and the app is measured and ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.memory import _read_status_mib, run_app, write_app_settings
from holodesk.app.common.settings import read_settings
from holodesk.automation.virtual_display import XvfbServer
from holodesk.inference.scripted import ScriptedBackend


def test_app_settings_select_the_scripted_backend_with_a_one_answer_script(tmp_path: Path) -> None:
    env = write_app_settings(tmp_path)
    assert set(env) == {"XDG_CONFIG_HOME", "XDG_DATA_HOME"}
    assert Path(env["XDG_DATA_HOME"]).is_dir()
    model = read_settings(Path(env["XDG_CONFIG_HOME"]) / "holodesk" / "settings.toml").model
    assert model.backend == "scripted"
    assert model.script is not None and ScriptedBackend.from_file(model.script).remaining == 1


def test_status_figures_are_read_in_mib(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t4\n", encoding="utf-8")
    assert _read_status_mib(status) == {"VmHWM": 200.0, "VmRSS": 100.0}


@pytest.mark.display
def test_the_real_tray_app_is_measured_then_terminated(xvfb: XvfbServer, tmp_path: Path) -> None:
    report = run_app(xvfb, tmp_path / "app")
    # A Qt app without torch: tens of MiB, far from the hundreds a loaded model takes.
    assert 30 < report["VmRSS"] <= report["VmHWM"] < 400
    assert report["seconds"] > 0
