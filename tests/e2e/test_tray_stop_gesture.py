"""The stop gesture takes both its Escs from the person's app: at the approval panel, and while an action runs.

A real window manager (openbox) gives a real GTK dialog (zenity --entry) the focus, with text typed
into it. The tray app runs a scripted task; while its first step waits on the approval panel, the
person presses Esc, waits 0.15 s, and presses Esc again, as the README teaches. The run must stop,
and the dialog must not have seen either Esc: it is still open, and Enter then closes it with the
typed text intact (zenity prints what its entry held; an Esc that reached it cancels it, exit 1).
Enter reaches the dialog again while Holodesk still runs: the keys are given back after the gesture.
The same while an approved action runs (a long wait, approved with Enter at the panel) and while the
model thinks (a server that has the question and has not answered yet): Esc, Esc stops the run, and the
dialog keeps its text.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.automation.trajectory import SESSION_FILE, iter_session_folders
from holodesk.automation.virtual_display import XvfbServer
from tests.e2e.scripting import holotron
from tests.e2e.test_tray_app import (
    scripted_settings,
    start_holodesk,
    stop_holodesk,
    type_task,
    wait_for_session_end,
    wait_for_window,
    xdotool,
)
from tests.support.waiting import wait_until
from tests.support.x11_probe import selection_owned

pytestmark = pytest.mark.display

TYPED = "kept text 42"
GESTURE_GAP_S = 0.15  # the person's pause between the two Escs (within the gesture's 0.5 s)


@pytest.fixture
def window_manager(xvfb: XvfbServer) -> Iterator[None]:
    if shutil.which("openbox") is None:
        pytest.fail("Debian's openbox is missing: install it (tests/run.sh does)", pytrace=False)
    manager = subprocess.Popen(["openbox"], env=xvfb.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: selection_owned("WM_S0"), 60, "openbox managing the screen")
    yield
    manager.terminate()
    manager.wait(10)


@pytest.fixture
def dialog(xvfb: XvfbServer, window_manager: None) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A zenity entry dialog with TYPED in it; (the process, its window id)."""
    if shutil.which("zenity") is None:
        pytest.fail("zenity is not installed (Debian: apt install zenity)", pytrace=False)
    process = subprocess.Popen(
        ["zenity", "--entry", "--title", "Keep me", "--text", "type here"],
        env=xvfb.env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        window = wait_for_window("Keep me")
        focus_on(window)
        xdotool("type", "--delay", "5", TYPED)
        yield process, window
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def focus_on(window: str) -> None:
    xdotool("windowactivate", "--sync", window)
    wait_until(lambda: xdotool("getwindowfocus").stdout.strip() == window, 10, "the dialog having the focus")


def close_with_enter(process: subprocess.Popen[str], window: str) -> tuple[int, str]:
    """Press Enter in the dialog until it closes (the panel's keys may still be Holodesk's for a
    moment after the stop); its exit status and what it printed."""
    deadline = time.monotonic() + 15
    while process.poll() is None:
        assert time.monotonic() < deadline, "the dialog never closed with Enter"
        focus_on(window)
        xdotool("key", "Return")
        try:
            process.wait(0.5)
        except subprocess.TimeoutExpired:
            continue
    assert process.stdout is not None
    return process.returncode, process.stdout.read()


def test_esc_twice_at_the_panel_stops_the_run_and_the_dialog_keeps_its_text(
    dialog: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    process, window = dialog
    # A click on the empty top-left of the screen (never done: the run stops at its panel), then done.
    answers = [holotron("click_desktop", x=20, y=20, thought="Click."), holotron("answer", content="Done.")]
    holodesk, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    try:
        type_task("Click the corner")
        wait_for_window("Holodesk: approve")
        focus_on(window)  # the panel never takes the focus; the prompt that had it is gone
        xdotool("key", "Escape")
        time.sleep(GESTURE_GAP_S)  # the gesture's own rhythm, not a wait for anything
        xdotool("key", "Escape")
        session = wait_for_session_end(sessions, holodesk)
        # With Holodesk still running: the keys are the person's again once the gesture's window is over.
        returncode, printed = close_with_enter(process, window)
    finally:
        stop_holodesk(holodesk)
    assert session.outcome == "stopped", session.end
    assert (returncode, printed) == (0, TYPED + "\n"), "an Esc of the gesture reached the dialog"


def action_running(sessions: Path) -> bool:
    """Whether a step's action has begun: its record is written ahead of it, its result pending."""
    for folder in iter_session_folders(sessions):
        lines = (folder / SESSION_FILE).read_text(encoding="utf-8").splitlines()
        if any(json.loads(line).get("result_pending") for line in lines if line.strip()):
            return True
    return False


def test_esc_twice_while_an_action_runs_stops_the_run_and_the_dialog_keeps_its_text(
    dialog: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    process, window = dialog
    answers = [holotron("wait_desktop", seconds=30, thought="Wait."), holotron("answer", content="Done.")]
    holodesk, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    try:
        type_task("Wait a while")
        wait_for_window("Holodesk: approve")
        focus_on(window)
        xdotool("key", "Return")  # approves at the panel (its key, never the dialog's)
        wait_until(lambda: action_running(sessions), 30, "the approved wait running")
        xdotool("key", "Escape")
        time.sleep(GESTURE_GAP_S)  # the gesture's own rhythm, not a wait for anything
        xdotool("key", "Escape")
        session = wait_for_session_end(sessions, holodesk)
        returncode, printed = close_with_enter(process, window)
    finally:
        stop_holodesk(holodesk)
    assert session.outcome == "stopped", session.end
    assert (returncode, printed) == (0, TYPED + "\n"), "an Esc of the gesture reached the dialog"


def test_an_approved_esc_of_the_model_still_reaches_the_dialog(
    dialog: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    """The stop key is taken while actions run, but not from an action that presses it itself."""
    process, window = dialog
    answers = [holotron("hotkey_desktop", keys=["esc"], thought="Close it."), holotron("answer", content="Done.")]
    holodesk, sessions, _ = start_holodesk(tmp_path, scripted_settings(tmp_path, answers))
    try:
        type_task("Close the dialog")
        wait_for_window("Holodesk: approve")
        focus_on(window)
        xdotool("key", "Return")  # approves at the panel
        session = wait_for_session_end(sessions, holodesk)
        assert process.wait(15) == 1, "the model's Esc never reached the dialog"  # zenity: cancelled
    finally:
        stop_holodesk(holodesk)
    assert session.outcome == "done", session.end


def test_esc_twice_while_the_model_thinks_stops_the_run_and_the_dialog_keeps_its_text(
    dialog: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    from bench.rigs.fake_openai_server import FakeOpenAIServer, SlowReply

    process, window = dialog
    with FakeOpenAIServer() as server:
        server.queue(SlowReply(60.0))  # the model thinks for a minute
        remote = f'backend = "remote"\n\n[model.remote]\nbase_url = "{server.base_url}"'
        holodesk, sessions, _ = start_holodesk(tmp_path, remote)
        try:
            type_task("Think about it")
            wait_until(lambda: bool(server.chat_requests), 60, "the model asked")
            focus_on(window)
            xdotool("key", "Escape")
            time.sleep(GESTURE_GAP_S)  # the gesture's own rhythm, not a wait for anything
            xdotool("key", "Escape")
            session = wait_for_session_end(sessions, holodesk)
            returncode, printed = close_with_enter(process, window)
        finally:
            stop_holodesk(holodesk)
    assert session.outcome == "stopped", session.end
    assert (returncode, printed) == (0, TYPED + "\n"), "an Esc of the gesture reached the dialog"
