"""Routines recorded on real programs in their usual theme, replayed in another (issue 49's held-out set).

- zenity's GTK entry recorded in GTK's default theme (Adwaita, light) and replayed in its dark variant
  (`GTK_THEME=Adwaita:dark`), the dialog moved and another window focused. The entry's pictures no
  longer match (light became dark), so the model is asked: a stand-in that asks xdotool where the
  entry is, as a model looking at the screen would answer. What zenity prints on OK is what its
  field received: no false stop.
- The same dark dialog, stopped (SIGSTOP: a program that hangs) before the replay: the click still
  focuses its window (the window manager draws the frame), the typed text reaches nothing that draws
  it, and the typing step must be flagged: no missed failure.
- The Qt field (the logging target window) recorded in Qt's default style and replayed in the Windows
  style (`QT_STYLE_OVERRIDE=windows`: a sunken frame instead of Fusion's), moved, unfocused; the
  model's stand-in is the window's own report of where its field is. The text it got is read back.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from bench.rigs.target_client import TargetWindow
from bench.rigs.window_routine import settled
from holodesk.automation.actions import Click, Point
from holodesk.automation.engine_protocols import Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.replay import RoutinePolicy, routine_engine
from holodesk.automation.routines.routine_file import Routine
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.virtual_display import DisplayLayout
from tests.automation.routines import test_replay_terminal as recorded_set
from tests.automation.routines.test_replay_terminal import (
    GREET,
    Answers,
    active_name,
    answer_greet,
    field_of_greet,
    flagged,
    record_field,
    window_ids,
    xdotool,
    xterm,
)
from tests.support.waiting import wait_until

desk = recorded_set.desk  # the screen under openbox (module-scoped: this module gets its own)

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1600, 900)], indirect=True, ids=str, scope="module"),
]


def dark() -> dict[str, str]:
    """The environment for GTK's dark theme, on the display the module's Xvfb set (read when called)."""
    return {**os.environ, "GTK_THEME": "Adwaita:dark"}


class Locates:
    """The model's stand-in: "the text field" is wherever `where` says (the program's own account)."""

    def __init__(self, where: object) -> None:
        self.where = where
        self.calls = 0

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        self.calls += 1
        assert callable(self.where)
        point = self.where()
        assert isinstance(point, Point)
        return point


@contextmanager
def greet_dialog(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """zenity's entry dialog in the theme `env` names, shown and focused; killed on the way out."""
    process = subprocess.Popen(GREET, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        wait_until(lambda: len(window_ids("greet")) == 1 and active_name() == "greet", 30, "zenity's dialog")
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)


def brightness_around(desk: ScreenCapture, point: Point) -> float:
    """The mean grey level of the screen 60 px around `point` (a light theme is near 255, a dark one far under)."""
    frame = settled(desk)
    x, y = point.x - frame.region.left, point.y - frame.region.top
    return float(np.asarray(frame.pixels[max(0, y - 60) : y + 60, max(0, x - 60) : x + 60, :3]).mean())


@pytest.fixture(scope="module")
def greet_routine(desk: ScreenCapture, tmp_path_factory: pytest.TempPathFactory) -> tuple[Routine, float]:
    """Recorded on zenity's focused entry in the light theme; with the brightness around the entry then."""
    with greet_dialog(dict(os.environ)) as recorded:
        light = brightness_around(desk, field_of_greet())
        routine = record_field(desk, tmp_path_factory.mktemp("greet"), field_of_greet(), "Ada", "write Ada")
        assert answer_greet(recorded) == "Ada"
    return routine, light


def replay(routine: Routine, desk: ScreenCapture, grounder: Locates, tmp_path) -> tuple[Outcome, str, Answers]:
    answers = Answers()
    policy = RoutinePolicy(routine, {}, desk, answers, grounder=grounder)
    performer = InputPerformer(X11Input(capture=desk))
    engine = routine_engine(policy, answers, performer, desk, trajectory_root=tmp_path, monitor=1, agent_steps=1)
    result = engine.run(routine.task)
    return result.outcome, result.detail, answers


def moved(to: tuple[int, int]) -> None:
    before = field_of_greet()
    xdotool("windowmove", window_ids("greet")[0], str(to[0]), str(to[1]))
    wait_until(lambda: field_of_greet() != before, 10, "the dialog moved")


def test_a_gtk_entry_in_the_dark_theme_is_found_and_typed_into(desk, greet_routine, tmp_path):
    routine, light = greet_routine
    with greet_dialog(dark()) as again:
        darker = brightness_around(desk, field_of_greet())
        assert darker < light - 80, (light, darker)  # the theme really changed
        moved((700, 420))
        with xterm("other", (100, 650), "40x5", "cat"):
            outcome, detail, answers = replay(routine, desk, Locates(field_of_greet), tmp_path)
        assert outcome is Outcome.DONE, detail
        assert answers.problems == [], [p.problem for p in answers.problems]
        assert answer_greet(again) == "Ada"


def test_typing_into_a_hung_dark_dialog_is_flagged(desk, greet_routine, tmp_path):
    routine, _ = greet_routine
    with greet_dialog(dark()) as hung:
        moved((500, 300))
        with xterm("other", (100, 650), "40x5", "cat"):
            hung.send_signal(signal.SIGSTOP)
            try:
                outcome, detail, answers = replay(routine, desk, Locates(field_of_greet), tmp_path)
            finally:
                hung.send_signal(signal.SIGCONT)
        assert outcome is Outcome.DONE, detail  # "go on" was answered
        assert flagged(answers) == [2], [p.problem for p in answers.problems]
        assert "nothing changed in the window 'greet'" in answers.problems[0].problem


def test_a_qt_field_in_another_style_is_found_and_typed_into(desk, tmp_path, monkeypatch):
    performer = InputPerformer(X11Input(capture=desk))
    window = TargetWindow.start(100, 100)
    try:
        performer.execute(Click(window.centre("field")))
        window.wait_for(lambda e: e.get("event") == "press")
        routine = record_field(desk, tmp_path, window.centre("field"), "Ada", "write Ada in the field")
        assert [e["text"] for e in window.sync() if e["event"] == "text"][-1] == "Ada"
    finally:
        window.close()
    monkeypatch.setenv("QT_STYLE_OVERRIDE", "windows")
    restyled = TargetWindow.start(380, 240)
    try:
        with xterm("other", (1100, 700), "40x5", "cat"):
            outcome, detail, answers = replay(routine, desk, Locates(lambda: restyled.centre("field")), tmp_path)
        assert outcome is Outcome.DONE, detail
        assert answers.problems == [], [p.problem for p in answers.problems]
        assert [e["text"] for e in restyled.sync() if e["event"] == "text"][-1] == "Ada"
    finally:
        restyled.close()
