"""Compiling sessions into routine files, and reading those files back (every problem said, with where)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest
import tomli_w
from PIL import Image

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.automation.actions import Click, Point, TypeText
from holodesk.automation.routines.compiler import CompileError, compile_session, save_compiled
from holodesk.automation.routines.routine_file import ROUTINE_FILE, RoutineFileError, load_routine, write_routine

OK, CANCEL, SEND = Button("OK", 100, 100), Button("Cancel", 300, 100), Button("Send", 500, 300)


def typing_step(text: str, element: str) -> dict[str, object]:
    return {
        "action_model": {"kind": "type"},
        "action_screen": {"kind": "type", "text": text, "at": None, "press_enter": False, "overwrite": False},
        "element": element,
        "decision": "approve",
        "result": {"ok": True, "detail": "typed"},
    }


@pytest.fixture
def session(tmp_path: Path):
    before = screen([OK, CANCEL, SEND])
    after_ok = screen([OK, CANCEL, SEND, Button("Done", 100, 400)])
    return record_session(
        tmp_path / "sessions",
        "send the note to alice@example.com",
        [
            (before, click_step(*OK.centre, "the OK button")),
            (after_ok, click_step(*CANCEL.centre, "the Cancel button", decision="skip")),
            (after_ok, click_step(10, 10, "nothing", ok=False)),
            # The user moved the target from Cancel to Send: the correction is what ran.
            (
                after_ok,
                click_step(
                    *CANCEL.centre,
                    "the Send button",
                    decision="edit",
                    edited_screen={"kind": "click", "at": list(SEND.centre), "button": "left", "count": 1},
                ),
            ),
            (after_ok, typing_step("alice@example.com", "the recipient field")),
        ],
        end=after_ok,
    )


def test_only_steps_that_ran_are_kept_with_corrections_crops_effects_and_parameters(session, tmp_path):
    compiled = compile_session(session, "send note")
    routine = compiled.routine
    assert [type(s.action) for s in routine.steps] == [Click, Click, TypeText]
    assert [line.split(":")[0] for line in compiled.left_out] == ["step 2", "step 3"]
    assert "not performed (decision: skip)" in compiled.left_out[0] and "failed (refused)" in compiled.left_out[1]
    ok_step, send_step, typing = routine.steps
    assert send_step.action == Click(Point(*SEND.centre))  # the correction, not the proposal
    assert send_step.irreversible and not ok_step.irreversible  # "Send" is always asked
    # The crop shows the target with its point where it was clicked.
    crop = np.asarray(compiled.pictures[ok_step.target.crop])
    frame = np.asarray(screen([OK]).to_image())
    x, y = OK.centre[0] - ok_step.target.crop_offset[0], OK.centre[1] - ok_step.target.crop_offset[1]
    assert np.array_equal(crop, frame[y : y + crop.shape[0], x : x + crop.shape[1]])
    # The OK click made "Done" appear at (100, 400): the expected change is there, relative to the target.
    dx, dy, width, height = ok_step.expect.region
    assert ok_step.expect.changed
    assert (OK.centre[0] + dx, OK.centre[1] + dy) == (100, 400) and (width, height) == (111, 37)
    assert typing.text_parameter == "recipient" and typing.target is None
    assert [(p.name, p.default) for p in routine.parameters] == [("recipient", "alice@example.com")]


def test_a_saved_routine_reads_back_the_same(session, tmp_path):
    compiled = compile_session(session, "send note")
    folder = save_compiled(compiled, tmp_path / "routines")
    loaded = load_routine(folder)
    assert loaded.steps == compiled.routine.steps
    assert loaded.parameters == compiled.routine.parameters
    assert loaded.task == "send the note to alice@example.com"
    for step in loaded.steps:
        if step.target:
            assert Image.open(folder / step.target.crop).size == (120, 48)
    with pytest.raises(FileExistsError):
        save_compiled(compiled, tmp_path / "routines")


def test_a_session_with_nothing_that_ran_is_refused_in_words(tmp_path):
    frame = screen([OK])
    skipped = record_session(tmp_path / "s", "t", [(frame, click_step(*OK.centre, "OK", decision="skip"))], end=frame)
    with pytest.raises(CompileError, match=r"no step a routine can replay.*decision: skip"):
        compile_session(skipped, "nothing")


def test_every_problem_of_a_broken_file_is_named_with_where_it_is(session, tmp_path):
    folder = save_compiled(compile_session(session, "send note"), tmp_path / "routines")
    document = tomllib.loads((folder / ROUTINE_FILE).read_text())
    document["version"] = 7
    document["steps"][0]["action"]["at"] = [1]
    document["steps"][1]["target"]["crop"] = "crops/gone.png"
    document["steps"][2]["text_parameter"] = "nobody"
    document["steps"][2]["expect"]["changed"] = "yes"
    (folder / ROUTINE_FILE).write_text(tomli_w.dumps(document))
    with pytest.raises(RoutineFileError) as raised:
        load_routine(folder)
    problems = raised.value.problems
    assert [p.split(":")[0] for p in problems] == [
        "version",
        "steps[1].action",
        "steps[2].target.crop",
        "steps[3].text_parameter",
        "steps[3].expect.changed",
    ], problems
    assert "this Holodesk reads version 1, the file says 7" in problems[0]
    assert "click.at must be [x, y]" in problems[1]
    assert "is missing" in problems[2]


def test_a_hotkey_written_by_hand_is_read_and_kept_when_the_routine_is_written_again(session, tmp_path):
    folder = save_compiled(compile_session(session, "send note"), tmp_path / "routines")
    text = (folder / ROUTINE_FILE).read_text()
    (folder / ROUTINE_FILE).write_text(text.replace('task = "', 'hotkey = "<ctrl>+<alt>+1"\ntask = "', 1))
    loaded = load_routine(folder)
    assert loaded.hotkey == "<ctrl>+<alt>+1"
    write_routine(loaded, folder)  # as a repair writes it back
    assert load_routine(folder).hotkey == "<ctrl>+<alt>+1"


@pytest.mark.parametrize(
    ("hotkey", "words"),
    [
        ("1", "would fire while typing"),
        ("<shift>+a", "would fire while typing"),
        ("<ctrl>+<bogus>", "'<bogus>' is not a key"),
        ("<ctrl>+<alt>", "has no ordinary key"),
        (5, "expected text, got 5"),
    ],
)
def test_a_hotkey_the_app_could_not_use_is_named_with_what_is_wrong(session, tmp_path, hotkey, words):
    folder = save_compiled(compile_session(session, "send note"), tmp_path / "routines")
    document = tomllib.loads((folder / ROUTINE_FILE).read_text())
    document["hotkey"] = hotkey
    (folder / ROUTINE_FILE).write_text(tomli_w.dumps(document))
    with pytest.raises(RoutineFileError) as raised:
        load_routine(folder)
    (problem,) = raised.value.problems
    assert problem.startswith("hotkey: ") and words in problem, problem
