"""`holodesk routine run` stopped by a real signal while it types German text: a stop, nothing held.

A real process replays the routine recorded on the target window (click OK, type into the field),
with a long German text given by --set, so that the typing goes through keycodes rebound for
ü, ß and ö. While the window is receiving that text, SIGINT, SIGTERM or SIGHUP is sent to the
process. Then the X server itself is asked: no key may be held (XQueryKeymap) and the keyboard
mapping must be what it was before the run (no spare keycode left rebound). The replay is a session
whose end says it was stopped by that signal.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from Xlib import display as xdisplay

from bench.rigs.target_client import TargetWindow
from bench.rigs.window_routine import NAME, record_ok_and_hello
from holodesk.app.cli.run_command import PICTURES_PREFIX
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from tests.support import x11_probe
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1600, 900)], indirect=True, ids=str, scope="module"),
]

# Long enough that the typing is still going when the test acts on the window's first 12 characters:
# with 444 characters, a loaded machine's window reported them after the run had typed the rest.
GERMAN = "Grüße aus Köln, süße Äpfel für Jörg; " * 60
SIGNAL_WORDS = {
    signal.SIGINT: "Ctrl+C",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "terminal was closed",
}


@pytest.fixture(scope="module")
def recorded(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    capture = ScreenCapture()
    try:
        routine = record_ok_and_hello(capture, tmp_path_factory.mktemp("recorded"))
    finally:
        capture.close()
    assert routine.folder is not None
    return routine.folder


def keyboard_mapping() -> list[tuple[int, ...]]:
    """Every keycode's keysyms, as the X server has them now."""
    connection = xdisplay.Display(os.environ["DISPLAY"])
    try:
        first, last = connection.display.info.min_keycode, connection.display.info.max_keycode
        return [tuple(row) for row in connection.get_keyboard_mapping(first, last - first + 1)]
    finally:
        connection.close()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_while_the_routine_types_stops_it_with_no_key_held_and_no_keycode_left_rebound(
    stop: signal.Signals, recorded: Path, xvfb: XvfbServer, tmp_path: Path
) -> None:
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    sessions = tmp_path / "sessions"
    temporary = tmp_path / "tmp"  # its own: another worker's run removes the pictures of runs that are gone
    temporary.mkdir()
    mapping_before = keyboard_mapping()
    window = TargetWindow.start(40, 40)
    process: subprocess.Popen[Any] | None = None
    try:
        process = subprocess.Popen(
            [*HOLODESK_COMMAND, "routine", "run", NAME, "--routines", str(routines), "--sessions", str(sessions),
             "--no-model", "--set", f"text_1={GERMAN}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(tmp_path), "TMPDIR": str(temporary)},
        )  # fmt: skip
        assert process.stdin is not None
        process.stdin.write("A\na\n")  # the click (exact): approve all; the typing is shown: approve
        process.stdin.flush()
        # The window is receiving the text: the run is in the middle of typing.
        window.wait_for(lambda e: e["event"] == "text" and len(e["text"]) >= 12, timeout_s=60)
        process.send_signal(stop)
        said, _ = process.communicate(timeout=20)  # a stop, not a hang
        code = process.returncode
        typed = [e["text"] for e in window.sync() if e["event"] == "text"]
    finally:
        window.close()
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)
    assert code == 3, said
    assert typed and len(typed[-1]) < len(GERMAN), "the typing was not interrupted"
    assert x11_probe.pressed_keycodes() == [], "a key is still held on the X server"
    assert keyboard_mapping() == mapping_before, "a spare keycode was left rebound"
    (folder,) = iter_session_folders(sessions)
    session = read_session(folder)
    assert session.outcome == "stopped" and SIGNAL_WORDS[stop] in session.end["detail"], session.end
    assert [s.get("decision") for s in session.steps] == ["approve", "approve"]
    assert session.steps[-1]["result"]["ok"] is False  # the typing step: stopped part-way, and recorded so
    # The approval pictures went with the run.
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_while_a_routine_question_waits_stops_the_run(
    stop: signal.Signals, recorded: Path, xvfb: XvfbServer, tmp_path: Path
) -> None:
    """The question "not found: retry, continue with the agent, quit?" is read while the engine waits
    for the routine's next step; a signal then stops the run as at any other moment."""
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    target = load_routine(routines / NAME).steps[0].target
    assert target is not None
    for relative in (target.crop, target.context):  # the OK button no longer looks as recorded
        with Image.open(routines / NAME / relative) as old:
            size = old.size
        noise = np.random.default_rng(1).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
        Image.fromarray(noise).save(routines / NAME / relative)
    sessions = tmp_path / "sessions"
    process = subprocess.Popen(
        [*HOLODESK_COMMAND, "routine", "run", NAME, "--routines", str(routines), "--sessions", str(sessions),
         "--no-model"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(tmp_path)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        shown = b""
        while b"[r]etry" not in shown:  # the question is asked (bounded by the read below ending)
            chunk = process.stdout.read1(65536)
            assert chunk, shown.decode(errors="replace")
            shown += chunk
        process.send_signal(stop)
        rest, _ = process.communicate(timeout=20)
        said = (shown + rest).decode(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    assert process.returncode == 3, said
    assert "Traceback" not in said and "Fatal Python error" not in said, said
    (folder,) = iter_session_folders(sessions)
    assert read_session(folder).outcome == "stopped"


def test_the_next_routine_run_releases_what_a_killed_one_held(recorded: Path, xvfb: XvfbServer, tmp_path: Path) -> None:
    """kill -9 during typing can leave a key held and spare keycodes rebound (nothing runs in the
    process any more); the next `holodesk routine run` releases them before it does anything, and
    removes the killed run's approval pictures."""
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    sessions = tmp_path / "sessions"
    # A temporary folder of their own: any other run on the machine (another test worker's) removes the
    # pictures of a run whose process is gone, so a shared /tmp could lose the killed run's before the check.
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(tmp_path), "TMPDIR": str(temporary)}
    command = [*HOLODESK_COMMAND, "routine", "run", NAME, "--routines", str(routines), "--sessions", str(sessions)]
    mapping_before = keyboard_mapping()
    window = TargetWindow.start(40, 40)
    killed: subprocess.Popen[Any] | None = None
    try:
        killed = subprocess.Popen(
            [*command, "--no-model", "--set", f"text_1={GERMAN}"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        assert killed.stdin is not None
        killed.stdin.write("A\na\n")
        killed.stdin.flush()
        window.wait_for(lambda e: e["event"] == "text" and len(e["text"]) >= 12, timeout_s=60)
        killed.kill()
        killed.wait(10)
    finally:
        window.close()
        if killed is not None and killed.poll() is None:
            killed.kill()
            killed.wait(10)
    assert list(temporary.glob(f"{PICTURES_PREFIX}{killed.pid}-*")), "nothing left to clean up"
    # The next run: it is stopped at its first question; what the killed one held is gone before that.
    process = subprocess.run([*command, "--no-model"], input="q\n", capture_output=True, text=True, timeout=60, env=env)
    assert process.returncode == 3, process.stdout + process.stderr
    assert x11_probe.pressed_keycodes() == [], "a key the killed run held is still held"
    assert keyboard_mapping() == mapping_before, "a keycode the killed run rebound is still rebound"
    assert list(temporary.glob(f"{PICTURES_PREFIX}{killed.pid}-*")) == []


STOP_WORDS = {
    signal.SIGINT: "stopped by the user (Ctrl+C)",
    signal.SIGTERM: "stopped by SIGTERM",
    signal.SIGHUP: "stopped: the terminal was closed (SIGHUP)",
}


@pytest.mark.parametrize("moment", ["start", "close", "exit"])
@pytest.mark.parametrize("stop", list(STOP_WORDS), ids=lambda s: s.name)
def test_a_signal_from_the_first_moment_to_the_last_ends_the_replay_the_same_way(
    stop: signal.Signals, moment: str, recorded: Path, xvfb: XvfbServer, tmp_path: Path
) -> None:
    """The replay signals itself (tests/e2e/signalled_command.py) during start-up, after its last step
    before the session closes, and as the process exits: a stop before the first step, a stop after the
    last, and the session's own exit code, whichever of the three signals it is."""
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    sessions = tmp_path / "sessions"
    window = TargetWindow.start(40, 40)
    try:
        process = subprocess.run(
            [sys.executable, "-m", "tests.e2e.signalled_command", moment, stop.name, "routine", "run", NAME,
             "--routines", str(routines), "--sessions", str(sessions), "--no-model"],
            input="A\na\n", capture_output=True, text=True, timeout=120,
            env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)},
        )  # fmt: skip
    finally:
        window.close()
    assert "Traceback" not in process.stderr, process.stderr
    (folder,) = iter_session_folders(sessions)
    session = read_session(folder)
    assert session.end is not None
    if moment == "start":
        assert (process.returncode, session.outcome, session.steps) == (3, "stopped", []), process.stderr
        assert session.end["detail"] == f"{STOP_WORDS[stop]}, before the first step"
    elif moment == "close":
        assert (process.returncode, session.outcome) == (3, "stopped"), process.stderr
        assert [s.get("decision") for s in session.steps][-1] == "final"
        assert session.end["detail"].startswith(f"{STOP_WORDS[stop]}, after the last step (the run had ended done")
    else:
        assert (process.returncode, session.outcome) == (0, "done"), process.stderr
