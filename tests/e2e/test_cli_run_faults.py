"""`holodesk run` under storage faults and signals: errors up front, stops that record, no pictures left in /tmp."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND, ctrl_c_as_from_a_terminal


def _run(script: Path, sessions: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*HOLODESK_COMMAND, "run", "Drag", "--backend", "scripted", "--script", str(script),
         "--sessions", str(sessions)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def test_an_unwritable_sessions_folder_is_reported_before_the_run_starts(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    script = tmp_path / "answers.jsonl"
    script.write_text(json.dumps(holotron("answer", content="done")) + "\n", encoding="utf-8")
    started = time.monotonic()
    process = _run(script, blocker / "sessions", dict(os.environ))
    out, err = process.communicate(timeout=60)
    elapsed = time.monotonic() - started
    assert process.returncode == 2, out + err
    assert f"cannot record the session in {blocker / 'sessions'}: Not a directory" in err
    assert "choose another folder with --sessions" in err
    assert "Step 1" not in out
    print(f"\nunwritable sessions folder: `holodesk run` exited 2 after {elapsed * 1000:.0f} ms (start included)")


@pytest.mark.display
def test_pictures_are_removed_after_a_stop_and_after_a_kill(xvfb, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "PYTHONUNBUFFERED": "1", "XDG_RUNTIME_DIR": str(tmp_path)}
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    start, end = model_point(Point(200, 500), screen), model_point(Point(1700, 500), screen)
    script = tmp_path / "answers.jsonl"
    drag = holotron("drag_to_desktop", start_x=start.x, start_y=start.y, x=end.x, y=end.y)
    script.write_text((json.dumps(drag) + "\n") * 3, encoding="utf-8")

    # Killed outright: its pictures folder stays until the next run, which removes it.
    killed = _run(script, tmp_path / "sessions", env)
    assert killed.stdout is not None
    while "Step 1 proposes:" not in killed.stdout.readline():
        pass
    assert [p.name.startswith("holodesk-approval-") for p in temp.iterdir()] == [True]
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)

    # SIGTERM at the approval prompt: a stop with an end record; its pictures go with it.
    stopped = _run(script, tmp_path / "sessions", env)
    assert stopped.stdout is not None
    while "Step 1 proposes:" not in stopped.stdout.readline():
        pass
    assert len(list(temp.iterdir())) == 1  # the killed run's folder is already gone
    stopped.send_signal(signal.SIGTERM)
    out, err = stopped.communicate(timeout=20)
    assert stopped.returncode == 3, out + err
    assert "stopped: stopped by SIGTERM" in out
    assert list(temp.iterdir()) == []
    newest = list(iter_session_folders(tmp_path / "sessions"))[-1]
    session = read_session(newest)
    assert session.outcome == "stopped" and session.end is not None
    assert session.end["detail"] == "stopped by SIGTERM"


STOP_WORDS = {
    signal.SIGINT: "stopped by the user (Ctrl+C)",
    signal.SIGTERM: "stopped by SIGTERM",
    signal.SIGHUP: "stopped: the terminal was closed (SIGHUP)",
}


@pytest.mark.parametrize("sig", list(STOP_WORDS), ids=lambda s: s.name)
def test_a_signal_while_the_server_is_asked_before_the_run_is_a_stop_with_a_session(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """Start-up (the server's check) is part of the run: the session says it stopped before its first step."""
    from bench.rigs.fake_openai_server import FakeOpenAIServer, SlowReply

    sessions = tmp_path / "sessions"
    with FakeOpenAIServer(models_reply=SlowReply(60.0)) as server:
        process = subprocess.Popen(
            [*HOLODESK_COMMAND, "run", "x", "--backend", "remote", "--base-url", server.base_url,
             "--sessions", str(sessions)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=ctrl_c_as_from_a_terminal,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not server.requests:  # the pre-run check is waiting for the server
            assert time.monotonic() < deadline and process.poll() is None, process.communicate()
            time.sleep(0.05)
        process.send_signal(sig)
        out, err = process.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert process.returncode == 3, (out, err)
    (folder,) = iter_session_folders(sessions)
    session = read_session(folder)
    assert session.outcome == "stopped" and session.steps == [], session.end
    assert session.end is not None and session.end["detail"] == f"{STOP_WORDS[sig]}, before the first step"
    if sig is not signal.SIGHUP:  # after SIGHUP the terminal is gone: the words go nowhere
        assert f"stopped: {STOP_WORDS[sig]}, before the first step" in out


@pytest.mark.display
def test_an_unusable_answer_ends_the_run_with_what_to_do(xvfb, tmp_path):
    script = tmp_path / "answers.jsonl"
    script.write_text((json.dumps("I would click the OK button, I think.") + "\n") * 5, encoding="utf-8")
    process = _run(script, tmp_path / "sessions", dict(os.environ))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    assert "error: the model's answer was unusable" in out
    assert "check that Settings → Model profile (--profile) matches the model the server runs" in out
