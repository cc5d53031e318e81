"""One Holodesk per user AND display: the real tray app on two real Xvfb servers.

No HOLODESK_INSTANCE_NAME here (it would pin one name for every display): each test gets its own
XDG_RUNTIME_DIR instead, so the socket names are the ones a user gets and no real Holodesk is reached.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.common.instance_client import INSTANCE_NAME_ENV
from holodesk.automation.virtual_display import XvfbServer, start_xvfb
from tests.support.holodesk_command import HOLODESK_COMMAND

CONTROL_WINDOW = "Holodesk control"  # what the app shows in the tray's place when no tray host runs
PROMPT_WINDOW = "Holodesk: new task"


@pytest.fixture
def two_displays() -> Iterator[tuple[XvfbServer, XvfbServer]]:
    first = start_xvfb(800, 600)
    try:
        second = start_xvfb(800, 600)
    except BaseException:
        first.stop()
        raise
    yield first, second
    first.stop()
    second.stop()


def app_env(tmp_path: Path, display: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in (INSTANCE_NAME_ENV, "WAYLAND_DISPLAY")}
    env.update(
        DISPLAY=display,
        XDG_RUNTIME_DIR=str(tmp_path / "runtime"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        QT_QPA_PLATFORM="xcb",
        PYTHONUNBUFFERED="1",
    )
    (tmp_path / "runtime").mkdir(mode=0o700, exist_ok=True)
    config = tmp_path / "config" / "holodesk"
    config.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "answers.jsonl"
    script.write_text("", encoding="utf-8")
    (config / "settings.toml").write_text(f'[model]\nbackend = "scripted"\nscript = "{script}"\n', encoding="utf-8")
    return env


def visible_windows(env: dict[str, str], title: str) -> list[str]:
    """The ids of the mapped windows titled `title` on the display `env` names."""
    found = subprocess.run(
        ["xdotool", "search", "--onlyvisible", "--name", title], env=env, capture_output=True, text=True, timeout=10
    )
    return found.stdout.split()


def wait_for_window(env: dict[str, str], title: str, app: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not visible_windows(env, title):
        if app.poll() is not None:
            output = app.stdout.read() if app.stdout else ""
            pytest.fail(f"holodesk on {env['DISPLAY']} exited ({app.returncode}) without {title!r}: {output}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {title!r} window on {env['DISPLAY']} within {timeout_s} s")
        time.sleep(0.2)


def start_app(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*HOLODESK_COMMAND], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_app(app: subprocess.Popen[str]) -> None:
    app.terminate()
    try:
        app.wait(10)
    except subprocess.TimeoutExpired:
        app.kill()
        app.wait(10)


@pytest.mark.display
def test_each_display_gets_its_own_tray_and_a_second_start_on_one_hands_over(
    two_displays: tuple[XvfbServer, XvfbServer], tmp_path: Path
) -> None:
    first, second = two_displays
    first_env, second_env = app_env(tmp_path, first.display), app_env(tmp_path, second.display)
    apps: list[subprocess.Popen[str]] = []
    try:
        apps.append(start_app(first_env))
        wait_for_window(first_env, CONTROL_WINDOW, apps[0])
        apps.append(start_app(second_env))
        wait_for_window(second_env, CONTROL_WINDOW, apps[1])  # before the fix: "already running", and it exited
        assert apps[0].poll() is None and apps[1].poll() is None

        # `holodesk trigger` reaches the instance of its own display: the prompt opens there only.
        prompt = subprocess.run([*HOLODESK_COMMAND, "trigger"], env=second_env, capture_output=True, timeout=30)
        assert prompt.returncode == 0, prompt.stderr
        wait_for_window(second_env, PROMPT_WINDOW, apps[1])
        assert not visible_windows(first_env, PROMPT_WINDOW)

        # A second start on the first display (named ":N.0", the same display) still hands over and exits.
        again = subprocess.run(
            [*HOLODESK_COMMAND],
            env={**first_env, "DISPLAY": f"{first.display}.0"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stdout and first.display in again.stdout, again.stdout
        assert apps[0].poll() is None
    finally:
        for app in apps:
            stop_app(app)
