"""A stop is a stop from the first moment of `holodesk run` to the last, whichever signal it is.

The real command with the scripted backend, on Xvfb, signals itself at exact moments
(tests/e2e/signalled_command.py): during start-up, after the last step while the session is still
open, after the session closed, and as the process exits. SIGINT, SIGTERM and SIGHUP must end the same way at each: a
session that says the run stopped before its first step (exit 3); a run recorded as stopped after
its last step (exit 3); a run that stays "done" (exit 0), never killed by the signal, even as the
process exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from holodesk.automation.trajectory import Session, iter_session_folders, read_session
from tests.e2e.scripting import holotron

pytestmark = pytest.mark.display

WORDS = {
    signal.SIGINT: "stopped by the user (Ctrl+C)",
    signal.SIGTERM: "stopped by SIGTERM",
    signal.SIGHUP: "stopped: the terminal was closed (SIGHUP)",
}
ANSWER = "Nothing to do."


def run_signalled(moment: str, sig: signal.Signals, tmp_path: Path) -> tuple[int, str, Session]:
    """`holodesk run` signalled at `moment`: its exit code, its stderr and its one session."""
    script = tmp_path / "answers.jsonl"
    script.write_text(json.dumps(holotron("answer", content=ANSWER)) + "\n", encoding="utf-8")
    sessions = tmp_path / "sessions"
    process = subprocess.run(
        [sys.executable, "-m", "tests.e2e.signalled_command", moment, sig.name, "run", "Look", "--backend",
         "scripted", "--script", str(script), "--sessions", str(sessions)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        env={**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)},
    )  # fmt: skip
    assert "Traceback" not in process.stderr, process.stderr
    (folder,) = iter_session_folders(sessions)
    return process.returncode, process.stderr, read_session(folder)


@pytest.mark.parametrize("sig", list(WORDS), ids=lambda s: s.name)
def test_a_signal_during_start_up_leaves_a_session_stopped_before_its_first_step(
    xvfb: object, sig: signal.Signals, tmp_path: Path
) -> None:
    code, err, session = run_signalled("start", sig, tmp_path)
    assert code == 3, err
    assert session.outcome == "stopped" and session.steps == [], session.end
    assert session.end is not None and session.end["detail"] == f"{WORDS[sig]}, before the first step"


@pytest.mark.parametrize("sig", list(WORDS), ids=lambda s: s.name)
def test_a_signal_after_the_last_step_before_the_session_closes_is_a_stop(
    xvfb: object, sig: signal.Signals, tmp_path: Path
) -> None:
    code, err, session = run_signalled("close", sig, tmp_path)
    assert code == 3, err
    assert [step.get("decision") for step in session.steps] == ["final"]
    assert session.outcome == "stopped", session.end
    assert session.end is not None
    assert session.end["detail"] == f"{WORDS[sig]}, after the last step (the run had ended done: {ANSWER})"


@pytest.mark.parametrize("sig", list(WORDS), ids=lambda s: s.name)
def test_a_signal_after_the_session_closed_changes_nothing(xvfb: object, sig: signal.Signals, tmp_path: Path) -> None:
    code, err, session = run_signalled("closed", sig, tmp_path)
    assert code == 0, err
    assert session.outcome == "done", session.end
    if sig is not signal.SIGHUP:  # after SIGHUP the terminal is gone: the note goes nowhere
        assert f"note: {sig.name} came after the run had ended; it is kept as it ended (done)" in err


@pytest.mark.parametrize("sig", list(WORDS), ids=lambda s: s.name)
def test_a_signal_as_the_process_exits_keeps_the_sessions_exit_code(
    xvfb: object, sig: signal.Signals, tmp_path: Path
) -> None:
    """Not 130, 143 or 129: the signals stay taken until the process is gone."""
    code, err, session = run_signalled("exit", sig, tmp_path)
    assert (code, session.outcome) == (0, "done"), err
