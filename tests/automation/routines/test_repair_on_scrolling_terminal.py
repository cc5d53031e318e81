"""A repair never saves, run after run, a picture that changes from run to run (issue 49's minor:
"one saved repair picture was a prompt line that changes every run").

The routine: click the terminal, type a command and Enter (recorded on bash in an xterm; its
pictures replaced by noise, so that the model is asked: a stand-in that answers the terminal's
centre). It is replayed, with every repair accepted, on bash in a
30-row xterm full of output, whose prompt counts the commands (`[N] $ `), until a step the model
located is repaired: its new pictures show the terminal's lines at that moment. The next run is in another terminal of
the same kind, opened on other output (as a new day's terminal is): the repaired pictures are not
found, the model is asked again, and the step must not be repaired again: one repair in all, the
replay saying why the second was refused, and bash running the command every time.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from holodesk.automation.actions import Point
from holodesk.automation.engine_protocols import Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.locators import Rung
from holodesk.automation.routines.replay import RepairRequest, RoutinePolicy, routine_engine
from holodesk.automation.routines.routine_file import Routine, load_routine
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import DisplayLayout
from tests.automation.routines import test_replay_terminal as recorded_set
from tests.automation.routines.test_replay_terminal import COMMAND, Answers, Terminal, window_ids, xterm
from tests.support.waiting import wait_until
from tests.support.xterm_shell import history_lines, shell_env, wait_for_prompt

# The screen under openbox, and the routine recorded on bash in an xterm (module-scoped: this module
# gets its own screen and recording, and its repairs rewrite only this module's routine).
desk = recorded_set.desk
routine = recorded_set.routine

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1600, 900)], indirect=True, ids=str, scope="module"),
]

MOST_REPLAYS = 3  # before the first repair (the model is asked on the first)
# What each terminal shows when it opens: text all round the terminal's centre, where the model's
# stand-in clicks, so the repaired pictures (120x48 and 360x200 around it) are all text.
FIRST_OUTPUT = "seq -w 1000 1600 | paste -sd ' ' | fold -w 95"
OTHER_OUTPUT = "yes 'another day, other output in this terminal, quite unlike the numbers of the first.' | head -60"
SIZE = "100x30"  # 600x390 px: larger than the 360x200 context picture, so no window frame is in it


class AcceptsRepairs(Answers):
    """Approves every step, answers problems "go on", and accepts every repair it is offered."""

    def __init__(self) -> None:
        super().__init__()
        self.offered: list[RepairRequest] = []

    def offer_repair(self, request: RepairRequest) -> bool:
        self.offered.append(request)
        return True


@contextmanager
def counting_bash(folder: Path, origin: tuple[int, int], first: str) -> Iterator[Path]:
    """bash in a SIZE xterm whose prompt counts its commands (`[N] $ `), opened on the output of the
    shell command `first`; yields the file bash appends each line it ran to."""
    folder.mkdir()
    (folder / "inputrc").write_text("set enable-bracketed-paste off\n")
    history = folder / "history"
    env = {
        **shell_env(folder),
        "PS1": r"[\#] $ ",
        "INPUTRC": str(folder / "inputrc"),
        "HISTFILE": str(history),
        "PROMPT_COMMAND": f"history -a; touch {folder / '.prompted'}",
    }
    command = ["xterm", "-u8", "-geometry", f"{SIZE}+{origin[0]}+{origin[1]}", "-e", "bash", "-c"]
    command.append(f"{first}; exec bash --norc --noprofile")
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_prompt(folder)
        wait_until(lambda: len(window_ids("bash")) == 1, 30, "bash's xterm shown")
        yield history
    finally:
        process.terminate()
        process.wait(timeout=10)


def replay(routine: Routine, desk: ScreenCapture, runs: Path) -> tuple[AcceptsRepairs, RoutinePolicy, list[str]]:
    """One replay of the routine as its folder holds it now (after any repair), the click focusing the terminal."""
    assert routine.folder is not None
    current = load_routine(routine.folder)
    answers, notes = AcceptsRepairs(), list[str]()
    policy = RoutinePolicy(current, {}, desk, answers, grounder=Terminal("bash", Point(0, 0)), notify=notes.append)
    performer = InputPerformer(X11Input(capture=desk))
    engine = routine_engine(policy, answers, performer, desk, trajectory_root=runs, monitor=1, agent_steps=1)
    with xterm("other", (100, 650), "40x5", "cat"):  # the click focuses the terminal: its effect is seen
        result = engine.run(current.task)
    assert result.outcome is Outcome.DONE, result.detail
    assert answers.problems == [], [p.problem for p in answers.problems]
    return answers, policy, notes


def test_a_step_whose_repaired_picture_changed_by_the_next_run_is_not_repaired_again(routine, desk, tmp_path):
    target = routine.steps[0].target
    assert routine.folder is not None and target is not None
    noise = np.random.default_rng(49).integers(0, 256, size=(60, 60, 3), dtype=np.uint8)
    for relative in (target.crop, target.context):  # its pictures match nothing now: the model is asked
        Image.fromarray(noise).save(routine.folder / relative)
    with counting_bash(tmp_path / "first", (520, 200), FIRST_OUTPUT) as history:
        for count in range(1, MOST_REPLAYS + 1):
            answers, _, _ = replay(routine, desk, tmp_path / "runs")
            wait_until(lambda: history_lines(history) == [COMMAND] * count, 30, f"bash running it {count} times")  # noqa: B023
            if answers.offered:
                break
        assert len(answers.offered) == 1, f"no repair offered in {MOST_REPLAYS} replays"
    with counting_bash(tmp_path / "second", (520, 200), OTHER_OUTPUT) as history:
        answers, policy, notes = replay(routine, desk, tmp_path / "runs")
        wait_until(lambda: history_lines(history) == [COMMAND], 30, "bash running it in the other terminal")
    assert policy.records[0].rung == Rung.MODEL.value, policy.records  # its repaired pictures were not found
    assert answers.offered == [], "the step was repaired again: its new picture will change by the next run too"
    (said,) = [n for n in notes if "not repaired again" in n]
    assert "changes from run to run" in said
