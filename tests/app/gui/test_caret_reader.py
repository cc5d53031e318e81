"""CaretReader's bounds (app/gui/caret_place.py), with stand-in helper programs that misbehave on purpose;
the toolkit scale app/gui/focused_area.py reads from the window sizes.

The real helper against a real GTK entry is tests/app/gui/test_caret_place.py; here each way a helper
can fail the tray (never ready, silent, dead, garbled) must cost one bounded read, give None with the
reason in words, and not start a new helper at every read.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from holodesk.app.gui.caret_place import CaretReader
from holodesk.app.gui.focused_area import toolkit_scale
from holodesk.automation.coords import Rect

READY = 'print(\'{"event": "ready"}\', flush=True)'
# The field and window the stand-ins name with each caret (in the helper's script).
AROUND_LINE = 'AROUND = {"field": [5, 10, 300, 34], "window": [0, 0, 400, 300]}'


def helper(tmp_path: Path, body: str, name: str = "helper.py") -> tuple[tuple[str, ...]]:
    """One helper command: this Python running `body`."""
    script = tmp_path / name
    script.write_text(f"import json, sys, time\n{AROUND_LINE}\n{body}\n", encoding="utf-8")
    return ((sys.executable, str(script)),)


def timed_read(reader: CaretReader, pid: int = 1234) -> tuple[object, float]:
    started = time.monotonic()
    answer = reader.read(pid)
    return answer, time.monotonic() - started


def test_an_answering_helper_gives_the_caret_and_the_field(tmp_path: Path) -> None:
    body = f"""{READY}
for line in sys.stdin:
    asked = json.loads(line)
    print(json.dumps({{"id": asked["id"], "caret": [asked["pid"], 20, 2, 17], **AROUND}}), flush=True)
"""
    reader = CaretReader(helper(tmp_path, body))
    try:
        first = reader.read(101)
        second = reader.read(102)
    finally:
        reader.close()
    assert first is not None and first.caret == Rect(101, 20, 2, 17) and first.field == Rect(5, 10, 300, 34)
    assert second is not None and second.caret.left == 102  # each answer goes with its own question


def test_a_python_without_gi_hands_over_to_the_next_at_once(tmp_path: Path) -> None:
    # The Debian package's venv cannot import Debian's gi; the system's Python then runs the helper.
    no_gi = 'print(json.dumps({"event": "unavailable", "missing": "gi", "reason": "no gi here"}), flush=True)'
    answers = f"""{READY}
for line in sys.stdin:
    asked = json.loads(line)
    print(json.dumps({{"id": asked["id"], "caret": [7, 20, 2, 17], **AROUND}}), flush=True)
"""
    reader = CaretReader(helper(tmp_path, no_gi, "venv.py") + helper(tmp_path, answers, "system.py"))
    try:
        answer, took = timed_read(reader)
    finally:
        reader.close()
    assert answer is not None and answer.caret == Rect(7, 20, 2, 17), reader.last_reason
    assert took < reader.start_wait_s, took


def test_a_helper_that_never_gets_ready_costs_the_start_wait_once(tmp_path: Path) -> None:
    reader = CaretReader(helper(tmp_path, "time.sleep(60)"), start_wait_s=0.5, hung_after_s=1.0)
    try:
        answer, took = timed_read(reader)
        assert answer is None and 0.4 < took < 1.0, took
        assert "still starting" in reader.last_reason
    finally:
        reader.close()


def test_a_silent_helper_costs_one_deadline_then_no_wait_then_it_is_ended(tmp_path: Path) -> None:
    reader = CaretReader(helper(tmp_path, f"{READY}\ntime.sleep(60)"), deadline_s=0.3, hung_after_s=1.0)
    try:
        answer, took = timed_read(reader)
        assert answer is None and took < 0.6, took
        assert "did not answer within 0.3 s" in reader.last_reason
        answer, took = timed_read(reader)  # the first question still open: no second wait
        assert answer is None and took < 0.1, took
        assert "still waiting" in reader.last_reason
        time.sleep(1.1)
        answer, took = timed_read(reader)
        assert answer is None and took < 0.5, took
        assert "no answer in 1 s" in reader.last_reason  # ended; none started again for a while
        answer, took = timed_read(reader)
        assert answer is None and took < 0.1, took
    finally:
        reader.close()


def test_a_helper_that_dies_is_reported_with_what_it_said(tmp_path: Path) -> None:
    said = "print('AT-SPI: Couldn\\'t connect to accessibility bus', file=sys.stderr)"
    body = f"{READY}\nsys.stdin.readline()\n{said}\nsys.exit(5)"
    reader = CaretReader(helper(tmp_path, body))
    try:
        answer, took = timed_read(reader)
        assert answer is None and took < 1.5, took
        assert "ended (exit status 5)" in reader.last_reason and "accessibility bus" in reader.last_reason
        answer, took = timed_read(reader)  # not started again at once
        assert answer is None and took < 0.1, took
    finally:
        reader.close()


def test_an_answer_that_is_not_a_rectangle_gives_no_caret(tmp_path: Path) -> None:
    body = f"""{READY}
for line in sys.stdin:
    asked = json.loads(line)
    print(json.dumps({{"id": asked["id"], "caret": [1, 2, 0, 17], **AROUND}}), flush=True)
"""
    reader = CaretReader(helper(tmp_path, body))
    try:
        assert reader.read(1) is None
        assert "without a caret" in reader.last_reason
    finally:
        reader.close()


def test_the_toolkits_scale_is_the_x_windows_size_over_the_accessible_ones() -> None:
    assert toolkit_scale(Rect(200, 100, 1000, 700), Rect(100, 50, 500, 350)) == 2  # GDK_SCALE=2
    # Unscaled, with a window manager's title bar and border in the accessible window (zenity, openbox).
    assert toolkit_scale(Rect(544, 360, 194, 119), Rect(543, 339, 196, 141)) == 1
    assert toolkit_scale(Rect(0, 0, 1000, 700), Rect(0, 0, 300, 300)) is None  # another window
    assert toolkit_scale(Rect(0, 0, 100, 100), Rect(0, 0, 900, 900)) is None
