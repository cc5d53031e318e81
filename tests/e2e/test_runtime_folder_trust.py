"""`holodesk routine run` trusts no runtime folder another local user made, and writes its crash markers.

A real second user (made with useradd for the test, removed after it; needs root) plants the runtime
folder first, as issue 48 found it:

- with XDG_RUNTIME_DIR unset, `<temp>/holodesk-<uid>` of that user, mode 0777;
- with XDG_RUNTIME_DIR naming a folder that user owns.

Either way the real command must refuse in words, exit 2, before acting: the target window sees no
click and no key, and no session is recorded. With the folder ours (the control), the same command
types, and a SIGKILL mid-typing leaves the rebound-keycodes marker in that folder, naming keycodes
still bound on the X server, for the next start to clear.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.rigs.target_client import TargetWindow
from bench.rigs.window_routine import NAME, record_ok_and_hello
from holodesk.automation.coords import Rect
from holodesk.automation.held_input import REMAPPED_PREFIX, release_leftover_input
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.trajectory import iter_session_folders
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1600, 900)], indirect=True, ids=str, scope="module"),
]

GERMAN = "Grüße aus Köln, süße Äpfel für Jörg; " * 40  # typed through rebound spare keycodes


@pytest.fixture(scope="module")
def recorded(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    capture = ScreenCapture()
    try:
        routine = record_ok_and_hello(capture, tmp_path_factory.mktemp("recorded"))
    finally:
        capture.close()
    assert routine.folder is not None
    return routine.folder


@pytest.fixture
def other_user() -> Iterator[int]:
    """A real local user, made for this test and removed after it; yields its uid."""
    if not ROOT:
        pytest.skip("making a second local user (useradd) needs root")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not installed (Debian's passwd package)")
    name = f"hdplant{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield int(subprocess.run(["id", "-u", name], check=True, capture_output=True, text=True).stdout)
    finally:
        subprocess.run(["userdel", name], check=True)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh shared temp folder (mode 1777, like /tmp) for TMPDIR."""
    shared = Path(tempfile.mkdtemp(prefix="hd-shared-"))
    shared.chmod(0o1777)
    yield shared
    shutil.rmtree(shared, ignore_errors=True)


def _routine_run(routines: Path, sessions: Path, env: dict[str, str], text: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [*HOLODESK_COMMAND, "routine", "run", NAME, "--routines", str(routines), "--sessions", str(sessions),
         "--no-model", "--set", f"text_1={text}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write("A\na\n")  # the click (exact): approve all; the typing is shown: approve
    process.stdin.flush()
    return process


def _refused_before_acting(routines: Path, tmp_path: Path, env: dict[str, str], words: str) -> None:
    sessions = tmp_path / "sessions"
    window = TargetWindow.start(40, 40)
    try:
        process = _routine_run(routines, sessions, env, "typed anyway")
        said, _ = process.communicate(timeout=60)
        seen = window.sync()
    finally:
        window.close()
    assert process.returncode == 2, said
    assert words in said and "nothing was done" in said, said
    assert [e for e in seen if e["event"] in ("press", "clicked", "key_press", "text")] == [], (
        "the command acted anyway"
    )
    assert list(iter_session_folders(sessions)) == [], "a session was recorded for a refused run"


def test_a_runtime_folder_another_user_planted_in_temp_is_refused_before_acting(
    recorded: Path, xvfb: XvfbServer, tmp_path: Path, other_user: int, shared_tmp: Path
) -> None:
    planted = shared_tmp / f"holodesk-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    os.chown(planted, other_user, other_user)
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(shared_tmp)}
    env.pop("XDG_RUNTIME_DIR", None)
    _refused_before_acting(routines, tmp_path, env, f"belongs to user id {other_user}, not to you")
    assert list(planted.iterdir()) == [], "a marker was written into the planted folder"


def test_an_xdg_runtime_dir_another_user_owns_is_refused_before_acting(
    recorded: Path, xvfb: XvfbServer, tmp_path: Path, other_user: int, shared_tmp: Path
) -> None:
    theirs = shared_tmp / "their-runtime"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, other_user, other_user)
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(shared_tmp), "XDG_RUNTIME_DIR": str(theirs)}
    _refused_before_acting(routines, tmp_path, env, f"XDG_RUNTIME_DIR names {theirs}, which belongs to user id")


def test_in_a_folder_of_our_own_a_killed_typing_run_leaves_its_rebound_keycodes_marker(
    recorded: Path, xvfb: XvfbServer, tmp_path: Path, shared_tmp: Path
) -> None:
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(shared_tmp)}
    env.pop("XDG_RUNTIME_DIR", None)
    private = shared_tmp / f"holodesk-{os.getuid()}"
    window = TargetWindow.start(40, 40)
    process: subprocess.Popen[Any] | None = None
    try:
        process = _routine_run(routines, tmp_path / "sessions", env, GERMAN)
        # The window is receiving the text: the typer has bound its spare keycodes.
        window.wait_for(lambda e: e["event"] == "text" and len(e["text"]) >= 12, timeout_s=60)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        window.close()
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)
    assert os.stat(private).st_mode & 0o777 == 0o700 and os.stat(private).st_uid == os.getuid()
    markers = sorted(private.glob(f"{REMAPPED_PREFIX}*-{process.pid}.json"))
    assert markers, f"no rebound-keycodes marker in {private}: {sorted(p.name for p in private.iterdir())}"
    # The marker names what is really still bound: clearing from it finds bindings to clear.
    repaired = release_leftover_input(private)
    assert repaired.cleared_keycodes, repaired.describe()
    assert not list(private.glob(f"{REMAPPED_PREFIX}*-{process.pid}.json"))


def test_holodesk_run_refuses_a_planted_runtime_folder_before_acting(
    xvfb: XvfbServer, tmp_path: Path, other_user: int, shared_tmp: Path
) -> None:
    planted = shared_tmp / f"holodesk-{os.getuid()}"
    planted.mkdir()
    planted.chmod(0o777)
    os.chown(planted, other_user, other_user)
    window = TargetWindow.start(40, 40)
    try:
        ok = model_point(window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
        script = tmp_path / "answers.jsonl"
        script.write_text(json.dumps(holotron("click_desktop", x=ok.x, y=ok.y)) + "\n", encoding="utf-8")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(shared_tmp)}
        env.pop("XDG_RUNTIME_DIR", None)
        sessions = tmp_path / "sessions"
        done = subprocess.run(
            [*HOLODESK_COMMAND, "run", "press OK", "--backend", "scripted", "--script", str(script),
             "--sessions", str(sessions)],
            input="a\n", capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        seen = window.sync()
    finally:
        window.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"belongs to user id {other_user}, not to you" in done.stderr and "nothing was done" in done.stderr
    assert [e for e in seen if e["event"] in ("press", "clicked")] == [], "the command clicked anyway"
    assert list(iter_session_folders(sessions)) == []


def test_a_folder_that_turns_unsafe_mid_run_stops_the_typing_before_its_first_key(
    recorded: Path, xvfb: XvfbServer, tmp_path: Path
) -> None:
    """The start's check passed; before the typing step is approved the folder is opened to others. The
    marker cannot be written there any more, so the step types nothing and says why (the marker gate,
    behind the start's check)."""
    routines = tmp_path / "routines"
    shutil.copytree(recorded, routines / NAME)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(runtime)}
    sessions = tmp_path / "sessions"
    window = TargetWindow.start(40, 40)
    process = subprocess.Popen(
        [*HOLODESK_COMMAND, "routine", "run", NAME, "--routines", str(routines), "--sessions", str(sessions),
         "--no-model", "--set", "text_1=never typed"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdin is not None and process.stdout is not None
    output = process.stdout

    def read() -> None:
        for line in output:
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    said: list[str] = []
    try:
        process.stdin.write("A\n")  # the click (exact): approve all
        process.stdin.flush()
        deadline = time.monotonic() + 60
        while not any("Step 2 proposes" in line for line in said):
            assert time.monotonic() < deadline, "".join(said)
            with contextlib.suppress(queue.Empty):
                said.append(lines.get(timeout=1))
        runtime.chmod(0o755)
        process.stdin.write("a\n")  # approve the typing
        process.stdin.flush()
        process.wait(60)
        seen = window.sync()
    finally:
        runtime.chmod(0o700)
        window.close()
        if process.poll() is None:
            process.kill()
            process.wait(10)
    while not lines.empty():
        said.append(lines.get_nowait())
    out = "".join(said)
    assert process.returncode == 1, out
    assert "so nothing was" in out and f"XDG_RUNTIME_DIR names {runtime}" in out, out
    assert [e["widget"] for e in seen if e["event"] == "clicked"] == ["ok"]  # step 1 acted
    assert [e for e in seen if e["event"] in ("text", "key_press")] == [], "keys went out with no marker"
