"""Routines recorded on real programs at their usual font size, replayed with the program's font larger.

Issue 49's held-out set: a font-size change must not stop a replay that did what it should (a false
stop), and a replay that did not (the text swallowed) must still be flagged (no missed failure).

- bash in an xterm: the routine recorded on the default bitmap font (test_replay_terminal's own
  routine), replayed on an xterm drawn in DejaVu Sans Mono at 18 points, moved and smaller in rows,
  while another window has the focus; three times (each run's output lower). bash's history file
  says what the shell ran.
- The same routine on a terminal at 18 points that swallows the text: the typing step is flagged.
- The Qt field (the logging target window) recorded at 96 dpi and replayed at 192 (`QT_FONT_DPI`:
  its text twice as tall), moved, unfocused: found from its pictures, the text it got read back.
- zenity's GTK entry recorded at the usual size and replayed at 1.6 times (`GDK_DPI_SCALE`: the
  dialog, its label and its entry grow), moved, unfocused: the entry's picture no longer matches, so
  the model (a stand-in that asks xdotool where the entry is) is asked; zenity prints what it got.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.rigs.target_client import TargetWindow
from holodesk.automation.actions import Click, Point
from holodesk.automation.engine_protocols import Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.locators import Rung
from holodesk.automation.routines.replay import RoutinePolicy, routine_engine
from holodesk.automation.screen import ScreenFrame
from holodesk.automation.virtual_display import DisplayLayout
from tests.automation.routines import test_replay_terminal as recorded_set
from tests.automation.routines.test_replay_terminal import (
    COMMAND,
    GREET,
    Answers,
    Terminal,
    active_name,
    answer_greet,
    field_of_greet,
    flagged,
    record_field,
    replay,
    window_ids,
    xdotool,
    xterm,
)
from tests.support.waiting import wait_until
from tests.support.xterm_shell import history_lines, shell_env, wait_for_prompt

# The screen under openbox, and the routine recorded on bash in an xterm at the default font: the
# recorded set's own fixtures (module-scoped: this module gets its own screen and recording).
desk = recorded_set.desk
routine = recorded_set.routine

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1600, 900)], indirect=True, ids=str, scope="module"),
]

BIG_FONT = ("-fa", "DejaVu Sans Mono", "-fs", "18")
RECORDED_CELL_WIDTH = 6  # xterm's default bitmap font ("fixed", 6x13), as the routine was recorded


SWALLOW = "stty -echo; exec cat >/dev/null"  # a terminal that echoes nothing: typed text is swallowed


def geometry(name: str) -> dict[str, int]:
    (window,) = window_ids(name)
    return {
        k: int(v) for k, v in (line.split("=") for line in xdotool("getwindowgeometry", "--shell", window).splitlines())
    }


@contextmanager
def big_font_bash(folder: Path, origin: tuple[int, int], size: str) -> Iterator[Path]:
    """bash in an xterm drawn in BIG_FONT (as `bash_in_xterm`, with the font added); yields its history file."""
    (folder / "inputrc").write_text("set enable-bracketed-paste off\n")
    history = folder / "history"
    env = {
        **shell_env(folder),
        "INPUTRC": str(folder / "inputrc"),
        "HISTFILE": str(history),
        "PROMPT_COMMAND": f"history -a; touch {folder / '.prompted'}",
    }
    process = subprocess.Popen(
        [
            "xterm",
            "-u8",
            *BIG_FONT,
            "-geometry",
            f"{size}+{origin[0]}+{origin[1]}",
            "-e",
            "bash",
            "--norc",
            "--noprofile",
        ],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_prompt(folder)
        yield history
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_terminal_in_a_larger_font_is_never_a_false_stop(routine, desk, tmp_path):
    (tmp_path / "shell").mkdir()
    with big_font_bash(tmp_path / "shell", (520, 300), "60x8") as history:
        wait_until(lambda: len(window_ids("bash")) == 1, 30, "bash's xterm shown")
        cell = geometry("bash")["WIDTH"] / 60
        assert cell >= 2 * RECORDED_CELL_WIDTH - 1, f"the terminal's font is not larger: {cell:.1f} px a column"
        grounder = Terminal("bash", Point(0, 0))
        problems: list[str] = []
        for count in (1, 2, 3):
            with xterm("other", (100, 650), "40x5", "cat"):  # the click focuses the terminal again
                result, answers, notes = replay(routine, desk, grounder, tmp_path / "replays")
            assert result.outcome is Outcome.DONE, result.detail
            problems += [p.problem for p in answers.problems]
            wait_until(lambda: history_lines(history) == [COMMAND] * count, 30, f"bash running it {count} times")  # noqa: B023
            assert any(n.startswith("step 2 done:") and "where it typed" in n for n in notes), notes
        assert problems == []


def test_text_a_larger_font_terminal_swallows_is_flagged(routine, desk, tmp_path):
    process = subprocess.Popen(
        ["xterm", "-title", "swallow", *BIG_FONT, "-geometry", "60x8+300+200", "-e", "sh", "-c", SWALLOW],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: len(window_ids("swallow")) == 1, 30, "the swallowing xterm shown")
        result, answers, _ = replay(routine, desk, Terminal("swallow", Point(0, 0)), tmp_path)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert result.outcome is Outcome.DONE, result.detail  # "go on" was answered
    assert flagged(answers) == [2], [p.problem for p in answers.problems]
    assert "nothing changed in the window 'swallow'" in answers.problems[0].problem


def test_a_qt_field_at_twice_the_font_size_is_found_and_typed_into(desk, tmp_path, monkeypatch):
    performer = InputPerformer(X11Input(capture=desk))
    window = TargetWindow.start(100, 100)
    try:
        performer.execute(Click(window.centre("field")))
        window.wait_for(lambda e: e.get("event") == "press")
        routine = record_field(desk, tmp_path, window.centre("field"), "Ada", "write Ada in the field")
        assert [e["text"] for e in window.sync() if e["event"] == "text"][-1] == "Ada"
    finally:
        window.close()
    monkeypatch.setenv("QT_FONT_DPI", "192")
    moved = TargetWindow.start(380, 240)
    try:
        with xterm("other", (1100, 700), "40x5", "cat"):
            answers, notes = Answers(), list[str]()
            policy = RoutinePolicy(routine, {}, desk, answers, notify=notes.append)
            engine = routine_engine(
                policy, answers, performer, desk, trajectory_root=tmp_path, monitor=1, agent_steps=1
            )
            result = engine.run(routine.task)
        assert result.outcome is Outcome.DONE, result.detail
        assert answers.problems == [], [p.problem for p in answers.problems]
        assert policy.records[0].rung in {r.value for r in Rung if r is not Rung.MODEL}, policy.records
        assert [e["text"] for e in moved.sync() if e["event"] == "text"][-1] == "Ada"
        # The typed text really was drawn larger: the typing's change, as the replay saw it, is wider
        # (its height is clipped by the field's).
        recorded, replayed = routine.steps[1].expect.region, changed_width(notes, 2)
        assert recorded is not None and replayed >= 1.5 * recorded[2], (recorded, notes)
    finally:
        moved.close()


def changed_width(notes: list[str], step: int) -> int:
    """The width of the change the replay saw after `step`, from its note "... changed (WxH at (x, y))"."""
    (note,) = [n for n in notes if n.startswith(f"step {step} done:")]
    match = re.search(r"changed \((\d+)x(\d+) at", note)
    assert match is not None, note
    return int(match.group(1))


class GreetEntry:
    """The model's stand-in for zenity's entry: where xdotool says the dialog's entry is."""

    def __init__(self) -> None:
        self.calls = 0

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        self.calls += 1
        return field_of_greet()


@contextmanager
def greet_dialog(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(GREET, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        wait_until(lambda: len(window_ids("greet")) == 1 and active_name() == "greet", 30, "zenity's dialog")
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)


def test_a_gtk_entry_at_a_larger_font_is_found_and_typed_into(desk, tmp_path):
    with greet_dialog(dict(os.environ)) as recorded:
        usual = geometry("greet")
        routine = record_field(desk, tmp_path, field_of_greet(), "Ada", "write Ada in the dialog")
        assert answer_greet(recorded) == "Ada"
    with greet_dialog({**os.environ, "GDK_DPI_SCALE": "1.6"}) as again:
        larger = geometry("greet")
        assert larger["WIDTH"] > usual["WIDTH"] * 1.2, (usual, larger)  # its font really is larger
        xdotool("windowmove", window_ids("greet")[0], "700", "420")
        wait_until(lambda: geometry("greet")["X"] != larger["X"], 10, "the dialog moved")
        with xterm("other", (100, 650), "40x5", "cat"):
            answers, notes = Answers(), list[str]()
            grounder = GreetEntry()
            policy = RoutinePolicy(routine, {}, desk, answers, grounder=grounder, notify=notes.append)
            performer = InputPerformer(X11Input(capture=desk))
            engine = routine_engine(
                policy, answers, performer, desk, trajectory_root=tmp_path, monitor=1, agent_steps=1
            )
            result = engine.run(routine.task)
        assert result.outcome is Outcome.DONE, result.detail
        assert answers.problems == [], [p.problem for p in answers.problems]
        assert answer_greet(again) == "Ada"
        assert grounder.calls <= 1  # at most the one locate of the entry
