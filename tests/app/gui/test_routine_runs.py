"""A routine replayed in the tray app: the step engine on its own thread, the user answering on the panel.

Runs on Qt's offscreen platform (one 800x600 screen) with real queued signals between the engine's
threads and the GUI. The screen is drawn (bench/rigs/routine_scenes.py) and the performer
records what it was asked to do, so each test knows exactly what ran.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

import pytest

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.common import routine_hotkeys
from holodesk.app.common.routine_hotkeys import plan_routine_hotkeys, readable_routines
from holodesk.app.gui import routine_runs
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.qt import Qt, QtWidgets
from holodesk.app.gui.routine_runs import (
    APPROVE_ALL_EXACT_WORDS,
    GuiRoutineApprover,
    fill_routines_menu,
)
from holodesk.automation.actions import Action, Click, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine_protocols import Outcome, RunResult
from holodesk.automation.input.performer import ExecutionResult
from holodesk.automation.proposal import PastStep, Proposal
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.replay import HandOver, RoutinePolicy, routine_engine
from holodesk.automation.routines.routine_file import Routine, load_routine, write_routine
from holodesk.automation.screen import ScreenFrame
from tests.support.png_bomb import write_bomb_png

PIXELS = ImagePixelSpace()
OK, CANCEL, SEND = Button("OK", 100, 100), Button("Cancel", 300, 100), Button("Send", 500, 300)


class RecordingPerformer:
    def __init__(self) -> None:
        self.actions: list[Action] = []

    def validate(self, action: Action) -> None:
        pass

    def execute(self, action: Action, cancel: CancelToken) -> ExecutionResult:
        self.actions.append(action)
        return ExecutionResult(action, True, "done", 0.0)

    def close(self) -> None:
        pass


class FinishingAgent:
    """The agent after a hand-over: says the task is finished, remembering the task it was given."""

    def __init__(self) -> None:
        self.tasks: list[str] = []

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        from holodesk.automation.actions import Done

        self.tasks.append(task)
        return Proposal(Done("finished"), "", frames[-1].width, frames[-1].height)

    def interrupt(self) -> None:
        pass


class DrawnScreen:
    def __init__(self, frame: ScreenFrame) -> None:
        self.frame = frame

    def grab(self, monitor: int | None) -> ScreenFrame:
        return self.frame


class PointingModel:
    def __init__(self, point: Point) -> None:
        self.point = point

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        return self.point


@pytest.fixture
def routine(tmp_path: Path) -> Routine:
    frame = screen([OK, CANCEL, SEND])
    steps = [
        (frame, click_step(*OK.centre, "the OK button")),
        (frame, click_step(*CANCEL.centre, "the Cancel button")),
        (frame, click_step(*SEND.centre, "the Send button")),
    ]
    session = record_session(tmp_path / "sessions", "ok, cancel, send", steps, end=frame)
    return load_routine(save_compiled(compile_session(session, "three"), tmp_path / "routines"))


@pytest.fixture
def approver(qtbot):  # type: ignore[no-untyped-def]
    overlay = OverlayController()
    gui = GuiRoutineApprover(overlay)
    qtbot.addWidget(gui.panel)
    yield gui
    gui.panel.retract()
    overlay.clear()


class Replay:
    """A routine's replay (the step engine, the routine as its proposer) on a thread of its own."""

    def __init__(self, routine: Routine, performer, frames, approver, grounder=None, agent=None) -> None:  # type: ignore[no-untyped-def]
        self.policy = RoutinePolicy(routine, {}, frames, approver, grounder=grounder, agent=agent)
        self.engine = routine_engine(
            self.policy, approver, performer, frames, trajectory_root=None, monitor=1, agent_steps=2, questions=approver
        )
        self.result: Future[RunResult] = Future()
        threading.Thread(target=lambda: self.result.set_result(self.engine.run(routine.task)), daemon=True).start()


def panel_asks(qtbot, approver: GuiRoutineApprover, step: int) -> None:  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: approver.panel.isVisible() and f"Step {step}" == approver.panel._badge.text(), timeout=3000)


def question(qtbot, approver: GuiRoutineApprover) -> QtWidgets.QMessageBox:  # type: ignore[no-untyped-def]
    qtbot.waitUntil(lambda: approver.window is not None and approver.window.isVisible(), timeout=3000)
    assert approver.window is not None
    return approver.window


def press(box: QtWidgets.QMessageBox, words: str) -> None:
    (button,) = [b for b in box.buttons() if b.text() == words]
    button.click()


def test_one_tick_approves_the_exact_steps_and_the_irreversible_one_is_still_asked(qtbot, approver, routine):
    performer = RecordingPerformer()
    result = Replay(routine, performer, DrawnScreen(screen([OK, CANCEL, SEND])), approver).result
    panel_asks(qtbot, approver, 1)
    widgets = approver.panel.named_widgets()
    remember = approver.panel._remember
    assert remember.isEnabled() and " ".join(remember.text().split()) == APPROVE_ALL_EXACT_WORDS
    assert widgets["edit"].isVisible()  # as the terminal's `e` (issue 49)
    assert approver.overlay.showing and approver.overlay.action == Click(Point(*OK.centre))
    remember.setChecked(True)
    qtbot.mouseClick(widgets["approve"], Qt.MouseButton.LeftButton)
    panel_asks(qtbot, approver, 3)  # step 2 was exact: not asked again
    assert not remember.isVisible()  # asked alone: the highlighted line says why, and only it
    assert "Irreversible (send, save, delete, submit...): always shown" in approver.panel._context.text()
    assert not widgets["remember_note"].isVisible()
    qtbot.mouseClick(widgets["approve"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(result.done, timeout=5000)
    assert result.result().outcome is Outcome.DONE
    assert performer.actions == [Click(Point(*b.centre)) for b in (OK, CANCEL, SEND)]


def test_a_routine_step_edited_on_the_panel_runs_as_edited_and_the_replay_goes_on(qtbot, approver, routine):
    """Issue 49: the tray's routine panel had no Edit, where the terminal offers `e`."""
    performer = RecordingPerformer()
    result = Replay(routine, performer, DrawnScreen(screen([OK, CANCEL, SEND])), approver).result
    panel_asks(qtbot, approver, 1)
    widgets = approver.panel.named_widgets()
    qtbot.mouseClick(widgets["edit"], Qt.MouseButton.LeftButton)
    assert widgets["target_x"].isVisible()
    widgets["target_x"].setValue(OK.centre[0] + 7)  # typed into the panel's target field
    widgets["target_y"].setValue(OK.centre[1] - 3)
    qtbot.mouseClick(widgets["approve"], Qt.MouseButton.LeftButton)
    for step in (2, 3):
        panel_asks(qtbot, approver, step)
        qtbot.mouseClick(widgets["approve"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(result.done, timeout=5000)
    assert result.result().outcome is Outcome.DONE, result.result().detail
    edited = Click(Point(OK.centre[0] + 7, OK.centre[1] - 3))
    assert performer.actions == [edited, Click(Point(*CANCEL.centre)), Click(Point(*SEND.centre))]


def test_a_step_found_by_the_model_is_asked_alone_and_its_repair_shows_the_point_and_the_diff(qtbot, approver, routine):
    moved_ok = Button("Okay", 400, 450)  # another label: the pictures cannot find it
    performer = RecordingPerformer()
    model = PointingModel(Point(*moved_ok.centre))
    drawn = DrawnScreen(screen([moved_ok, CANCEL, SEND]))
    replay = Replay(routine, performer, drawn, approver, grounder=model)
    result = replay.result
    panel_asks(qtbot, approver, 1)
    assert not approver.panel._remember.isVisible()
    assert "Found by the model" in approver.panel._context.text()
    qtbot.mouseClick(approver.panel.named_widgets()["approve"], Qt.MouseButton.LeftButton)
    box = question(qtbot, approver)
    assert "found it at (455, 468)" in box.text()
    assert "+++ routine.toml (repaired)" in box.detailedText()
    assert approver.overlay.showing and approver.overlay.action == Click(Point(*moved_ok.centre))
    press(box, "Write the repair")
    panel_asks(qtbot, approver, 2)
    approver.steps.panel.named_widgets()["stop"].click()
    qtbot.waitUntil(result.done, timeout=5000)
    assert result.result().outcome is Outcome.STOPPED
    assert len(replay.policy.repairs_written) == 1 and performer.actions == [Click(Point(*moved_ok.centre))]


def test_a_target_not_found_is_asked_and_can_be_handed_to_the_agent(qtbot, approver, routine):
    performer = RecordingPerformer()
    agent = FinishingAgent()
    replay = Replay(
        routine,
        performer,
        DrawnScreen(screen([CANCEL, SEND])),
        approver,
        agent=lambda: HandOver(agent, ImagePixelSpace()),
    )
    box = question(qtbot, approver)
    # One sentence and what each choice does; how each way of looking fared is under Show Details.
    assert box.text().startswith("The OK button was not found on the screen.\n\n"), box.text()
    assert "Continue with the agent: the model takes over this run" in box.text()
    assert "recorded spot" not in box.text() and "is not near the recorded spot" in box.detailedText()
    assert [b.text() for b in box.buttons()] == ["Show Details...", "Look again", "Continue with the agent", "Stop"]
    press(box, "Continue with the agent")
    qtbot.waitUntil(replay.result.done, timeout=5000)
    assert replay.result.result().outcome is Outcome.DONE and performer.actions == []
    # The same run went on with the agent, told what is left.
    assert agent.tasks and agent.tasks[0].startswith("ok, cancel, send\nStill to do")


@pytest.mark.parametrize("last", [False, True], ids=["a middle step", "the last step"])
def test_a_step_that_changed_nothing_is_asked_in_words_that_name_it_and_fit_its_place(qtbot, approver, tmp_path, last):
    """The "nothing changed" question says which step it was, and "Go on" says where going on leads."""
    before, after = screen([OK, CANCEL]), screen([OK, CANCEL], background=(40, 40, 40))  # OK changed the page
    steps = [(before, click_step(*OK.centre, "the OK button"))]
    if not last:
        steps.append((after, click_step(*CANCEL.centre, "the Cancel button")))
    session = record_session(tmp_path / "sessions", "ok then cancel", steps, end=after)
    changing = load_routine(save_compiled(compile_session(session, "changing"), tmp_path / "routines"))
    assert changing.steps[0].expect.changed
    # The click changes nothing: the screen stays `before`.
    policy = RoutinePolicy(changing, {}, DrawnScreen(before), approver, windows=lambda: None)
    performer = RecordingPerformer()
    engine = routine_engine(
        policy,
        approver,
        performer,
        DrawnScreen(before),
        trajectory_root=None,
        monitor=1,
        agent_steps=2,
        questions=approver,
    )
    result: Future[RunResult] = Future()
    threading.Thread(target=lambda: result.set_result(engine.run(changing.task)), daemon=True).start()
    panel_asks(qtbot, approver, 1)
    qtbot.mouseClick(approver.panel.named_widgets()["approve"], Qt.MouseButton.LeftButton)
    box = question(qtbot, approver)
    assert box.text().startswith("Step 1, click the OK button, ran, but nothing changed anywhere on the screen"), (
        box.text()
    )
    then = "it was the last step, so the routine is done." if last else "the routine goes on with the next one."
    assert f"Go on: the step did what it should; {then}\n" in box.text(), box.text()
    assert "Retry the check: look for the step's effect once more; the step is not run again" in box.text()
    press(box, "Retry the check")
    qtbot.waitUntil(lambda: approver.window is not box and approver.window is not None, timeout=5000)
    assert performer.actions == [Click(Point(*OK.centre))]  # looked again, as it says: not clicked twice
    box = question(qtbot, approver)
    press(box, "Stop")
    qtbot.waitUntil(result.done, timeout=5000)
    assert result.result().outcome is Outcome.STOPPED


def test_a_stop_while_a_question_waits_ends_the_run_and_closes_the_window(qtbot, approver, routine):
    replay = Replay(routine, RecordingPerformer(), DrawnScreen(screen([CANCEL, SEND])), approver)
    question(qtbot, approver)
    replay.engine.stop()
    qtbot.waitUntil(replay.result.done, timeout=3000)
    assert replay.result.result().outcome is Outcome.STOPPED
    qtbot.waitUntil(lambda: approver.window is None, timeout=3000)


def test_the_routines_menu_runs_a_routine_and_opens_its_folder(qtbot, routine, tmp_path):
    broken = tmp_path / "routines" / "broken"
    broken.mkdir()
    (broken / "routine.toml").write_text('format = "holodesk routine"\nversion = 2\n')
    menu = QtWidgets.QMenu()
    qtbot.addWidget(menu)
    ran: list[str] = []
    opened: list[Path] = []
    fill_routines_menu(menu, tmp_path / "routines", ran.append, opened.append)
    entries = {a.text(): a for a in menu.actions()}
    assert list(entries) == ["⚠ broken", "three"]
    assert "version: this Holodesk reads version 1" in entries["⚠ broken"].menu().actions()[0].text()
    run, open_folder = entries["three"].menu().actions()
    assert run.text() == "Run (3 steps)"
    run.trigger()
    open_folder.trigger()
    assert ran == ["three"] and opened == [tmp_path / "routines" / "three"]

    fill_routines_menu(menu, tmp_path / "none", ran.append, opened.append)
    (empty,) = menu.actions()
    assert not empty.isEnabled() and "Save as routine" in empty.text()


def test_a_bomb_crop_or_any_error_in_one_routine_leaves_the_others_in_the_menu(qtbot, routine, tmp_path, monkeypatch):
    """A real decompression-bomb crop (30000x30000 in about 110 KB) is said in the menu; an error the loader
    does not know (here a MemoryError) is too, and the good routine keeps its entry and its hotkey."""
    root = tmp_path / "routines"
    write_routine(replace(routine, hotkey="<ctrl>+<alt>+3"), root / "three")
    bombed = root / "bombed"
    shutil.copytree(root / "three", bombed)
    first = load_routine(bombed).steps[0].target
    assert first is not None
    write_bomb_png(bombed / first.crop, 30000, 30000)
    menu = QtWidgets.QMenu()
    qtbot.addWidget(menu)
    fill_routines_menu(menu, root, lambda _: None, lambda _: None)
    entries = {a.text(): a.menu().actions() for a in menu.actions()}
    assert list(entries) == ["⚠ bombed", "three"]
    assert "30000x30000 pixels" in entries["⚠ bombed"][0].text() and not entries["⚠ bombed"][0].isEnabled()
    assert entries["three"][0].text() == "Run (3 steps)"

    real_load = routine_runs.load_routine

    def load(folder: Path) -> Routine:
        if folder.name == "bombed":
            raise MemoryError("cannot allocate 2.7 GB")
        return real_load(folder)

    monkeypatch.setattr(routine_runs, "load_routine", load)
    monkeypatch.setattr(routine_hotkeys, "load_routine", load)
    fill_routines_menu(menu, root, lambda _: None, lambda _: None)
    entries = {a.text(): a.menu().actions() for a in menu.actions()}
    assert list(entries) == ["⚠ bombed", "three"]
    assert entries["⚠ bombed"][0].text() == "Cannot be read: MemoryError: cannot allocate 2.7 GB"
    assert [r.name for r in readable_routines(root)] == [routine.name]


def test_the_routines_menu_shows_each_hotkey_or_why_it_is_not_bound(qtbot, routine, tmp_path):
    root = tmp_path / "routines"
    write_routine(replace(routine, hotkey="<ctrl>+<alt>+3"), root / "three")
    write_routine(replace(routine, name="other", hotkey="<ctrl>+<alt>+h"), root / "other")
    shutil.copytree(root / "three" / "crops", root / "other" / "crops")
    plan = plan_routine_hotkeys(readable_routines(root), "<ctrl>+<alt>+h", "<esc>")
    menu = QtWidgets.QMenu()
    qtbot.addWidget(menu)
    fill_routines_menu(menu, root, lambda _: None, lambda _: None, plan)
    entries = {a.text(): a.menu().actions() for a in menu.actions()}
    assert [a.text() for a in entries["three"]] == ["Run (3 steps)", "Hotkey: Ctrl+Alt+3", "Open its folder"]
    refused = entries["other"][1]
    assert not refused.isEnabled()
    assert (
        refused.text() == "⚠ Hotkey not bound: Ctrl+Alt+H is Holodesk's own hotkey for the task prompt; pick other keys"
    )


def test_a_stop_while_a_repair_waits_withdraws_it_and_writes_nothing(qtbot, approver, routine):
    moved_ok = Button("Okay", 400, 450)
    drawn = DrawnScreen(screen([moved_ok, CANCEL, SEND]))
    replay = Replay(routine, RecordingPerformer(), drawn, approver, grounder=PointingModel(Point(*moved_ok.centre)))
    panel_asks(qtbot, approver, 1)
    qtbot.mouseClick(approver.panel.named_widgets()["approve"], Qt.MouseButton.LeftButton)
    question(qtbot, approver)  # write the repair?
    replay.engine.stop()
    qtbot.waitUntil(replay.result.done, timeout=3000)
    assert replay.result.result().outcome is Outcome.STOPPED
    qtbot.waitUntil(lambda: approver.window is None, timeout=3000)
    assert replay.policy.repairs_written == [] and routine.folder is not None
    assert not (routine.folder / "revisions").exists()
