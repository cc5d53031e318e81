"""The tray's per-kind approval with "typing" and "key press" ticked, against bash in a real xterm under
Xvfb: the model types `echo ctrl-m-ran`, then presses ctrl+m (Enter to a terminal).

The typing goes through unasked; ctrl+m must reach the approval panel. Skipped there, the line never
ran: the test then clears it (ctrl+u), types a line of its own, and bash's history holds that line
alone. Approved there, the same history holds `echo ctrl-m-ran` (the control: ctrl+m does run the line
in this terminal, so the skipped run could have seen it). The panel is Qt's offscreen one of the GUI
tests; the typing and the keys are real XTEST input into the xterm.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from holodesk.app.gui.gui_approver import GuiApprover
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import Qt
from holodesk.automation.actions import Action, Click, Done, KeyCombo, MouseButton, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import EngineSettings, Outcome, RunResult
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from tests.support.user_clipboard import serve_user_text
from tests.support.waiting import wait_until
from tests.support.xterm_shell import bash_in_xterm, history_lines

pytestmark = [
    pytest.mark.display,
    # The size of the GUI tests' offscreen screen: the panel is placed on the frame's monitor.
    pytest.mark.parametrize("xvfb", [DisplayLayout(800, 600)], indirect=True, ids=str, scope="module"),
]

ON_THE_TERMINAL = Point(200, 90)
WAIT_S = 60.0


class ModelSteps:
    """The model's proposals (no grounding), in the frame's own pixels."""

    def __init__(self, actions: Sequence[Action]) -> None:
        self.actions = list(actions)

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        frame = frames[-1]
        action = self.actions.pop(0) if self.actions else Done("done")
        return Proposal(action, "", frame.width, frame.height, space=ImagePixelSpace())

    def interrupt(self) -> None:
        pass


@pytest.fixture
def shell(xvfb: XvfbServer, tmp_path: Path) -> Iterator[Path]:
    with bash_in_xterm(tmp_path, (40, 40)) as history:
        yield history


def run_with_ticked_kinds(qtbot, answer: str) -> None:  # type: ignore[no-untyped-def]
    """Types and presses ctrl+m with "type" and "key" ticked; answers the panel with `answer`."""
    overlay = OverlayController()
    approver = GuiApprover(overlay, auto_approve_kinds={"type", "key"})
    qtbot.addWidget(approver.panel)
    shown: list[str] = []
    approver.auto_approved.connect(lambda step, words: shown.append(f"auto {step}: {words}"))
    capture = ScreenCapture()
    steps = ModelSteps([TypeText("echo ctrl-m-ran", at=ON_THE_TERMINAL), KeyCombo(("ctrl", "m"))])
    engine = StepEngine(steps, approver, InputPerformer(X11Input(capture=capture)), capture, EngineSettings())
    result: list[RunResult] = []
    thread = threading.Thread(target=lambda: result.append(engine.run("run it")), daemon=True)
    thread.start()
    try:
        qtbot.waitUntil(approver.panel.isVisible, timeout=int(WAIT_S * 1000))
        widgets = approver.panel.named_widgets()
        assert "ctrl+m" in widgets["action"].text().lower(), widgets["action"].text()
        assert "Keys that press Enter" in widgets["remember_note"].text()  # said irreversible, never covered
        qtbot.mouseClick(approver.panel.named_widgets()[answer], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not thread.is_alive(), timeout=int(WAIT_S * 1000))
    finally:
        engine.stop()
        thread.join(10)
        capture.close()
        approver.panel.retract()
        overlay.clear()
    assert result and result[0].outcome is Outcome.DONE, result
    assert shown == ["auto 1: type 'echo ctrl-m-ran' at (200, 90)"]  # the typing went through unasked


def type_line(line: str) -> None:
    """Clear the shell's line, then type a line of the test's own (the keyboard follows the pointer)."""
    for args in (
        ("mousemove", "--sync", str(ON_THE_TERMINAL.x), str(ON_THE_TERMINAL.y)),
        ("key", "ctrl+u"),
        ("type", "--delay", "0", line),
        ("key", "Return"),
    ):
        subprocess.run(["xdotool", *args], capture_output=True, timeout=20, check=True)


def test_ctrl_m_is_asked_under_ticked_kinds_and_skipped_the_line_never_runs(qtbot, shell: Path) -> None:  # type: ignore[no-untyped-def]
    run_with_ticked_kinds(qtbot, "skip")
    type_line("echo END")
    wait_until(lambda: "echo END" in history_lines(shell), WAIT_S, "bash running the test's own line")
    assert history_lines(shell) == ["echo END"]


def test_ctrl_m_approved_at_the_panel_runs_the_typed_line(qtbot, shell: Path) -> None:  # type: ignore[no-untyped-def]
    run_with_ticked_kinds(qtbot, "approve")
    wait_until(lambda: "echo ctrl-m-ran" in history_lines(shell), WAIT_S, "bash running the typed line")


def test_a_middle_click_under_ticked_clicks_is_asked_with_the_text_it_would_paste(qtbot, shell: Path) -> None:  # type: ignore[no-untyped-def]
    """ "click" ticked: the model's middle click still reaches the panel, which says what it would paste
    (PRIMARY holds `echo PWNED` and a newline, set with xclip), escaped and with its line break visible.
    Skipped there, the terminal received nothing."""
    serve_user_text("echo PWNED\n", "PRIMARY")
    overlay = OverlayController()
    approver = GuiApprover(overlay, auto_approve_kinds={"click"})
    qtbot.addWidget(approver.panel)
    capture = ScreenCapture()
    steps = ModelSteps([Click(ON_THE_TERMINAL, MouseButton.MIDDLE)])
    engine = StepEngine(steps, approver, InputPerformer(X11Input(capture=capture)), capture, EngineSettings())
    result: list[RunResult] = []
    thread = threading.Thread(target=lambda: result.append(engine.run("paste")), daemon=True)
    thread.start()
    try:
        qtbot.waitUntil(approver.panel.isVisible, timeout=int(WAIT_S * 1000))
        pasted = approver.panel.named_widgets()["paste"].text()  # under the headline
        assert "echo·PWNED⏎" in pasted and "1 line break pressed as Enter" in pasted, pasted
        headline = approver.panel.named_widgets()["action"].text()
        assert headline == "Middle click at (200, 90): pastes the selection", headline
        qtbot.mouseClick(approver.panel.named_widgets()["skip"], Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not thread.is_alive(), timeout=int(WAIT_S * 1000))
    finally:
        engine.stop()
        thread.join(10)
        capture.close()
        approver.panel.retract()
        overlay.clear()
    assert result and result[0].outcome is Outcome.DONE, result
    type_line("echo END")
    wait_until(lambda: "echo END" in history_lines(shell), WAIT_S, "bash running the test's own line")
    assert history_lines(shell) == ["echo END"]
