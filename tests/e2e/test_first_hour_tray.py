"""The first hour through the tray alone: from a clean HOME with no GPU to a first approved step.

`holodesk` (the tray app) starts with no settings and an empty Hugging Face cache on a computer without
an NVIDIA GPU, so it opens the first-run window; its first choice there (Holo3.1-0.8B on the CPU) is
downloaded by the window from the loopback hub (tests/support/loopback_hub.py). The hub serves, under
that model's repository name, the tiny Qwen3.5 checkpoint of tests/e2e/test_setup_first_run.py, taught
to answer with a click on the test window's OK button. The window closed, a task is typed in the tray's
prompt; the model runs in process on the CPU, its step shows on the approval panel, and once approved
the real window under Xvfb reports the click. No terminal command but starting the app.

With HOLODESK_TEST_SHOTS set to a folder, the screen is saved there at each stage, for a person to look at.
"""

from __future__ import annotations

import os
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from PIL import ImageGrab

from holodesk.automation.coords import Rect
from tests.app.setup.test_first_start_tray import FIRST_RUN, Tray
from tests.e2e.scripting import model_point
from tests.e2e.test_setup_first_run import REPO, clean_home, click_checkpoint
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.loopback_hub import HubRepo, running_hub

pytestmark = pytest.mark.display

PROMPT = "Holodesk: new task"
PANEL = r"Holodesk: approve this step\?"  # a regular expression, as xdotool searches
DOWNLOAD_S = 300.0  # the window's measuring, the download and its check, on a loaded 2-core machine
STEP_S = 300.0  # the model's load and its first step on the CPU


def shot(env: dict[str, str], name: str) -> None:
    """The screen as `name`.png in HOLODESK_TEST_SHOTS, when that is set."""
    folder = os.environ.get("HOLODESK_TEST_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        ImageGrab.grab(xdisplay=env["DISPLAY"]).save(Path(folder) / f"{name}.png")


def test_from_the_tray_to_a_first_approved_step_on_the_cpu(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = model_point(target_window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    checkpoint = click_checkpoint(tmp_path / "tiny", ok.x, ok.y)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = clean_home(tmp_path) | {
        "XDG_RUNTIME_DIR": str(runtime),  # the tray's own single-instance socket
        "CUDA_VISIBLE_DEVICES": "",  # no GPU, as on a laptop
        "QT_QPA_PLATFORM": "xcb",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    env.pop("HOLODESK_INSTANCE_NAME", None)
    settings = Path(env["XDG_CONFIG_HOME"]) / "holodesk" / "settings.toml"
    with running_hub(HubRepo.from_folder(REPO, checkpoint)) as hub:
        tray = Tray(env | {"HF_ENDPOINT": hub.url})
        try:
            tray.wait_until(lambda: tray.windows(FIRST_RUN), "the first-run window shown")
            (window,) = tray.windows(FIRST_RUN)
            shot(env, "1-first-run-window")
            tray.keys(window, "alt+d")  # Download, on the first choice the window selected
            tray.wait_until(settings.exists, "the download done and the settings written", DOWNLOAD_S)
            model = tomllib.loads(settings.read_text(encoding="utf-8"))["model"]
            assert (model["backend"], model["profile"], model["local"]["device"]) == ("local", "holo3.1", "cpu")
            shot(env, "2-downloaded")
            tray.keys(window, "Escape")
            tray.wait_until(lambda: not tray.windows(FIRST_RUN), "the first-run window closed")
            target_window.sync()  # the Escape's release may reach the window that gets the focus next

            trigger = subprocess.run([*HOLODESK_COMMAND, "trigger"], env=env, capture_output=True, timeout=30)
            assert trigger.returncode == 0, trigger.stderr
            tray.wait_until(lambda: tray.windows(PROMPT), "the task prompt shown")
            (prompt,) = tray.windows(PROMPT)
            tray.keys(prompt, "ctrl+a")
            tray.type("Press the OK button")
            tray.keys(prompt, "Return")
            tray.wait_until(lambda: tray.windows(PANEL), "the first step shown for approval", STEP_S)
            # The prompt closes on Enter's press, so its release may reach the window that has the focus
            # next (a fresh run saw it): that is the test's own key, not the step.
            seen = [e for e in target_window.sync() if not (e["event"] == "key_release" and e["key"] == "Return")]
            assert seen == [], f"the window saw something before the step was approved: {seen}"
            shot(env, "3-first-step-for-approval")
            (panel,) = tray.windows(PANEL)
            tray.keys(panel, "Return")  # Approve is the panel's default
            deadline = time.monotonic() + 60
            clicked: list[str] = []
            while not clicked and time.monotonic() < deadline:
                clicked = [e["widget"] for e in target_window.sync() if e["event"] == "clicked"]
                time.sleep(0.2)
            assert clicked == ["ok"], tray.output
            shot(env, "4-after-the-approved-click")
        finally:
            tray.stop()
