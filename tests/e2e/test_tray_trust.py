"""The tray app under Xvfb, as a careful user tries it: a stop while the model thinks is a stop, and
Enter typed into the task prompt while a step waits is the prompt's, never the step's approval."""

from __future__ import annotations

import queue
import subprocess
import threading
import time

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer, SlowReply
from holodesk.automation.coords import Rect
from tests.e2e.scripting import holotron, model_point
from tests.e2e.test_tray_app import (
    scripted_settings,
    start_holodesk,
    stop_holodesk,
    type_task,
    wait_for_session_end,
    wait_for_window,
    xdotool,
)

pytestmark = pytest.mark.display


class Output:
    """The app's stdout and stderr, read line by line as it runs (the balloons are said there too)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert process.stdout is not None
        stream = process.stdout
        threading.Thread(target=lambda: [self.lines.put(line) for line in stream], daemon=True).start()

    def wait_for(self, text: str, timeout_s: float = 20.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.seen:
                if text in line:
                    return line
            try:
                self.seen.append(self.lines.get(timeout=max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"{text!r} was never said; the app said:\n{''.join(self.seen)}") from None


def test_a_stop_while_the_model_thinks_is_a_stop(xvfb, target_window, tmp_path):
    with FakeOpenAIServer() as server:
        server.default_reply = SlowReply(60.0, Completion(holotron("answer", content="too late")))
        process, sessions, _ = start_holodesk(
            tmp_path, f'backend = "remote"\n\n[model.remote]\nbase_url = "{server.base_url}"'
        )
        output = Output(process)
        try:
            time.sleep(1.0)  # the server check and the hotkey listener start after the instance listens
            type_task("Open the mail")
            wait_for_window("Holodesk: thinking", timeout_s=15)
            deadline = time.monotonic() + 10
            while not server.chat_requests and time.monotonic() < deadline:
                time.sleep(0.05)  # the request is out: the model is thinking
            # The user's window has the keyboard; the stop gesture must not reach it as two Escapes.
            xdotool("windowfocus", "--sync", str(target_window.ready["window_id"]))
            target_window.reset()
            xdotool("key", "--delay", "60", "Escape", "Escape")  # the stop gesture
            session = wait_for_session_end(sessions, process)
            balloon = output.wait_for("holodesk: Stopped:")
            xdotool("key", "x")  # the keyboard is the user's again once the run ended
            events = target_window.sync()
        finally:
            stop_holodesk(process)
    assert session.outcome == "stopped", session.end
    assert "could not answer" not in str(session.end) and "failed" not in balloon.lower()
    keys = [e.get("key") for e in events if e["event"] == "key_press"]
    assert "Escape" not in keys, f"the stop gesture reached the user's window: {keys}"
    assert "X" in keys or "x" in keys, f"the user's window never had the keyboard: {events}"


def test_enter_in_the_task_prompt_does_not_approve_the_waiting_step(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = model_point(target_window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    answers = [holotron("click_desktop", x=ok.x, y=ok.y, thought="Confirm.")]
    process, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    output = Output(process)
    try:
        time.sleep(1.0)  # the hotkey listener starts after the instance listens
        type_task("Press OK")
        panel = wait_for_window("Holodesk: approve")

        # While the step waits: the hotkey, a task typed into the prompt, Enter.
        xdotool("key", "ctrl+alt+h")
        prompt = wait_for_window("Holodesk: new task")
        deadline = time.monotonic() + 5
        while xdotool("getwindowfocus").stdout.strip() != prompt and time.monotonic() < deadline:
            time.sleep(0.05)
        assert xdotool("getwindowfocus").stdout.strip() == prompt, "the prompt did not get the keyboard"
        xdotool("type", "--delay", "5", "Another task")
        xdotool("key", "Return")

        # The prompt took the Enter: it closed and said why its task did not start...
        said = output.wait_for("holodesk: A task is running:")
        assert "“Another task” was not started" in said
        visible = xdotool("search", "--onlyvisible", "--name", "Holodesk: new task", check=False).stdout.split()
        assert prompt not in visible
        # ...and the waiting step is still waiting: its panel is up and nothing was clicked.
        assert panel in xdotool("search", "--onlyvisible", "--name", "Holodesk: approve").stdout.split()
        assert not [e for e in target_window.sync() if e["event"] == "clicked"]

        xdotool("key", "--delay", "60", "Escape", "Escape")  # stop the run
        session = wait_for_session_end(sessions, process)
    finally:
        stop_holodesk(process)
    assert session.outcome == "stopped", session.end
    assert session.steps[0].get("decision") != "approve" and not session.steps[0].get("result")
    assert not [e for e in target_window.sync() if e["event"] == "clicked"]


def test_without_a_tray_the_control_window_is_not_in_the_models_screenshot(xvfb, target_window, tmp_path):
    from PIL import Image

    ok = model_point(target_window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    answers = [holotron("click_desktop", x=ok.x, y=ok.y, thought="Confirm.")]
    process, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    try:
        control = wait_for_window("Holodesk control")  # no tray on this display: its stand-in
        shell = xdotool("getwindowgeometry", "--shell", control).stdout
        geometry = {key: int(value) for key, value in (line.split("=") for line in shell.split())}
        time.sleep(1.0)  # the hotkey listener starts after the instance listens
        type_task("Press OK")
        wait_for_window("Holodesk: approve")
        # While the step waits for the user, no grab comes: the control window is back.
        wait_for_window("Holodesk control", timeout_s=10)
        xdotool("key", "--delay", "60", "Escape", "Escape")
        session = wait_for_session_end(sessions, process)
    finally:
        stop_holodesk(process)
    shot = session.folder / session.steps[0]["screenshot"]
    with Image.open(shot) as image:
        x, y, w, h = geometry["X"], geometry["Y"], geometry["WIDTH"], geometry["HEIGHT"]
        inside = image.convert("RGB").crop((x + 4, y + 4, x + w - 4, y + h - 4))
        colours = {colour for _, colour in inside.getcolors(maxcolors=1 << 20) or []}
    # Only the bare desktop where the control window stands: its dark blue never reaches the model.
    assert colours == {(0, 0, 0)}, f"the model saw something at the control window's place: {sorted(colours)[:5]}"
