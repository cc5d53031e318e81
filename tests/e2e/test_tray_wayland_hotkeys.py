"""The tray app's keys on a Wayland session: shortcuts bound through the real portal 1.16, or `holodesk trigger`.

The app runs on Xvfb through Qt's xcb platform (as under XWayland, where xdotool can see its
windows) with the headless GNOME stack's D-Bus and Wayland variables, so it takes the Wayland
hotkey path; HOLODESK_BACKEND=x11 keeps its screenshots and input on Xvfb, so a run needs no
screen-sharing dialog. The desktop's shortcut presses come from tests/support/shortcuts_backend.py
behind the real xdg-desktop-portal frontend; no real desktop's backend is exercised.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.gnome_stack import StackError
from tests.e2e.scripting import holotron
from tests.e2e.test_tray_app import scripted_settings, stop_holodesk, wait_for_session_end, wait_for_window, xdotool
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.shortcuts_portal import ShortcutsStack

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack

STACK_VARIABLES = ("DBUS_SESSION_BUS_ADDRESS", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE", "XDG_CURRENT_DESKTOP")


def start_stack(global_shortcuts: bool) -> ShortcutsStack:
    stack = ShortcutsStack(global_shortcuts=global_shortcuts)
    try:
        return stack.start()
    except StackError as exc:
        pytest.fail(f"the headless GNOME stack did not start: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def desktop(xvfb) -> Iterator[ShortcutsStack]:
    stack = start_stack(global_shortcuts=True)
    yield stack
    stack.stop()


def start_tray(stack: ShortcutsStack, tmp_path: Path, model_settings: str) -> tuple[subprocess.Popen[str], Path, dict]:
    """`holodesk` with the stack's session variables on the Xvfb display; returns once it listens."""
    config = tmp_path / "config" / "holodesk"
    config.mkdir(parents=True)
    sessions = tmp_path / "sessions"
    (config / "settings.toml").write_text(
        f'[model]\n{model_settings}\n\n[sessions]\nfolder = "{sessions}"\n', encoding="utf-8"
    )
    stack_env = stack.env()
    env = {
        **os.environ,
        **{key: stack_env[key] for key in STACK_VARIABLES},
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOLODESK_INSTANCE_NAME": f"test-{os.getpid()}-{time.monotonic_ns()}",
        "HOLODESK_BACKEND": "x11",
        "QT_QPA_PLATFORM": "xcb",
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [*HOLODESK_COMMAND], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 30
    while subprocess.run([*HOLODESK_COMMAND, "trigger", "show"], env=env, capture_output=True).returncode != 0:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, "holodesk did not start listening"
        time.sleep(0.2)
    return process, sessions, env


def wait_for_binding(stack: ShortcutsStack, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not stack.sessions():
        assert time.monotonic() < deadline, "the tray app bound no shortcuts through the portal"
        time.sleep(0.1)


def test_the_desktops_shortcut_opens_the_prompt_and_its_stop_shortcut_stops_a_run(
    desktop: ShortcutsStack, tmp_path: Path
) -> None:
    answers = [holotron("click_desktop", x=500, y=500, thought="Click the middle.")]
    process, sessions, _ = start_tray(desktop, tmp_path, scripted_settings(tmp_path, answers))
    try:
        wait_for_binding(desktop)
        assert desktop.press("CTRL+ALT+h") == 1  # the prompt hotkey of the settings, as the preferred keys
        prompt = wait_for_window("Holodesk: new task")
        xdotool("windowfocus", "--sync", prompt)
        xdotool("type", "--delay", "5", "Click the middle")
        xdotool("key", "Return")
        wait_for_window("Holodesk: approve")  # the run waits for the user's approval

        # "Esc twice" has no shortcut form: the user gives the stop shortcut keys in the desktop's settings.
        assert desktop.assign("stop", "CTRL+ALT+period") == 1
        assert desktop.press("CTRL+ALT+period") == 1
        session = wait_for_session_end(sessions, process)
    finally:
        stop_holodesk(process)
    output = process.stdout.read() if process.stdout else ""
    assert session.outcome == "stopped", session.end
    assert "The desktop bound Holodesk's shortcuts. Holodesk: open the task prompt: Ctrl+Alt+H" in output
    assert "stop the running task: no keys yet" in output
    # Quitting closed the portal session.
    deadline = time.monotonic() + 5
    while desktop.sessions() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert desktop.sessions() == []


def test_without_global_shortcuts_the_app_says_how_to_bind_holodesk_trigger_and_that_works(
    xvfb, tmp_path: Path
) -> None:
    stack = start_stack(global_shortcuts=False)  # the portal of GNOME 43
    try:
        process, _, env = start_tray(stack, tmp_path, 'backend = "scripted"')
        try:
            result = subprocess.run([*HOLODESK_COMMAND, "trigger"], env=env, capture_output=True, text=True)
            assert result.returncode == 0, result.stderr
            wait_for_window("Holodesk: new task")
            time.sleep(1.0)  # the portal is asked on a worker thread; its answer may come after the prompt
        finally:
            stop_holodesk(process)
    finally:
        stack.stop()
    output = process.stdout.read() if process.stdout else ""
    notice = "holodesk: Global shortcuts unavailable: this desktop's portal offers no GlobalShortcuts interface"
    assert output.count(notice) == 1, output
    assert "`holodesk trigger` (opens the task prompt) and `holodesk trigger stop`" in output
