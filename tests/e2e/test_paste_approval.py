"""A middle click pastes: under Xvfb, bash in a real xterm, its PRIMARY selection `echo PWNED` and a
newline (set with xclip), and an engine run of [an exact click answered "approve all"; an exact middle
click on the terminal].

The middle click must reach the approver, with the text it would paste in its request and its
words. When the approver skips it, the shell received nothing: the test then types a line of its
own, and bash's history (appended before each prompt) holds that line alone. When the approver
approves it, the same history holds `echo PWNED`: the paste reaches the shell, so the skipped run
could have seen one. bash's bracketed paste is off (an older bash, or another shell): a pasted
newline runs the line.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from holodesk.automation.actions import Action, Click, Done, MouseButton, Point
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import (
    ApprovalDecision,
    ApprovalRequest,
    Decision,
    EngineSettings,
    Outcome,
    StepEngine,
)
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.proposal import Grounding, PastStep, Proposal
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.virtual_display import FULL_HD, XvfbServer
from tests.support.user_clipboard import serve_user_text
from tests.support.waiting import wait_until
from tests.support.xterm_shell import PROMPTED, shell_env, wait_for_prompt

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [FULL_HD], indirect=True, ids=str, scope="module"),
]

XTERM_ORIGIN = (40, 40)
ON_THE_TERMINAL = Point(200, 90)
ON_THE_DESKTOP = Point(1500, 900)  # nothing there: the root window
PASTE = "echo PWNED\n"
WAIT_S = 60.0
EXACT = Grounding(exact=True, how="found exactly where recorded", source="routine 'paste'", irreversible=False)


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], capture_output=True, timeout=20, check=True)


@pytest.fixture
def shell(xvfb: XvfbServer, tmp_path: Path) -> Iterator[Path]:
    """bash in an xterm; returns the file its history is appended to before each prompt."""
    if shutil.which("xterm") is None or shutil.which("xclip") is None:
        pytest.fail("xterm and xclip are needed (Debian: apt install xterm xclip)", pytrace=False)
    (tmp_path / "inputrc").write_text("set enable-bracketed-paste off\n")
    history = tmp_path / "history"
    env = {
        **shell_env(tmp_path),
        "INPUTRC": str(tmp_path / "inputrc"),
        "HISTFILE": str(history),
        "PROMPT_COMMAND": f"history -a; touch {tmp_path / PROMPTED}",
    }
    geometry = f"80x10+{XTERM_ORIGIN[0]}+{XTERM_ORIGIN[1]}"
    process = subprocess.Popen(
        ["xterm", "-u8", "-geometry", geometry, "-e", "bash", "--norc", "--noprofile"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_prompt(tmp_path)
        yield history
    finally:
        process.terminate()
        process.wait(timeout=10)


class Steps:
    """The routine's steps as a policy: each found exactly where recorded, in the frame's own pixels."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self.actions = list(actions)

    def propose(self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame]) -> Proposal:
        frame = frames[-1]
        action = self.actions.pop(0) if self.actions else Done("done")
        return Proposal(action, "", frame.width, frame.height, space=ImagePixelSpace(), grounding=EXACT)

    def interrupt(self) -> None:
        pass


class Approver:
    """Answers "approve all" to every step it is shown, and `on_paste` to a middle click."""

    def __init__(self, on_paste: ApprovalDecision) -> None:
        self.on_paste = on_paste
        self.asked: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        if isinstance(request.action, Click) and request.action.button is MouseButton.MIDDLE:
            return self.on_paste
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)


def run_routine(on_paste: ApprovalDecision) -> Approver:
    serve_user_text(PASTE, "PRIMARY")
    approver = Approver(on_paste)
    capture = ScreenCapture()
    try:
        steps = Steps([Click(ON_THE_DESKTOP), Click(ON_THE_TERMINAL, MouseButton.MIDDLE)])
        engine = StepEngine(steps, approver, InputPerformer(X11Input(capture=capture)), capture, EngineSettings())
        result = engine.run("paste")
    finally:
        capture.close()
    assert result.outcome is Outcome.DONE, result.detail
    # Shown: the first click (answered "approve all") and the middle click, which it did not cover.
    assert [r.action for r in approver.asked] == [Click(ON_THE_DESKTOP), Click(ON_THE_TERMINAL, MouseButton.MIDDLE)]
    paste = approver.asked[1]
    assert paste.paste_text == PASTE and paste.irreversible and not paste.may_approve_all
    assert "echo·PWNED\\n" in paste.adjustment and "1 line break pressed as Enter" in paste.adjustment
    return approver


def history_lines(history: Path) -> list[str]:
    return history.read_text(encoding="utf-8").splitlines() if history.exists() else []


def type_line(line: str) -> None:
    """A line of the test's own, typed into the terminal under the pointer (no window manager: the
    keyboard follows the pointer)."""
    xdotool("mousemove", "--sync", str(ON_THE_TERMINAL.x), str(ON_THE_TERMINAL.y))
    xdotool("type", "--delay", "0", line)
    xdotool("key", "Return")


def test_a_skipped_middle_click_is_shown_with_its_text_and_the_terminal_receives_nothing(shell: Path) -> None:
    run_routine(ApprovalDecision.skip())
    type_line("echo END")
    wait_until(lambda: "echo END" in history_lines(shell), WAIT_S, "bash running the test's own line")
    assert history_lines(shell) == ["echo END"]  # no PWNED line, and nothing pasted before END


def test_an_approved_middle_click_pastes_and_runs_the_line(shell: Path) -> None:
    """The control: the same run, approved, reaches the shell, so the skipped run's check can fail."""
    run_routine(ApprovalDecision.approve())
    wait_until(lambda: "echo PWNED" in history_lines(shell), WAIT_S, "bash running the pasted line")
    type_line("echo END")
    wait_until(lambda: "echo END" in history_lines(shell), WAIT_S, "bash running the test's own line")
    assert history_lines(shell) == ["echo PWNED", "echo END"]
