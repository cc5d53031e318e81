"""`holodesk routine run` as a user runs it: a real process, answers typed on stdin, a real window
under Xvfb, and the model behind a vLLM-like HTTP server on 127.0.0.1.

The routine is recorded once on the target window (click OK, type into the field). A recorded
picture is replaced by noise to stand for a target that looks different now (restyled): the pictures
cannot find it, so the model is asked (model fallback and repair), or, without the model, the user
is asked and may hand the rest to the agent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bench.rigs.fake_openai_server import DEFAULT_MODEL, Completion, FakeOpenAIServer
from bench.rigs.target_client import TargetWindow
from bench.rigs.window_routine import NAME, TASK, record_ok_and_hello
from holodesk.automation.coords import Rect
from holodesk.automation.routines.locators import Rung
from holodesk.automation.routines.routine_file import REVISIONS_DIR, ROUTINE_FILE, load_routine
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1600, 900)], indirect=True, ids=str, scope="module"),
]


@pytest.fixture(scope="module")
def recorded(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    capture = ScreenCapture()
    try:
        routine = record_ok_and_hello(capture, tmp_path_factory.mktemp("recorded"))
    finally:
        capture.close()
    assert routine.folder is not None
    return routine.folder


@pytest.fixture
def routines(recorded: Path, tmp_path: Path) -> Path:
    """A fresh copy of the recorded routine for each test (a repair rewrites it)."""
    shutil.copytree(recorded, tmp_path / "routines" / NAME)
    return tmp_path / "routines"


@pytest.fixture
def window(xvfb: XvfbServer) -> Iterator[TargetWindow]:
    opened = TargetWindow.start(40, 40)  # where it was recorded
    try:
        yield opened
    finally:
        opened.close()


def restyle(routines: Path, step: int) -> None:
    """Replace step `step`'s recorded pictures with noise: the target no longer looks as recorded."""
    target = load_routine(routines / NAME).steps[step - 1].target
    assert target is not None
    noise = np.random.default_rng(step).integers(0, 256, size=(80, 200, 3), dtype=np.uint8)
    for relative in (target.crop, target.context):
        with Image.open(routines / NAME / relative) as old:
            size = old.size
        Image.fromarray(noise).resize(size).save(routines / NAME / relative)


def routine_run(routines: Path, answers: str, *extra: str) -> tuple[int, str]:
    sessions = routines.parent / "sessions"  # the replay is a session of its own
    process = subprocess.run(
        [*HOLODESK_COMMAND, "routine", "run", NAME, "--routines", str(routines), "--sessions", str(sessions), *extra],
        input=answers,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return process.returncode, process.stdout + process.stderr


def holodesk(*arguments: str) -> str:
    process = subprocess.run([*HOLODESK_COMMAND, *arguments], capture_output=True, text=True, timeout=60, check=True)
    return process.stdout


def remote(server: FakeOpenAIServer) -> tuple[str, ...]:
    return ("--backend", "remote", "--base-url", server.base_url, "--model", DEFAULT_MODEL)


def test_routine_run_replays_on_the_window_with_one_approval_and_no_model(routines, window):
    # step 1 (exact): A; step 2 types, so it is shown whatever A said: a
    code, said = routine_run(routines, "A\na\n", "--no-model", "--set", "text_1=typed by the command")
    assert code == 0, said
    assert "done: all 2 steps of 'ok and hello' done" in said and "model calls: 0" in said
    assert said.count("[A]pprove this and every exact step") == 1  # offered for the click only
    assert "asked because: it types: always shown" in said
    events = window.sync()
    assert [e["widget"] for e in events if e["event"] == "clicked"] == ["ok"]
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "typed by the command"
    # The replay is a session: `holodesk history` lists it, and shows its steps as they ran.
    sessions = routines.parent / "sessions"
    listed = holodesk("history", "--sessions", str(sessions))
    (folder,) = iter_session_folders(sessions)
    assert folder.name in listed and "done" in listed
    shown = holodesk("history", folder.name, "--sessions", str(sessions))
    assert "typed by the command" in shown and "click" in shown


def test_the_model_locates_a_restyled_target_over_http_and_the_approved_repair_is_written_back(routines, window, xvfb):
    restyle(routines, 1)
    before = (routines / NAME / ROUTINE_FILE).read_text()
    ok = model_point(window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    with FakeOpenAIServer() as server:
        server.queue(Completion(text=json.dumps({"x": ok.x, "y": ok.y})))
        # step 1 (found by the model): a; its repair: y; step 2 (exact): a
        code, said = routine_run(routines, "a\ny\na\n", *remote(server))
        requests, problems = server.chat_requests, list(server.problems)
    assert code == 0, said
    assert problems == [] and len(requests) == 1
    assert "the OK button" in json.dumps(requests[0].body["messages"])  # the step's description was asked for
    assert "model calls: 1" in said and f"found by {Rung.MODEL.value}" in said
    assert [e["widget"] for e in window.sync() if e["event"] == "clicked"] == ["ok"]

    # The diff was shown before the question; the old file is kept; the new one points at new crops.
    assert f"+++ {ROUTINE_FILE} (repaired)" in said and "write this repair into the routine?" in said
    (kept,) = (routines / NAME / REVISIONS_DIR).iterdir()
    assert kept.read_text() == before and f"kept in {kept}" in said
    repaired = load_routine(routines / NAME)
    target = repaired.steps[0].target
    assert target is not None and "-repair-" in target.crop
    centre = window.centre("ok")  # the model's point, mapped to the screen, is where the repair now looks
    assert abs(target.point[0] - centre.x) <= 2 and abs(target.point[1] - centre.y) <= 2

    # The repaired routine finds the target by its pictures again: no model, one approval. The field
    # is emptied first, as it was when the routine was recorded (the first run typed into it).
    window.reset()
    code, said = routine_run(routines, "A\na\n", "--no-model")
    assert code == 0, said
    assert "model calls: 0" in said and said.count("[A]pprove this") == 1
    assert [e["widget"] for e in window.sync() if e["event"] == "clicked"] == ["ok"]


def test_a_repair_refused_leaves_the_routine_as_it_was(routines, window, xvfb):
    restyle(routines, 1)
    before = (routines / NAME / ROUTINE_FILE).read_text()
    ok = model_point(window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    with FakeOpenAIServer() as server:
        server.queue(Completion(text=json.dumps({"x": ok.x, "y": ok.y})))
        code, said = routine_run(routines, "a\nn\na\n", *remote(server))
    assert code == 0, said
    assert (routines / NAME / ROUTINE_FILE).read_text() == before
    assert not (routines / NAME / REVISIONS_DIR).exists()


def test_continue_with_the_agent_hands_over_the_task_and_what_was_done(routines, window):
    restyle(routines, 2)  # the field: not found, and no model to ask
    with FakeOpenAIServer() as server:
        server.queue(Completion(text=holotron("answer", content="The field is filled.")))
        # step 1 (exact): A; step 2's target not found: c(ontinue with the agent)
        code, said = routine_run(routines, "A\nc\n", "--no-model", "--set", "text_1=Grüße vom Band", *remote(server))
        requests = server.chat_requests
    assert code == 0, said
    assert "handed over to the agent at step 2 of 2: the text field was not found" in said, said
    # The end says where the replay handed over and why, then what the agent did (never a plain "done").
    assert f"done: routine '{NAME}' handed over to the agent at step 2 of 2 because the text field" in said, said
    assert "; then the agent finished: The field is filled." in said, said
    assert [e["widget"] for e in window.sync() if e["event"] == "clicked"] == ["ok"]
    (request,) = requests  # the agent's first step: its task is the hand-over's
    sent = json.loads(json.dumps(request.body["messages"]))
    text = json.dumps(sent, ensure_ascii=False)
    # The task to do now, with the value given in place of the recorded one (said once, never both).
    assert TASK.replace("hello routine", "Grüße vom Band") in text
    assert f"Already done by the routine '{NAME}': click the OK button" in text
    # The value given with --set, not the recorded one, is what the agent is told to type.
    assert "Still to do (the routine could not): type 'Grüße vom Band' (the value of text_1)" in text
    assert "hello routine" not in text and "Values for this run" not in text
    # One run: the routine's step and the agent's answer are one session.
    (folder,) = iter_session_folders(routines.parent / "sessions")
    session = read_session(folder)
    assert session.outcome == "done" and [s.get("decision") for s in session.steps] == ["approve", "final"]
    # `holodesk history` has the run under this run's task: the value given, not the recorded one.
    shown = holodesk("history", "--sessions", str(routines.parent / "sessions"), folder.name)
    assert f"task:     {TASK.replace('hello routine', 'Grüße vom Band')}\n" in shown, shown
    assert "hello-routine" not in folder.name
