"""The first hour, end to end: `holodesk setup --model holo3.1-0.8b --yes` from a clean HOME, then `holodesk run`.

The loopback hub (tests/support/loopback_hub.py) serves, under Holo3.1-0.8B's repository name, a tiny
Qwen3.5 checkpoint built here and taught one answer in the holo3.1 profile's format: a click on the
test window's OK button. `holodesk setup` downloads it through huggingface_hub and writes the settings;
then `holodesk run`, offline and with the hub gone, takes everything from those settings (the local
backend, the holo3.1 profile, the downloaded folder, the CPU), runs the model's step in process and,
approved in the terminal, clicks the real window under Xvfb, which reports the click.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from holodesk.automation.coords import Rect
from tests.e2e.scripting import model_point
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.loopback_hub import HubRepo, running_hub

REPO = "Hcompany/Holo-3.1-0.8B"


def clean_home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "XDG_", "HOLODESK_"))}
    return env | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PYTHONUNBUFFERED": "1",
    }


def click_checkpoint(folder: Path, x: int, y: int) -> Path:
    """A tiny Qwen3.5 checkpoint that answers every step with holo3.1's JSON: a click at (x, y) of 0-1000."""
    from bench.qwen35_tiny import END_OF_TURN, Variant, build_qwen35_tiny

    step = {
        "note": None,
        "thought": "Press OK.",
        "tool_call": {"tool_name": "click_desktop", "element": "OK button", "x": x, "y": y},
    }
    script = ("The OK button is at the bottom.", "</think>", "\n\n", json.dumps(step), END_OF_TURN)
    return build_qwen35_tiny(folder, dtype="bfloat16", variant=Variant(name="holo31-click", script=script))


@pytest.mark.display
def test_setup_from_a_clean_home_then_run_clicks_the_window_on_the_cpu(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = model_point(target_window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    checkpoint = click_checkpoint(tmp_path / "tiny", ok.x, ok.y)
    env = clean_home(tmp_path)
    with running_hub(HubRepo.from_folder(REPO, checkpoint)) as hub:
        setup = subprocess.run(
            [*HOLODESK_COMMAND, "setup", "--model", "holo3.1-0.8b", "--device", "cpu", "--yes"],
            env=env | {"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    settings = tomllib.loads((Path(env["XDG_CONFIG_HOME"]) / "holodesk" / "settings.toml").read_text())
    assert settings["model"]["backend"] == "local" and settings["model"]["profile"] == "holo3.1"
    assert settings["model"]["local"]["device"] == "cpu"

    # The hub is gone and the hub client offline: the run uses only what setup left on disk.
    run = subprocess.Popen(
        [*HOLODESK_COMMAND, "run", "Press the OK button", "--max-steps", "1"],
        env=env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = run.communicate("a\n", timeout=600)
    assert "Step 1 proposes:" in out, out + err
    events = target_window.sync()
    assert [e["widget"] for e in events if e["event"] == "clicked"] == ["ok"], out + err
