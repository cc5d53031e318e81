"""The tray application as a person uses it, under Xvfb: start `holodesk`, press the hotkey, type a
task, approve each step on the approval panel, and watch a scripted policy drive a real window."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND


def xdotool(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=10, check=check)


def wait_for_window(title: str, timeout_s: float = 20.0) -> str:
    """The X window id of the first mapped window whose title matches."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = xdotool("search", "--onlyvisible", "--name", title, check=False)
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.split()[0]
        time.sleep(0.1)
    raise AssertionError(f"no visible window titled {title!r} within {timeout_s} s")


def wait_until_hidden(window_id: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        visible = xdotool("search", "--onlyvisible", "--name", "Holodesk: approve", check=False).stdout.split()
        if window_id not in visible:
            return
        time.sleep(0.05)
    raise AssertionError("the approval panel did not hide")


def start_holodesk(tmp_path, model_settings: str):
    """Start `holodesk` (the tray app) with these [model] settings; returns (process, sessions, env)."""
    config = tmp_path / "config" / "holodesk"
    config.mkdir(parents=True)
    sessions = tmp_path / "sessions"
    (config / "settings.toml").write_text(
        f'[model]\n{model_settings}\n\n[sessions]\nfolder = "{sessions}"\n', encoding="utf-8"
    )
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOLODESK_INSTANCE_NAME": f"test-{os.getpid()}-{time.monotonic_ns()}",
        "QT_QPA_PLATFORM": "xcb",
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [*HOLODESK_COMMAND], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    # The instance is up once `holodesk trigger show` reaches it.
    deadline = time.monotonic() + 30
    while True:
        trigger = subprocess.run([*HOLODESK_COMMAND, "trigger", "show"], env=env, capture_output=True, timeout=20)
        if trigger.returncode == 0:
            break
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "holodesk did not start listening"
        time.sleep(0.2)
    return process, sessions, env


def stop_holodesk(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


def scripted_settings(tmp_path, answers: list[str]) -> str:
    script = tmp_path / "answers.jsonl"
    script.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return f'backend = "scripted"\nscript = "{script}"'


def wait_for_session_end(sessions, process, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        folders = list(iter_session_folders(sessions))
        if folders and read_session(folders[0]).end is not None:
            return read_session(folders[0])
        time.sleep(0.2)
    raise AssertionError(f"the run did not finish; holodesk is {'running' if process.poll() is None else 'gone'}")


def open_prompt_with_the_hotkey(timeout_s: float = 60.0) -> str:
    """Press the prompt hotkey until the prompt shows; its window id.

    The hotkey listener starts a moment after the instance listens (a loaded machine makes that
    moment longer), so a press may come before it; pressing again while the prompt is open only
    raises it.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        xdotool("key", "ctrl+alt+h")
        try:
            return wait_for_window("Holodesk: new task", timeout_s=3)
        except AssertionError:
            if time.monotonic() > deadline:
                raise AssertionError(f"the prompt hotkey opened no prompt within {timeout_s:g} s") from None


def type_task(task: str) -> None:
    prompt = open_prompt_with_the_hotkey()
    xdotool("windowfocus", "--sync", prompt)
    xdotool("type", "--delay", "5", task)
    xdotool("key", "Return")


@pytest.fixture
def holodesk_app(xvfb, target_window, tmp_path):
    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    field = model_point(target_window.centre("field"), screen)
    ok = model_point(target_window.centre("ok"), screen)
    answers = [
        holotron("write_desktop", content="Grace Hopper", x=field.x, y=field.y, thought="Type the name."),
        holotron("click_desktop", x=ok.x, y=ok.y, thought="Confirm."),
        holotron("answer", content="Name entered."),
    ]
    process, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    yield process, sessions
    stop_holodesk(process)


@pytest.mark.display
def test_hotkey_task_and_approvals_drive_a_real_window(holodesk_app, target_window):
    process, sessions = holodesk_app
    prompt = open_prompt_with_the_hotkey()
    xdotool("windowfocus", "--sync", prompt)
    xdotool("type", "--delay", "5", "Enter the name")
    xdotool("key", "Return")

    for _ in range(2):  # two desktop steps to approve; the answer needs none
        panel = wait_for_window("Holodesk: approve")
        geometry = xdotool("getwindowgeometry", "--shell", panel).stdout
        values = dict(line.split("=") for line in geometry.split())
        # Click Approve: the panel's buttons are along its bottom edge; clicking into the panel
        # then pressing Enter approves without knowing the button's exact place.
        xdotool("mousemove", str(int(values["X"]) + 8), str(int(values["Y"]) + 8), "click", "1")
        xdotool("key", "Return")
        wait_until_hidden(panel)

    deadline = time.monotonic() + 30
    folder = None
    while time.monotonic() < deadline:
        folders = list(iter_session_folders(sessions))
        if folders and read_session(folders[0]).end is not None:
            folder = folders[0]
            break
        time.sleep(0.2)
    assert folder is not None, f"the run did not finish; holodesk is {'running' if process.poll() is None else 'gone'}"
    session = read_session(folder)
    assert session.outcome == "done", session.end
    assert [s["decision"] for s in session.steps] == ["approve", "approve", "final"]
    events = target_window.sync()
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "Grace Hopper"
    assert [e["widget"] for e in events if e["event"] == "clicked"] == ["ok"]


def test_trigger_without_a_running_instance_fails_clearly(tmp_path):
    env = {**os.environ, "HOLODESK_INSTANCE_NAME": f"absent-{os.getpid()}", "XDG_RUNTIME_DIR": str(tmp_path)}
    result = subprocess.run([*HOLODESK_COMMAND, "trigger"], env=env, capture_output=True, text=True, timeout=20)
    assert result.returncode != 0
    assert "holodesk" in result.stderr.lower()


@pytest.mark.display
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_mid_task_ends_the_tray_as_its_quit_does(xvfb, target_window, tmp_path, sig):
    """A logout (SIGHUP) or `kill` (SIGTERM) while a step waits for approval: the run is recorded as
    stopped with the signal's name and the app exits 0, where the default action cut it off unrecorded."""
    target_window.reset()
    field = model_point(target_window.centre("field"), Rect(0, 0, xvfb.width, xvfb.height))
    answers = [holotron("click_desktop", x=field.x, y=field.y, thought="Click the field.")]
    process, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    try:
        type_task("Click the field")
        wait_for_window("Holodesk: approve")
        process.send_signal(sig)
        assert process.wait(30) == 0, process.stdout.read() if process.stdout else ""
    finally:
        stop_holodesk(process)
    session = wait_for_session_end(sessions, process, timeout_s=5)
    assert session.outcome == "stopped", session.end
    assert session.end is not None and f"received {sig.name}" in session.end["detail"], session.end
    assert not [e for e in target_window.sync() if e["event"] == "clicked"]  # the unapproved click never ran
