"""A routine's folder on disk: private like a session, its pictures read only as whole PNG files of its
own, and a target no picture can find again said at save time (never written again by a repair).

A routine holds typed text and pieces of the screen, and a routine folder may come from elsewhere
(copied, unpacked, edited by hand): every fault here must end in words, never in a traceback or in
a file read from outside the folder.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.cli import routine_command
from holodesk.automation.actions import Point
from holodesk.automation.display_text import safe_text
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.repair import CannotRepair, propose_repair, repaired_step, write_repair
from holodesk.automation.routines.routine_file import ROUTINE_FILE, RoutineFileError, load_routine
from tests.automation.frames import solid_frame

OK, CANCEL = Button("OK", 100, 100), Button("Cancel", 300, 100)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    frame = screen([OK, CANCEL])
    session = record_session(
        tmp_path / "sessions", "press ok", [(frame, click_step(*OK.centre, "the OK button"))], end=frame
    )
    return save_compiled(compile_session(session, "press ok"), tmp_path / "routines")


def test_a_saved_routine_and_a_written_repair_are_private_like_a_session(saved: Path):
    old = os.umask(0o022)  # what a desktop session usually has: without care, 0755 and 0644
    try:
        assert mode(saved.parent) == 0o700 and mode(saved) == 0o700 and mode(saved / "crops") == 0o700
        assert mode(saved / ROUTINE_FILE) == 0o600
        assert {mode(p) for p in (saved / "crops").iterdir()} == {0o600}
        routine = load_routine(saved)
        moved = screen([Button("OK", 400, 300), CANCEL])
        kept = write_repair(propose_repair(routine, routine.steps[0], Point(455, 318), moved))
    finally:
        os.umask(old)
    assert mode(kept.parent) == 0o700 and mode(kept) == 0o600
    assert mode(saved / ROUTINE_FILE) == 0o600
    assert {mode(p) for p in (saved / "crops").iterdir()} == {0o600}
    assert len(list((saved / "crops").iterdir())) == 4  # the repair's new crops, private too


def crop_of(folder: Path) -> Path:
    return folder / load_routine(folder).steps[0].target.crop  # type: ignore[union-attr]


def replace_crop(folder: Path, how: str, outside: Path) -> None:
    crop = crop_of(folder)
    data = crop.read_bytes()
    crop.unlink()
    if how == "link out":
        outside.write_bytes(data)  # even a real PNG: a routine's pictures are files of its own folder
        crop.symlink_to(outside)
    elif how == "not a png":
        crop.write_text("root:x:0:0:root:/root:/bin/bash\n")
    elif how == "truncated":
        crop.write_bytes(data[: len(data) // 2])
    elif how == "crops folder linked out":
        crops = crop.parent
        outside.mkdir()
        for picture in crops.iterdir():
            picture.rename(outside / picture.name)
        (outside / crop.name).write_bytes(data)
        crops.rmdir()
        crops.symlink_to(outside)


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("link out", "is a link"),
        ("crops folder linked out", "is a link"),
        ("not a png", "is not a PNG file"),
        ("truncated", "cannot be read as a PNG"),
    ],
)
def test_a_crop_that_is_not_a_png_of_the_routines_own_is_a_problem_in_words(saved, tmp_path, how, words):
    replace_crop(saved, how, tmp_path / "outside")
    with pytest.raises(RoutineFileError) as raised:
        load_routine(saved)
    assert any("steps[1].target.crop" in p and words in p for p in raised.value.problems), raised.value.problems
    # `holodesk routine run` and `list` say it in words; nothing is read through the link.
    err, out = io.StringIO(), io.StringIO()
    assert routine_command.open_routine(saved.parent, saved.name, err) is None
    assert words in err.getvalue() and "Traceback" not in err.getvalue()
    routine_command.list_routines(saved.parent, out)
    assert "cannot be read" in out.getvalue()


def test_a_click_on_a_plain_background_is_said_at_save_time_and_a_repair_never_writes_such_a_crop(tmp_path):
    plain = solid_frame(800, 600, (12, 12, 12))  # a terminal's background: one colour wherever clicked
    session = record_session(
        tmp_path / "sessions", "click the terminal", [(plain, click_step(400, 300, "the terminal"))], end=plain
    )
    compiled = compile_session(session, "terminal")
    assert len(compiled.warnings) == 1
    assert "step 1: its target's picture is one plain colour" in compiled.warnings[0]
    assert "only the model can find it again" in compiled.warnings[0]
    out, err = io.StringIO(), io.StringIO()
    code = routine_command.save(
        tmp_path / "sessions", session.folder.name, "terminal", tmp_path / "routines", io.StringIO(), out, err
    )
    assert code == 0 and "warning: step 1: its target's picture is one plain colour" in out.getvalue()

    # A repair found on a plain screen would write the same useless crop: it is refused in words.
    routine = load_routine(tmp_path / "routines" / "terminal")
    with pytest.raises(CannotRepair, match="one plain colour"):
        repaired_step(routine.steps[0], Point(200, 200), plain, "now")
    assert not any("repair" in p.name for p in (tmp_path / "routines" / "terminal" / "crops").iterdir())


def test_an_effect_that_cannot_be_checked_is_said_at_save_time(tmp_path):
    frame = screen([OK, CANCEL])
    session = record_session(
        tmp_path / "sessions", "press ok", [(frame, click_step(*OK.centre, "the OK button"))], end=frame
    )
    # The final screenshot could not be written: nothing shows what the click did.
    (session.folder / session.steps[-1]["screenshot"]).unlink()
    broken = session.steps[-1]
    broken["screenshot_error"] = "disk full"
    compiled = compile_session(session, "press ok")
    assert compiled.warnings == [
        "step 1: its effect cannot be checked (the session has no screenshot after it); a replay will not know"
        " whether it worked"
    ]


def test_an_effect_across_a_change_of_screen_size_is_said_at_save_time(tmp_path):
    frame = screen([OK, CANCEL])
    wider = solid_frame(1024, 600, (236, 236, 236))  # the display was resized after the click
    session = record_session(
        tmp_path / "sessions", "press ok", [(frame, click_step(*OK.centre, "the OK button"))], end=wider
    )
    assert compile_session(session, "press ok").warnings == [
        "step 1: its effect cannot be checked (the screen's size or place changed after it); a replay will not"
        " know whether it worked"
    ]


def test_a_routine_saved_before_routines_were_private_is_made_private_when_read(saved: Path):
    for path in (saved, *saved.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    load_routine(saved)
    assert {mode(p) for p in (saved, *saved.rglob("*")) if p.is_dir()} == {0o700}
    assert {mode(p) for p in saved.rglob("*") if p.is_file()} == {0o600}


def test_a_toml_error_names_a_bad_character_in_words_not_by_its_escape(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "routine.toml").write_text('task = "first line\nsecond line"\n', encoding="utf-8")
    with pytest.raises(RoutineFileError) as caught:
        load_routine(folder)
    (problem,) = caught.value.problems
    assert "a line break where TOML allows none" in problem
    assert "\\" not in safe_text(problem)  # what the tray's menu shows: no '\\n'
