"""The wlroots keyboard backend (automation/input/wlroots): Holodesk's own actions typed on sway, read back.

Each action goes through the InputPerformer, as a run's approved step does, into the native Wayland
Qt field; Enter ends it, and the window then logs the field's whole content, compared exactly.
Built without a virtual pointer (test_wlroots_pointer.py tests the one a run gets), pointer actions are
refused in words by the plan's checks, before anything reaches the desktop.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.sway_stack import SwayStack
from holodesk.automation.actions import Click, KeyCombo, Point, TypeText
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import POINTER_NOT_WIRED, WtypeKeyboard
from tests.automation.wlroots.conftest import SwayTarget

TEXTS = {
    "ascii": "The quick brown fox jumps over 13 lazy dogs; (ok)?",
    "accents": "café déjà vu, naïve Ærøskøbing, Ñandú",
    "cyrillic": "Съешь же ещё этих мягких французских булок",
    "cjk": "漢字かなカナ 한국어 中文",
    "long": "-leading dash, then 200 characters: " + "0123456789abcdefghij" * 10,
}


@pytest.fixture(scope="module")
def performer(sway_stack: SwayStack) -> Iterator[InputPerformer]:
    performer = InputPerformer(WtypeKeyboard(environ=sway_stack.env(), chunk_chars=64))
    try:
        yield performer
    finally:
        performer.close()


@pytest.mark.display
@pytest.mark.wlroots
@pytest.mark.parametrize("name", list(TEXTS))
def test_typed_text_arrives_exactly(performer: InputPerformer, sway_target: SwayTarget, name: str) -> None:
    sway_target.clear()
    result = performer.execute(TypeText(TEXTS[name], press_enter=True))
    assert result.ok, result.detail
    assert sway_target.wait_for("enter", 20.0)["text"] == TEXTS[name]


@pytest.mark.display
@pytest.mark.wlroots
def test_a_held_modifier_reaches_the_program(performer: InputPerformer, sway_target: SwayTarget) -> None:
    sway_target.clear()
    assert performer.execute(TypeText("replace me")).ok
    assert performer.execute(KeyCombo(("ctrl", "a"))).ok  # Qt's select-all: only with ctrl held
    assert performer.execute(TypeText("kept", press_enter=True)).ok
    assert sway_target.wait_for("enter", 20.0)["text"] == "kept"


@pytest.mark.display
@pytest.mark.wlroots
def test_without_a_pointer_a_click_is_refused_in_words_before_anything_is_sent(
    performer: InputPerformer, sway_target: SwayTarget
) -> None:
    sway_target.clear()
    with pytest.raises(ActionError, match=re.escape(POINTER_NOT_WIRED)):
        performer.validate(Click(Point(300, 200)))
    with pytest.raises(ActionError, match=re.escape(POINTER_NOT_WIRED)):
        performer.execute(Click(Point(300, 200)))
    assert performer.execute(TypeText("z", press_enter=True)).ok
    start = len(sway_target.seen)
    assert sway_target.wait_for("enter", 20.0)["text"] == "z"
    # The window logs every press; had the click gone out, its press would precede the typing's Enter.
    assert [r for r in sway_target.seen[start:] if r["event"] in ("press", "release")] == []


def test_without_wtype_key_presses_are_refused_naming_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    keyboard = WtypeKeyboard(environ={"SWAYSOCK": "/nonexistent"})
    with pytest.raises(ActionError, match="need wtype: sudo apt install wtype"):
        InputPerformer(keyboard).validate(KeyCombo(("ctrl", "a")))
