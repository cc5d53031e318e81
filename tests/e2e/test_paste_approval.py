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

from holodesk.automation.actions import Action, Click, Done, Drag, MouseButton, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, EngineSettings, Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.proposal import Grounding, PastStep, Proposal
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.virtual_display import FULL_HD, XvfbServer
from tests.support.user_clipboard import serve_user_text
from tests.support.waiting import wait_until
from tests.support.xterm_shell import bash_in_xterm, history_lines

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
    if shutil.which("xclip") is None:
        pytest.fail("xclip is needed (Debian: apt install xclip)", pytrace=False)
    with bash_in_xterm(tmp_path, XTERM_ORIGIN) as history:
        yield history


class Steps:
    """The routine's steps as a policy: each found exactly where recorded, in the frame's own pixels."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self.actions = list(actions)

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        frame = frames[-1]
        action = self.actions.pop(0) if self.actions else Done("done")
        return Proposal(action, "", frame.width, frame.height, space=ImagePixelSpace(), grounding=EXACT)

    def interrupt(self) -> None:
        pass


class Approver:
    """Answers "approve all" to the first click, and `on_paste` to the paste."""

    def __init__(self, on_paste: ApprovalDecision) -> None:
        self.on_paste = on_paste
        self.asked: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        if request.action != Click(ON_THE_DESKTOP):  # the paste
            return self.on_paste
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)


MIDDLE_CLICK = Click(ON_THE_TERMINAL, MouseButton.MIDDLE)
MIDDLE_DRAG = Drag(
    ON_THE_TERMINAL, Point(ON_THE_TERMINAL.x + 60, ON_THE_TERMINAL.y), MouseButton.MIDDLE
)  # pastes at release
PASTES = pytest.mark.parametrize("paste", [MIDDLE_CLICK, MIDDLE_DRAG], ids=["middle click", "middle drag"])


def run_routine(on_paste: ApprovalDecision, paste_step: Action) -> Approver:
    serve_user_text(PASTE, "PRIMARY")
    approver = Approver(on_paste)
    capture = ScreenCapture()
    try:
        steps = Steps([Click(ON_THE_DESKTOP), paste_step])
        engine = StepEngine(steps, approver, InputPerformer(X11Input(capture=capture)), capture, EngineSettings())
        result = engine.run("paste")
    finally:
        capture.close()
    assert result.outcome is Outcome.DONE, result.detail
    # Shown: the first click (answered "approve all") and the middle click, which it did not cover.
    assert [r.action for r in approver.asked] == [Click(ON_THE_DESKTOP), paste_step]
    paste = approver.asked[1]
    assert paste.paste_text == PASTE and paste.irreversible and not paste.may_approve_all
    assert "echo·PWNED⏎" in paste.adjustment and "1 line break pressed as Enter" in paste.adjustment
    return approver


def type_line(line: str) -> None:
    """A line of the test's own, typed into the terminal under the pointer (no window manager: the
    keyboard follows the pointer)."""
    xdotool("mousemove", "--sync", str(ON_THE_TERMINAL.x), str(ON_THE_TERMINAL.y))
    xdotool("type", "--delay", "0", line)
    xdotool("key", "Return")


@PASTES
def test_a_skipped_middle_click_is_shown_with_its_text_and_the_terminal_receives_nothing(
    shell: Path, paste: Action
) -> None:
    run_routine(ApprovalDecision.skip(), paste)
    type_line("echo END")
    wait_until(lambda: "echo END" in history_lines(shell), WAIT_S, "bash running the test's own line")
    assert history_lines(shell) == ["echo END"]  # no PWNED line, and nothing pasted before END


@PASTES
def test_an_approved_middle_click_pastes_and_runs_the_line(shell: Path, paste: Action) -> None:
    """The control: the same run, approved, reaches the shell, so the skipped run's check can fail."""
    run_routine(ApprovalDecision.approve(), paste)
    wait_until(lambda: "echo PWNED" in history_lines(shell), WAIT_S, "bash running the pasted line")
    type_line("echo END")
    wait_until(lambda: "echo END" in history_lines(shell), WAIT_S, "bash running the test's own line")
    assert history_lines(shell) == ["echo PWNED", "echo END"]
