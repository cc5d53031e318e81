"""`holodesk history` on a routine replay: the replay's verdict on each step reaches the session and is
shown in words; a step the replay flagged is never a plain "ok" (issue 49)."""

from __future__ import annotations

import io
from pathlib import Path

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.cli.history_command import show_session
from holodesk.automation.engine_protocols import Outcome
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.replay import ProblemChoice, RoutinePolicy, routine_engine
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.automation.routines.test_routine_policy import Answers, Changing, Drawn

OK, CANCEL = Button("OK", 100, 100), Button("Cancel", 300, 100)
SHOWN = [Button("Shown", 450, 300), Button("More", 650, 480)]  # a page part larger than a focus ring


def step_rows(sessions: Path) -> dict[str, str]:
    """Each step's row of `holodesk history <session>`, with the full result said below the table."""
    (folder,) = iter_session_folders(sessions)
    out, err = io.StringIO(), io.StringIO()
    assert show_session(sessions, folder.name, out, err) == 0, err.getvalue()
    rows: dict[str, str] = {}
    for line in out.getvalue().splitlines():
        first = line.strip().split(" ", 1)[0]
        if first.isdigit():
            rows[first] = line
        elif line.startswith("step ") and ":" in line:
            index, said = line[len("step ") :].split(":", 1)
            rows[index] += " |" + said
    return rows


def replay(tmp_path: Path, changes: bool) -> Path:
    """Record 'click OK' (which showed two buttons) then 'click Cancel' (which changed nothing), and replay
    it, where the first click shows them only when `changes` is set."""
    first, shown = screen([OK, CANCEL]), screen([OK, CANCEL, *SHOWN])
    steps = [(first, click_step(*OK.centre, "the OK button")), (shown, click_step(*CANCEL.centre, "the Cancel button"))]
    session = record_session(tmp_path / "recorded", "ok then cancel", steps, end=shown)
    routine = load_routine(save_compiled(compile_session(session, "two"), tmp_path / "routines"))
    assert routine.steps[0].expect.changed and not routine.steps[1].expect.changed
    answers, frames = Answers(ProblemChoice.CONTINUE), Drawn(first)
    performer = Changing(frames, shown, changes)
    policy = RoutinePolicy(routine, {}, frames, answers, windows=lambda: None)
    sessions = tmp_path / "sessions"
    engine = routine_engine(policy, answers, performer, frames, trajectory_root=sessions, monitor=1, agent_steps=1)
    assert engine.run(routine.task).outcome is Outcome.DONE
    assert bool(answers.problems) is not changes
    return sessions


def test_a_step_the_replay_flagged_is_named_in_the_history_and_its_neighbour_stays_ok(tmp_path: Path) -> None:
    rows = step_rows(replay(tmp_path, changes=False))

    assert "flagged" in rows["1"] and "nothing changed" in rows["1"], rows
    assert " ok" not in rows["1"], rows
    assert "flagged" not in rows["2"] and " ok" in rows["2"], rows  # the verdict went to its own step


def test_a_replay_whose_effects_were_seen_shows_ok_and_records_each_verdict(tmp_path: Path) -> None:
    sessions = replay(tmp_path, changes=True)
    rows = step_rows(sessions)

    assert " ok" in rows["1"] and "flagged" not in rows["1"], rows
    (folder,) = iter_session_folders(sessions)
    steps = read_session(folder).steps
    assert [step.get("replay_verdict", {}).get("flags") for step in steps[:2]] == [[], []]
