"""Names meant for files and prompts, said as a person reads them."""

from __future__ import annotations

import pytest

from holodesk.app.common.session_words import hotkey_in_words, kind_in_words
from holodesk.automation.actions import ACTION_TYPES


@pytest.mark.parametrize(
    ("hotkey", "words"),
    [("<ctrl>+<alt>+h", "Ctrl+Alt+H"), ("<cmd>+<shift>+<f5>", "Super+Shift+F5"), ("<ctrl>+<esc>", "Ctrl+Esc")],
)
def test_a_hotkey_reads_as_the_keyboard_shows_it(hotkey: str, words: str) -> None:
    assert hotkey_in_words(hotkey) == words


def test_every_action_kind_has_words_without_underscores() -> None:
    for kind in ACTION_TYPES:
        assert "_" not in kind_in_words(kind), kind
    assert kind_in_words("hold_and_tap") == "hold-and-tap keys"
