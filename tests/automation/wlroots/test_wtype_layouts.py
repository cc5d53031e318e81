"""Typing through the wlroots keyboard backend is exact whatever keyboard layout sway is set to.

wtype's virtual keyboard carries its own keymap (the text's keysyms), and sway keeps it: a layout
set for keyboards in sway's config (`input type:keyboard xkb_layout ...`, as a user sets theirs)
must not turn its keys into that layout's characters (on "de", z and y swap; on "fr", a and q; on
"ru" every letter is Cyrillic). Each layout gets its own sway and Qt window.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.rigs.sway_stack import StackError, SwayStack
from holodesk.automation.actions import KeyCombo, TypeText
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import WtypeKeyboard
from tests.automation.wlroots.conftest import SwayTarget

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

TEXT = "zy qa wm; Zürich, Ёж, 字 -- 1/2"


@pytest.fixture(params=["de", "fr", "ru", "us,ru"])
def layout_stack(request: pytest.FixtureRequest) -> Iterator[SwayStack]:
    stack = SwayStack(keyboard_layout=request.param)
    try:
        stack.start()
    except StackError as exc:
        pytest.fail(f"the headless sway stack did not start: {exc}", pytrace=False)
    try:
        yield stack
    finally:
        stack.stop()


def test_typing_and_a_shortcut_are_exact_on_any_configured_layout(layout_stack: SwayStack) -> None:
    config = layout_stack.swaymsg("get_config")
    assert isinstance(config, dict)
    assert f"xkb_layout {layout_stack.keyboard_layout}" in config["config"]  # sway runs with that layout set
    target = SwayTarget(layout_stack)
    performer = InputPerformer(WtypeKeyboard(environ=layout_stack.env()))
    try:
        assert performer.execute(TypeText("replace me")).ok
        assert performer.execute(KeyCombo(("ctrl", "a"))).ok  # select-all must stay ctrl+a, not ctrl+q or ctrl+ф
        assert performer.execute(TypeText(TEXT, press_enter=True)).ok
        assert target.wait_for("enter", 20.0)["text"] == TEXT
    finally:
        performer.close()
        target.close()
