"""How a replay ended, in words, in the run's result and in `holodesk history` (issue 49): stopped at which
step and after how many ran, handed over to the agent where and why and then what the agent did, done
with its flagged steps named; never a plain "done" or "stopped".

Real replays (the step engine with RoutinePolicy) on drawn screens, recorded into a sessions folder
that the history command then reads.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.cli.history_command import list_sessions, show_session
from holodesk.automation.coords import NormalizedSpace
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Outcome, RunResult
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.replay import HandOver, ProblemChoice, RoutinePolicy, routine_engine
from holodesk.automation.routines.routine_file import Routine, load_routine
from holodesk.automation.trajectory import iter_session_folders
from tests.app.cli.test_history_replay_verdicts import replay
from tests.automation.routines.test_routine_policy import Agent, Answers, Drawn, Performer

OK, CANCEL, SAVE = Button("OK", 100, 100), Button("Cancel", 300, 100), Button("Save", 500, 100)


class StopsAtStep(Answers):
    """Approves every step until routine step `step`, which it stops."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision.stop() if request.step == self.step else ApprovalDecision.approve()


@pytest.fixture
def routine(tmp_path: Path) -> Routine:
    frame = screen([OK, CANCEL, SAVE])
    steps = [(frame, click_step(*b.centre, f"the {b.label} button")) for b in (OK, CANCEL, SAVE)]
    session = record_session(tmp_path / "recorded", "ok, cancel, save", steps, end=frame)
    return load_routine(save_compiled(compile_session(session, "three"), tmp_path / "routines"))


def run(routine: Routine, answers: Answers, shown: list[Button], sessions: Path, agent: bool = False) -> RunResult:
    frames = Drawn(screen(shown))
    agent_policy = Agent()
    policy = RoutinePolicy(
        routine,
        {},
        frames,
        answers,
        agent=(lambda: HandOver(agent_policy, NormalizedSpace())) if agent else None,
        windows=lambda: None,
    )
    engine = routine_engine(policy, answers, Performer(), frames, trajectory_root=sessions, monitor=1, agent_steps=2)
    return engine.run(routine.task)


def history(sessions: Path) -> tuple[str, str]:
    """`holodesk history` (the list) and `holodesk history <session>` for the one session recorded."""
    (folder,) = iter_session_folders(sessions)
    listed, shown, err = io.StringIO(), io.StringIO(), io.StringIO()
    assert list_sessions(sessions, listed) == 0
    assert show_session(sessions, folder.name, shown, err) == 0, err.getvalue()
    return listed.getvalue(), shown.getvalue()


def test_a_replay_stopped_at_approval_says_at_which_step_and_what_had_run(routine, tmp_path):
    sessions = tmp_path / "sessions"
    result = run(routine, StopsAtStep(2), [OK, CANCEL, SAVE], sessions)

    assert result.outcome is Outcome.STOPPED
    assert result.detail == (
        "routine 'three' stopped at step 2 of 3 (1 of its 3 steps ran and was checked): stopped by the user at approval"
    )
    listed, shown = history(sessions)
    assert "stopped at step 2 of 3" in listed, listed
    assert "outcome:  stopped at step 2 of 3, 1 step taken" in shown, shown
    assert f"detail:   {result.detail}" in shown, shown


def test_a_replay_stopped_where_it_asked_says_the_step_and_the_problem(routine, tmp_path):
    sessions = tmp_path / "sessions"
    answers = Answers(ProblemChoice.STOP)
    result = run(routine, answers, [OK, SAVE], sessions)  # Cancel is gone: step 2 is not found

    assert result.outcome is Outcome.STOPPED
    assert result.detail.startswith("routine 'three' stopped at step 2 of 3 (1 of its 3 steps ran and was checked): ")
    assert "the Cancel button was not found" in result.detail and result.detail.endswith("stopped by the user")
    listed, _ = history(sessions)
    assert "stopped at step 2 of 3" in listed, listed


def test_a_hand_over_says_where_and_why_then_what_the_agent_did(routine, tmp_path):
    sessions = tmp_path / "sessions"
    result = run(routine, Answers(ProblemChoice.HAND_OVER), [OK, SAVE], sessions, agent=True)

    assert result.outcome is Outcome.DONE
    assert result.detail.startswith("routine 'three' handed over to the agent at step 2 of 3 because the Cancel button")
    assert "was not found" in result.detail
    assert result.detail.endswith("; then the agent finished: finished")  # the agent's own answer
    listed, shown = history(sessions)
    assert "handed over at step 2, then the agent finished" in listed, listed
    assert "outcome:  handed over at step 2, then the agent finished" in shown, shown
    assert " done " not in listed, listed  # never a plain "done"


def test_a_replay_that_ran_through_names_its_flagged_steps(tmp_path):
    sessions = replay(tmp_path, changes=False)  # step 1 changed nothing; the user chose to go on
    listed, shown = history(sessions)

    assert "done, step 1 flagged" in listed, listed
    assert "all 2 steps of 'two' done (step 1 flagged: see its steps in the history)" in shown, shown


def test_a_clean_replay_says_every_step_went_as_recorded(tmp_path):
    listed, _ = history(replay(tmp_path, changes=True))

    assert "done, every step as recorded" in listed, listed


def test_a_stop_after_the_last_step_is_not_called_a_stop_at_that_step(routine, tmp_path):
    """A signal while the record closes ends a finished replay as stopped: the engine's words say so."""
    answers = Answers()
    frames = Drawn(screen([OK, CANCEL, SAVE]))
    policy = RoutinePolicy(routine, {}, frames, answers, windows=lambda: None)
    engine = routine_engine(policy, answers, Performer(), frames, trajectory_root=None, monitor=1, agent_steps=1)
    assert engine.run(routine.task).outcome is Outcome.DONE
    late = "stopped by SIGTERM, after the last step (the run had ended done: all 3 steps of 'three' done)"

    said = policy.end_words("stopped", late)

    assert (said.detail, said.summary) == (late, "stopped after its last step")
