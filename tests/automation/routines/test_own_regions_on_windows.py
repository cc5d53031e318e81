"""Holodesk's own tray icon is never a step's effect: recorded through the real engine under Xvfb.

The tray icon changes between steps (thinking, acting) and no grab can leave it out (the desktop's
tray draws it). Here a small real X window stands for it, recoloured after each action as the tray
app's icon is; the frame source names its place (`own_regions`), as the tray app's capture does.
A click on a drawn button changes nothing else on the screen: the compiled routine must expect no
change (not the icon's), and its replay must go through without asking about a missing effect.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw
from Xlib import X
from Xlib import display as xdisplay

from bench.screens import show_on_root
from holodesk.automation.actions import Action, Click, Done, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace, Rect
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, EngineSettings, Outcome
from holodesk.automation.input.performer import ExecutionResult, InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.replay import (
    ProblemChoice,
    ProblemRequest,
    RepairRequest,
    RoutinePolicy,
    routine_engine,
)
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1280, 720)], indirect=True, ids=str, scope="module"),
]

ICON = Rect(1240, 8, 24, 24)
GO = Point(300, 320)
COLOURS = (0xD03030, 0x30A040, 0x3060D0)  # the icon's states: each action leaves it another colour


class TrayIconStandIn:
    """A small X window at ICON whose colour changes like the tray icon's."""

    def __init__(self) -> None:
        self.connection = xdisplay.Display(os.environ["DISPLAY"])
        root = self.connection.screen().root
        self.window = root.create_window(
            ICON.left, ICON.top, ICON.width, ICON.height, 0, X.CopyFromParent,
            background_pixel=COLOURS[0], override_redirect=True,
        )  # fmt: skip
        self.window.map()
        self.connection.sync()
        self.state = 0

    def next_state(self) -> None:
        self.state += 1
        self.window.change_attributes(background_pixel=COLOURS[self.state % len(COLOURS)])
        self.window.clear_area()
        self.connection.sync()

    def close(self) -> None:
        self.window.destroy()
        self.connection.close()


class CaptureWithIcon:
    """The capture, naming where the icon is (what the tray app's capture does for its tray icon)."""

    def __init__(self, capture: ScreenCapture) -> None:
        self.capture = capture

    def grab(self, monitor: int | None) -> ScreenFrame:
        return self.capture.grab(monitor)

    def own_regions(self) -> Sequence[Rect]:
        return [ICON]


class IconChangingPerformer:
    """The real performer; after each action the icon changes state, as the tray app's does."""

    def __init__(self, performer: InputPerformer, icon: TrayIconStandIn) -> None:
        self.performer = performer
        self.icon = icon

    def validate(self, action: Action) -> None:
        self.performer.validate(action)

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        result = self.performer.execute(action, cancel)
        self.icon.next_state()
        return result

    def close(self) -> None:
        self.performer.close()


class ClickGoThenFinish:
    def __init__(self) -> None:
        self.answers: list[Action] = [Click(GO), Done("done")]

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        frame = frames[-1]
        return Proposal(self.answers.pop(0), "", frame.width, frame.height, space=ImagePixelSpace(), element="Go")

    def interrupt(self) -> None:
        pass


class Approve:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.approve()

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        self.problems.append(request.problem)
        return ProblemChoice.STOP

    def offer_repair(self, request: RepairRequest) -> bool:
        return False


@pytest.fixture(scope="module")
def capture(xvfb: XvfbServer) -> Iterator[ScreenCapture]:
    picture = Image.new("RGB", (xvfb.width, xvfb.height), (236, 236, 236))
    draw = ImageDraw.Draw(picture)
    draw.rectangle((GO.x - 60, GO.y - 20, GO.x + 60, GO.y + 20), fill=(40, 160, 90), outline=(10, 60, 30), width=2)
    draw.text((GO.x, GO.y), "Go", fill="white", anchor="mm")
    show_on_root(picture)  # a drawn button: clicking it changes nothing on the screen
    capture = ScreenCapture()
    yield capture
    capture.close()


def test_the_tray_icon_changing_between_steps_is_not_recorded_as_the_steps_effect(capture, tmp_path: Path):
    icon = TrayIconStandIn()
    try:
        frames = CaptureWithIcon(capture)
        performer: Any = IconChangingPerformer(InputPerformer(X11Input(capture=capture)), icon)
        engine = StepEngine(
            ClickGoThenFinish(), Approve(), performer, frames,
            EngineSettings(monitor=1, trajectory_root=tmp_path / "sessions", settle_poll_s=0.05),
        )  # fmt: skip
        result = engine.run("press go")
        assert result.outcome is Outcome.DONE, result.detail
        (folder,) = iter_session_folders(tmp_path / "sessions")
        session = read_session(folder)
        assert session.steps[0]["own_regions"] == [[ICON.left, ICON.top, ICON.width, ICON.height]]
        routine = load_routine(save_compiled(compile_session(session, "go"), tmp_path / "routines"))
        # Only the icon changed: the step is expected to change nothing, not to change the icon.
        assert routine.steps[0].expect.changed is False, routine.steps[0].expect

        # Replayed with the icon as it is now (it does not change the same way): no missing effect.
        approver = Approve()
        policy = RoutinePolicy(routine, {}, frames, approver)
        replay = routine_engine(policy, approver, performer, frames, trajectory_root=None, monitor=1, agent_steps=1)
        result = replay.run(routine.task)
        assert approver.problems == [] and result.outcome is Outcome.DONE, result.detail
    finally:
        icon.close()
