"""The engine end to end under Xvfb: real capture, real parsing and mapping, real input, a real window.

A scripted backend returns real-shaped model text (so the holotron profile's parser and the
coordinate mapping run for real); the tiny local model drives one run that must execute nothing, and
the same model taught one answer (a click on the window's OK button) drives a run whose click the
window receives.
"""

from __future__ import annotations

import threading

import pytest

from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, EngineSettings, EngineState, Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.keyboard import X11Typer
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.screen_change import wait_for_settle
from holodesk.automation.trajectory import read_session
from holodesk.automation.virtual_display import FULL_HD, LAPTOP
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.scripted import ScriptedBackend
from tests.e2e.scripting import holotron, model_point
from tests.support import x11_probe

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [FULL_HD, LAPTOP], indirect=True, ids=str, scope="module"),
]


class Approve:
    """Approves everything and remembers what it was shown."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        return ApprovalDecision.approve()


@pytest.fixture
def window(target_window):
    target_window.reset()
    return target_window


@pytest.fixture
def screen(xvfb) -> Rect:
    return Rect(0, 0, xvfb.width, xvfb.height)


def engine_for(answers: list[str], approver, tmp_path, **settings) -> tuple[StepEngine, ScreenCapture]:
    capture = ScreenCapture()
    policy = ModelPolicy(get_profile("holotron"), ScriptedBackend(answers))
    engine = StepEngine(
        policy,
        approver,
        InputPerformer(X11Input(capture=capture)),
        capture,
        EngineSettings(trajectory_root=tmp_path, settle_timeout_s=1.0, settle_poll_s=0.05, **settings),
    )
    return engine, capture


def spare_keycodes() -> list[int]:
    probe = X11Typer()
    try:
        return probe.keymap().spare
    finally:
        probe.close()


def test_a_scripted_multi_step_task_lands_exactly_on_the_widgets(window, screen, tmp_path):
    field = model_point(window.centre("field"), screen)
    ok = model_point(window.centre("ok"), screen)
    answers = [
        holotron("click_desktop", x=field.x, y=field.y, thought="Focus the name field."),
        holotron("write_desktop", content="Grüße from Holodesk"),
        holotron("click_desktop", note="typed the greeting", x=ok.x, y=ok.y),
        holotron("answer", content="Greeting entered and confirmed."),
    ]
    approver = Approve()
    engine, _ = engine_for(answers, approver, tmp_path)
    spare_before = spare_keycodes()
    result = engine.run("Enter a greeting and press OK")
    assert (result.outcome, result.steps) == (Outcome.DONE, 3), result.detail  # the answer is not a step taken
    # 'ü' and 'ß' went on spare keycodes; the run gave them back when it ended (this process lives on).
    assert spare_keycodes() == spare_before, "the run left keycodes bound after it ended"
    assert result.detail == "Greeting entered and confirmed."

    events = window.sync()
    presses = [(e["widget"], e["x"], e["y"]) for e in events if e["event"] == "press"]
    field_centre, ok_centre = window.centre("field"), window.centre("ok")
    # Normalized coordinates quantize to ceil(width/1000) pixels: the click lands within that.
    tolerance = -(-screen.width // 1000)
    assert [p[0] for p in presses] == ["field", "ok"]
    assert abs(presses[0][1] - field_centre.x) <= tolerance and abs(presses[0][2] - field_centre.y) <= tolerance
    assert abs(presses[1][1] - ok_centre.x) <= tolerance and abs(presses[1][2] - ok_centre.y) <= tolerance
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "Grüße from Holodesk"
    assert [e["widget"] for e in events if e["event"] == "clicked"] == ["ok"]

    # What the approver saw is what ran, and the trajectory holds every step in both spaces.
    assert approver.requests[0].action.points()[0] == Point(presses[0][1], presses[0][2])
    session = read_session(result.folder)
    assert session.outcome == "done" and not session.warnings
    assert [s["decision"] for s in session.steps] == ["approve", "approve", "approve", "final"]
    first = session.steps[0]
    assert first["action_model"]["at"] == [field.x, field.y]
    assert first["action_screen"]["at"] == [presses[0][1], presses[0][2]]
    assert first["raw_text"].startswith("<think>")
    assert all((result.folder / s["screenshot"]).is_file() for s in session.steps)


def test_a_malformed_answer_executes_nothing(window, tmp_path):
    # y is missing; the model is told and asked again once, and its second answer is no better
    answers = ['{"action": {"name": "click_desktop", "x": 500}}', '{"action": {"name": "click_desktop", "y": 5}}']
    approver = Approve()
    engine, _ = engine_for(answers, approver, tmp_path)
    result = engine.run("Click somewhere")
    assert result.outcome is Outcome.ERROR and "unusable" in result.detail
    assert approver.requests == []
    assert window.sync() == []


def test_the_tiny_local_model_runs_a_step_and_its_random_answer_executes_nothing(window, tiny_checkpoint, tmp_path):
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(tiny_checkpoint, device="cpu", max_tiles=2)
    backend.load()
    approver = Approve()
    capture = ScreenCapture()
    engine = StepEngine(
        ModelPolicy(get_profile("holotron"), backend),
        approver,
        InputPerformer(X11Input(capture=capture)),
        capture,
        EngineSettings(trajectory_root=tmp_path),
    )
    result = engine.run("Press OK")
    assert result.outcome is Outcome.ERROR, result.detail
    assert approver.requests == [] and window.sync() == []
    (step,) = read_session(result.folder).steps
    assert step["raw_text"]  # the model's (random) text is kept
    assert step["timings"]["tokens_in"] > 256 and step["timings"]["prefill_s"] > 0
    backend.unload()


def test_the_local_model_taught_a_click_on_ok_makes_that_click(window, screen, tmp_path):
    """The in-process backend on a checkpoint whose greedy answer is a click on OK: the window is clicked there."""
    import json

    from bench.nemotron_tiny.chosen_answer import build_answering_checkpoint
    from holodesk.inference.local import LocalBackend

    ok = model_point(window.centre("ok"), screen)
    answer = json.dumps({"note": "", "thought": "Press OK.", "action": {"name": "click_desktop", "x": ok.x, "y": ok.y}})
    backend = LocalBackend(build_answering_checkpoint(tmp_path / "checkpoint", answer), device="cpu", max_tiles=2)
    backend.load()
    approver = Approve()
    capture = ScreenCapture()
    engine = StepEngine(
        ModelPolicy(get_profile("holotron"), backend),
        approver,
        InputPerformer(X11Input(capture=capture)),
        capture,
        EngineSettings(trajectory_root=tmp_path / "runs", max_steps=1, settle_timeout_s=1.0, settle_poll_s=0.05),
    )
    try:
        result = engine.run("Press OK")
    finally:
        backend.unload()
    assert result.outcome is Outcome.STEP_LIMIT and result.steps == 1, result.detail
    (request,) = approver.requests
    assert isinstance(request.action, Click)
    presses = [(e["widget"], e["x"], e["y"]) for e in window.sync() if e["event"] == "press"]
    tolerance = -(-screen.width // 1000)
    assert [p[0] for p in presses] == ["ok"]
    assert abs(presses[0][1] - window.centre("ok").x) <= tolerance
    assert abs(presses[0][2] - window.centre("ok").y) <= tolerance
    (step,) = read_session(result.folder).steps
    assert step["raw_text"] == answer


def test_stop_during_long_typing_stops_part_way(window, screen, tmp_path):
    field = model_point(window.centre("field"), screen)
    text = "a" * 400
    approver = Approve()
    engine, _ = engine_for([holotron("write_desktop", content=text, x=field.x, y=field.y)], approver, tmp_path)
    engine.performer.type_interval_s = 0.02  # 8 s of typing: the stop lands mid-text however slow this machine is
    thread = engine.start("Type a lot")

    window.wait_for(lambda e: e["event"] == "text", timeout_s=30)  # typing has begun
    engine.stop()
    thread.join(30)
    assert not thread.is_alive()
    typed = [e["text"] for e in window.sync() if e["event"] == "text"]
    assert 0 < len(typed[-1]) < len(text)  # part of it, not all of it
    session = read_session(next(tmp_path.iterdir()))
    assert session.outcome == "stopped"
    assert session.steps[0]["result"]["detail"] == "stopped part-way"


def test_the_same_click_on_an_unchanged_screen_asks_the_user(window, screen, tmp_path):
    pad = model_point(window.centre("pad"), screen)  # clicking the pad changes nothing on screen
    click = holotron("click_desktop", x=pad.x, y=pad.y)
    approver = Approve()
    engine, _ = engine_for([click, click, click, holotron("answer", content="gave up")], approver, tmp_path)
    result = engine.run("Click the pad")
    assert result.outcome is Outcome.DONE
    assert [bool(r.loop_warning) for r in approver.requests] == [False, False, True]
    assert "loop_warning" in read_session(result.folder).steps[2]


def test_stop_while_waiting_for_approval_ends_the_run_and_clicks_nothing(window, screen, tmp_path):
    class Waits:
        """An approver that answers only when the run is stopped (as the panel and the terminal do)."""

        asked = threading.Event()

        def decide(self, request: ApprovalRequest) -> ApprovalDecision:
            self.asked.set()
            while not request.cancel.sleep(0.01):
                pass
            return ApprovalDecision.stop()

    ok = model_point(window.centre("ok"), screen)
    approver = Waits()
    engine, _ = engine_for([holotron("click_desktop", x=ok.x, y=ok.y)], approver, tmp_path)
    done = threading.Event()
    engine.start("t", lambda result: done.set())
    assert approver.asked.wait(30)
    engine.stop()
    assert done.wait(30)
    assert window.sync() == []


class HistoryRecorder:
    """The real policy, remembering the history each turn was given (what the model's prompt is built from)."""

    def __init__(self, policy: ModelPolicy) -> None:
        self.policy = policy
        self.histories: list[list] = []

    def propose(self, task, history, frames, cancel):
        self.histories.append(list(history))
        return self.policy.propose(task, history, frames, cancel)

    def interrupt(self) -> None:
        self.policy.interrupt()


def test_a_click_that_changes_nothing_is_reported_to_the_user_and_the_model(window, screen, tmp_path):
    pad = model_point(window.centre("pad"), screen)  # the pad logs clicks but draws nothing
    capture = ScreenCapture()
    # A blinking caret in the text field would change the screen by itself: give the focus to a button.
    InputPerformer(X11Input()).execute(Click(window.centre("ok")))
    # The pointer rests on the pad before the run, so no hover highlight can still be fading when a
    # step's screenshots are compared (on a loaded machine the OK button repainted during step 2).
    pad_centre = window.centre("pad")
    x11_probe.move_pointer_like_the_user(pad_centre.x, pad_centre.y)
    window.sync()
    wait_for_settle(lambda: capture.grab(1), timeout_s=10.0, poll_s=0.05)
    answers = [holotron("click_desktop", x=pad.x, y=pad.y), holotron("click_desktop", x=pad.x, y=pad.y)]
    answers.append(holotron("answer", content="done"))
    policy = HistoryRecorder(ModelPolicy(get_profile("holotron"), ScriptedBackend(answers)))
    approver = Approve()
    events = []
    engine = StepEngine(
        policy,
        approver,
        InputPerformer(X11Input(capture=capture)),
        capture,
        EngineSettings(trajectory_root=tmp_path, settle_timeout_s=10.0, settle_poll_s=0.05),
        listener=events.append,
    )
    result = engine.run("Click the pad")
    assert result.outcome is Outcome.DONE
    assert [e["widget"] for e in window.sync() if e["event"] == "press"] == ["pad", "pad"]
    # Step 2 repeats a click that draws nothing: it changes nothing, and both the user and the model hear so.
    past = policy.histories[2][1]
    assert past.result.endswith("no visible change"), past.result
    assert 2 in [e.step for e in events if e.state is EngineState.NO_VISIBLE_CHANGE]
    assert approver.requests[1].previous_result == policy.histories[1][0].result


def test_a_target_on_a_corner_pixel_moves_one_pixel_in_and_runs(window, screen, tmp_path):
    approver = Approve()
    answers = [holotron("click_desktop", x=0, y=0), holotron("answer", content="clicked")]
    engine, _ = engine_for(answers, approver, tmp_path)
    result = engine.run("Click the top-left corner")
    assert result.outcome is Outcome.DONE, result.detail
    assert approver.requests[0].action.points() == (Point(1, 1),)
    assert "corner" in approver.requests[0].adjustment
    assert x11_probe.pointer()[:2] == (1, 1)


def test_an_action_that_cannot_run_fails_before_anyone_is_asked(window, tmp_path):
    approver = Approve()
    # fn never reaches the operating system: no X key can press it.
    engine, _ = engine_for([holotron("hotkey_desktop", keys=["fn", "f1"])], approver, tmp_path)
    result = engine.run("Help")
    assert result.outcome is Outcome.FAILED and "fn" in result.detail
    assert approver.requests == []
    assert window.sync() == []
    assert read_session(result.folder).outcome == "failed"
