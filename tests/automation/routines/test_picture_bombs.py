"""A routine's crop that is a decompression bomb is refused in words before it is decoded, and one bad
routine never hides the others from `holodesk routine list` (the real command).

The bombs are real PNG files (tests/support/png_bomb.py): 30000x30000 in about 110 KB, as issue 48
found one, and 10000x6000 (60 megapixels: under PIL's own bound of 89, over ours of 50).
"""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from bench.rigs.routine_scenes import Button, click_step, record_session, screen
from holodesk.app.cli import routine_command
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.pictures import MAX_PICTURE_PIXELS, PictureError, load_picture
from holodesk.automation.routines.routine_file import RoutineFileError, load_routine
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.png_bomb import write_bomb_png

OK, CANCEL = Button("OK", 100, 100), Button("Cancel", 300, 100)


def _saved(root: Path, name: str) -> Path:
    frame = screen([OK, CANCEL])
    session = record_session(
        root / f"sessions-{name}", name, [(frame, click_step(*OK.centre, "the OK button"))], end=frame
    )
    return save_compiled(compile_session(session, name), root / "routines")


def _crop(folder: Path) -> Path:
    target = load_routine(folder).steps[0].target
    assert target is not None
    return folder / target.crop


def test_a_30000_square_bomb_of_110_kb_is_refused_in_words(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.png"
    size = write_bomb_png(bomb, 30000, 30000)
    assert size < 200_000
    with pytest.raises(PictureError, match=r"is 30000x30000 pixels \(900 megapixels\), more than the 50"):
        load_picture(tmp_path, "bomb.png")


def test_the_size_is_read_before_any_decoding(tmp_path: Path) -> None:
    """60 megapixels whose picture data is cut short: decoding would fail with 'cannot be read'; the refusal
    names the size, so nothing was decoded. PIL alone would decode it (it warns only above 89 MP)."""
    assert Image.MAX_IMAGE_PIXELS is not None and MAX_PICTURE_PIXELS < 10000 * 6000 < Image.MAX_IMAGE_PIXELS
    write_bomb_png(tmp_path / "cut.png", 10000, 6000, cut=True)
    with pytest.raises(PictureError, match=r"is 10000x6000 pixels \(60 megapixels\).*it was not decoded"):
        load_picture(tmp_path, "cut.png")
    # The control: the same cut file small enough to be decoded fails in the decoder instead.
    write_bomb_png(tmp_path / "small.png", 1000, 600, cut=True)
    with pytest.raises(PictureError, match="cannot be read as a PNG"):
        load_picture(tmp_path, "small.png")


def test_a_routine_with_a_bomb_crop_says_so_and_the_good_ones_are_still_listed(tmp_path: Path) -> None:
    good = _saved(tmp_path, "good")
    bad = _saved(tmp_path, "bombed")
    write_bomb_png(_crop(bad), 30000, 30000)
    with pytest.raises(RoutineFileError) as raised:
        load_routine(bad)
    assert any("30000x30000 pixels" in p for p in raised.value.problems), raised.value.problems
    err = io.StringIO()
    assert routine_command.open_routine(bad.parent, bad.name, err) is None
    assert "30000x30000 pixels" in err.getvalue()
    # The real command, as a person runs it: no traceback, both routines listed.
    listed = subprocess.run(
        [*HOLODESK_COMMAND, "routine", "list", "--routines", str(good.parent)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stdout + listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert set(rows) == {good.name, bad.name}, listed.stdout
    assert "cannot be read" in rows[bad.name] and "30000x30000 pixels" in rows[bad.name]
    assert "cannot be read" not in rows[good.name] and " 1 " in rows[good.name]


def test_any_error_in_one_routine_still_lists_the_others(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a routine's loading raises, not only the errors it knows (a MemoryError, a bug): listed with it."""
    good = _saved(tmp_path, "good")
    bad = _saved(tmp_path, "breaks")
    real_load = routine_command.load_routine

    def load(folder: Path) -> object:
        if folder == bad:
            raise MemoryError("cannot allocate 2.7 GB")
        return real_load(folder)

    monkeypatch.setattr(routine_command, "load_routine", load)
    out = io.StringIO()
    assert routine_command.list_routines(good.parent, out) == 0
    text = out.getvalue()
    assert good.name in text and f"{bad.name}" in text
    assert "cannot be read: MemoryError: cannot allocate 2.7 GB" in text
