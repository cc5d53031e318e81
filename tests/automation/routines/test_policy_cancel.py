"""The engine's cancel token reaches the policy through `propose` (issue 47).

A RoutinePolicy built directly and handed to a plain StepEngine (no `routine_engine` to wire a token
in) asks the user when its target is not found. Stopping the engine must end that question: the
question's request carries the token `propose` was given, which is the engine's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.automation.actions import Done
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import EngineSettings, Outcome
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.replay import ProblemChoice, ProblemRequest, RoutinePolicy
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.screen import ScreenFrame
from tests.automation.routines.test_routine_policy import Answers, Drawn, Performer

OK, CANCEL = Button("OK", 100, 100), Button("Cancel", 300, 100)
WAIT_S = 5.0  # every wait below is bounded by this; a passing run takes a few milliseconds of it


class WaitingQuestions(Answers):
    """Answers a problem only when its request is cancelled (or after WAIT_S): a person who never answers."""

    def __init__(self) -> None:
        super().__init__(ProblemChoice.STOP)
        self.asked = threading.Event()
        self.saw_cancel: bool | None = None
        self.answered_at = 0.0

    def problem(self, request: ProblemRequest) -> ProblemChoice:
        self.problems.append(request.problem)
        self.asked.set()
        self.saw_cancel = request.cancel.sleep(WAIT_S)
        self.answered_at = time.monotonic()
        return ProblemChoice.STOP


def test_stopping_the_engine_ends_the_question_of_a_policy_built_directly(tmp_path: Path) -> None:
    recorded = screen([OK, CANCEL])
    session = record_session(
        tmp_path / "sessions", "press OK", [(recorded, click_step(*OK.centre, "OK"))], end=recorded
    )
    routine = load_routine(save_compiled(compile_session(session, "ok"), tmp_path / "routines"))
    questions, performer, frames = WaitingQuestions(), Performer(), Drawn(screen([CANCEL]))  # OK is gone
    policy = RoutinePolicy(routine, {}, frames, questions, windows=lambda: None)
    engine = StepEngine(policy, questions, performer, frames, EngineSettings(monitor=1))

    finished = threading.Event()
    engine.start(routine.task, on_finished=lambda _: finished.set())
    assert questions.asked.wait(WAIT_S), "the replay never asked about the missing target"
    stopped_at = time.monotonic()
    engine.stop()

    assert finished.wait(WAIT_S)
    # The question ended because the run was stopped, not because its wait ran out.
    deadline = time.monotonic() + WAIT_S + 1.0
    while questions.saw_cancel is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert questions.saw_cancel is True, "the question's token was not the engine's: the stop never reached it"
    assert questions.answered_at - stopped_at < 1.0
    assert questions.problems and "was not found" in questions.problems[0]
    assert performer.actions == []
    assert engine.cancel.cancelled


def test_the_engine_gives_the_policy_its_own_token_each_run() -> None:
    """What `propose` is given is the engine's token of the run, a new one for a new run."""
    given: list[CancelToken] = []

    class Records:
        def propose(
            self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
        ) -> Proposal:
            given.append(cancel)
            frame = frames[-1]
            return Proposal(Done("done"), "", frame.width, frame.height, space=ImagePixelSpace())

        def interrupt(self) -> None:
            pass

    frames = Drawn(screen([OK]))
    engine = StepEngine(Records(), Answers(), Performer(), frames, EngineSettings(monitor=1))
    assert engine.run("one").outcome is Outcome.DONE
    first = engine.cancel
    assert engine.run("two").outcome is Outcome.DONE
    assert given == [first, engine.cancel] and given[0] is not given[1]
