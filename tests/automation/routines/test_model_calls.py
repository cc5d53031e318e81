"""A replay counts every call to the model: a locate that did not find the target before the agent
took over, and each of the agent's answers (a refused answer asked again counts twice)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.rigs.routine_scenes import screen
from holodesk.automation.actions import Done, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import NormalizedSpace
from holodesk.automation.engine_protocols import Outcome
from holodesk.automation.proposal import PastStep, Proposal, RejectedAnswer
from holodesk.automation.routines.replay import HandOver, ProblemChoice, RoutinePolicy, routine_engine
from holodesk.automation.screen import ScreenFrame
from tests.automation.routines.test_routine_policy import OK, Answers, Drawn, Performer, routine  # noqa: F401


class LostGrounder:
    """The model asked where a target is, and not finding it."""

    def __init__(self) -> None:
        self.asked = 0

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        self.asked += 1
        raise RuntimeError(f"no {description} on this screen")


class SecondTimeAgent:
    """An agent whose first answer was refused and asked again, and which then says it is done."""

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        refused = (RejectedAnswer("{not json", "the answer contains no JSON object"),)
        return Proposal(Done("finished"), "", frames[-1].width, frames[-1].height, rejected=refused)

    def interrupt(self) -> None:
        pass


def test_the_locate_before_a_hand_over_and_the_agents_calls_are_counted(routine, tmp_path: Path):  # noqa: F811
    answers, performer = Answers(ProblemChoice.HAND_OVER), Performer()
    frames = Drawn(screen([OK]))  # Cancel is gone: the pictures miss it, the model is asked, then the agent
    grounder = LostGrounder()
    policy = RoutinePolicy(
        routine, {}, frames, answers, grounder=grounder,
        agent=lambda: HandOver(SecondTimeAgent(), NormalizedSpace()),
    )  # fmt: skip
    engine = routine_engine(
        policy, answers, performer, frames, trajectory_root=tmp_path / "s", monitor=1, agent_steps=3
    )
    result = engine.run(routine.task)
    assert result.outcome is Outcome.DONE and policy.handed_over
    assert grounder.asked == 1
    assert policy.model_calls == 1 + 2  # the locate, and the agent's answer asked twice (was 0)
