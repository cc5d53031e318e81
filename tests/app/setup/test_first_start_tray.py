"""The tray's first start with no model chosen: the real `holodesk` on its own Xvfb opens the first-run window.

No settings file, an empty Hugging Face cache and no GPU (this computer's, or CUDA hidden): the default
model cannot run, so the first-run window opens instead of a model load that fails. Closing it leaves
the tray running and says what to do next; a server chosen in it is saved, and the next start loads it
without the window.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import ImageGrab

from bench.rigs.fake_openai_server import FakeOpenAIServer
from holodesk.app.common.instance_client import INSTANCE_NAME_ENV
from holodesk.automation.virtual_display import XvfbServer, start_xvfb
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = pytest.mark.display

FIRST_RUN = "Holodesk: choose a model"
CONTROL_WINDOW = "Holodesk control"
WAIT_S = 90


@pytest.fixture
def display() -> Iterator[XvfbServer]:
    server = start_xvfb(1024, 768)
    yield server
    server.stop()


@pytest.fixture
def env(display: XvfbServer, tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    runtime = tmp_path / "runtime"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    drop = (INSTANCE_NAME_ENV, "WAYLAND_DISPLAY", "HF_HUB_OFFLINE", "HOLODESK_API_KEY", "HOLODESK_BACKEND")
    values = {key: value for key, value in os.environ.items() if key not in drop}
    values.update(
        DISPLAY=display.display,
        HOME=str(home),
        XDG_RUNTIME_DIR=str(runtime),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        HF_HOME=str(home / ".cache" / "huggingface"),  # empty: Holotron-12B is not downloaded
        CUDA_VISIBLE_DEVICES="",  # no GPU, as on a laptop
        QT_QPA_PLATFORM="xcb",
        PYTHONUNBUFFERED="1",
    )
    return values


AMBER = (0x7A, 0x4B, 0x00)  # the control window's problem buttons (app/gui/tray.py's style sheet)


def amber_button(display: str) -> tuple[int, int]:
    """The centre of the amber pixels on the screen: the control window's 'no model yet' button."""
    picture = np.asarray(ImageGrab.grab(xdisplay=display).convert("RGB"))
    ys, xs = np.nonzero(np.all(picture == AMBER, axis=-1))
    assert len(xs), "no amber button on the screen"
    return int((xs.min() + xs.max()) // 2), int((ys.min() + ys.max()) // 2)


def settings_file(env: dict[str, str]) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "holodesk" / "settings.toml"


class Tray:
    """The real tray app, its output read on a thread (so a full pipe never stalls it)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.process = subprocess.Popen(
            [*HOLODESK_COMMAND], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def windows(self, title: str) -> list[str]:
        found = subprocess.run(
            ["xdotool", "search", "--onlyvisible", "--name", f"^{title}$"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return found.stdout.split()

    def wait_until(self, condition, what: str, timeout_s: float = WAIT_S) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while not condition():
            if self.process.poll() is not None:
                pytest.fail(f"holodesk exited ({self.process.returncode}) before {what}:\n{self.output}")
            if time.monotonic() > deadline:
                pytest.fail(f"not {what} within {timeout_s} s:\n{self.output}")
            time.sleep(0.2)

    def keys(self, window: str, *keys: str) -> None:
        subprocess.run(["xdotool", "windowfocus", "--sync", window], env=self.env, check=True, timeout=10)
        subprocess.run(["xdotool", "key", "--clearmodifiers", *keys], env=self.env, check=True, timeout=10)

    def type(self, text: str) -> None:
        subprocess.run(["xdotool", "type", "--delay", "20", text], env=self.env, check=True, timeout=30)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def trays() -> Iterator[list[Tray]]:
    started: list[Tray] = []
    yield started
    for tray in started:
        tray.stop()


def test_closing_the_first_run_window_leaves_the_tray_running_and_says_what_to_do(env, trays) -> None:
    tray = Tray(env)
    trays.append(tray)
    tray.wait_until(lambda: tray.windows(FIRST_RUN), "the first-run window shown")
    (window,) = tray.windows(FIRST_RUN)
    tray.keys(window, "Escape")

    tray.wait_until(lambda: "No model chosen" in tray.output, "'No model chosen' said")
    assert not tray.windows(FIRST_RUN)
    assert "Choose a model…" in tray.output and "holodesk setup" in tray.output, tray.output
    assert tray.windows(CONTROL_WINDOW) and tray.process.poll() is None  # still running, its window there
    # The default model was never tried: no failed load, no "no NVIDIA GPU" later.
    assert "Model not available" not in tray.output and "NVIDIA" not in tray.output, tray.output
    assert not settings_file(env).exists(), "a close wrote the settings"

    # The control window's warning button (its amber colour, found on the screen) opens the window again.
    x, y = amber_button(env["DISPLAY"])
    subprocess.run(["xdotool", "mousemove", str(x), str(y), "click", "1"], env=env, check=True, timeout=10)
    tray.wait_until(lambda: tray.windows(FIRST_RUN), "the first-run window opened by the warning button")
    (window,) = tray.windows(FIRST_RUN)
    tray.keys(window, "Escape")
    tray.wait_until(lambda: not tray.windows(FIRST_RUN), "the first-run window closed again")

    # A task typed anyway is refused in the same words, and the window comes back to choose.
    trigger = subprocess.run([*HOLODESK_COMMAND, "trigger"], env=env, capture_output=True, timeout=30)
    assert trigger.returncode == 0, trigger.stderr
    prompt = "Holodesk: new task"
    tray.wait_until(lambda: tray.windows(prompt), "the task prompt shown")
    (prompt_window,) = tray.windows(prompt)
    tray.keys(prompt_window, "ctrl+a")
    tray.type("open the calculator")
    tray.keys(prompt_window, "Return")
    tray.wait_until(lambda: "Task not started: Holodesk is running, but it has no model" in tray.output, "refused")
    tray.wait_until(lambda: tray.windows(FIRST_RUN), "the first-run window shown again")


def test_a_server_chosen_in_the_first_run_window_is_saved_and_the_window_does_not_open_again(env, trays) -> None:
    with FakeOpenAIServer() as server:
        tray = Tray(env)
        trays.append(tray)
        tray.wait_until(lambda: tray.windows(FIRST_RUN), "the first-run window shown")
        (window,) = tray.windows(FIRST_RUN)
        tray.keys(window, "End")  # the last line: a server elsewhere; the URL field takes the focus
        tray.type(server.root_url.removeprefix("http://"))  # as a person types it: no scheme, no /v1
        tray.keys(window, "Return")
        tray.wait_until(lambda: settings_file(env).exists(), "the settings written")
        model = tomllib.loads(settings_file(env).read_text(encoding="utf-8"))["model"]
        assert model["backend"] == "remote" and model["profile"] == "holotron"
        assert model["remote"] == {"base_url": server.base_url, "model": "Hcompany/Holotron-12B"}
        # The window's check is one GET /models; the tray then loads the chosen server at once and asks it
        # again (its preflight), maybe before this test saw the file: counted from the start, not from now.
        tray.wait_until(lambda: len(server.requests) >= 2, "the chosen server asked by the tray")
        tray.stop()

        before = len(server.requests)
        again = Tray(env)
        trays.append(again)
        # The second start goes straight to the model: the window opens (if at all) before the load starts.
        again.wait_until(
            lambda: len(server.requests) > before or again.windows(FIRST_RUN),
            "the saved server asked on the next start",
        )
        assert not again.windows(FIRST_RUN), "the first-run window opened again after a choice was saved"
