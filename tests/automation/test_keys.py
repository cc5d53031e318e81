"""Key names from models and users normalize to one spelling; unknown names are rejected."""

from __future__ import annotations

import pytest

from holodesk.automation.errors import ActionError
from holodesk.automation.keys import normalize_key, parse_combination


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("ctrl", "ctrl"),
        ("Control", "ctrl"),
        ("CTRL", "ctrl"),
        ("cmd", "super"),
        ("Win", "super"),
        ("super", "super"),
        ("Meta", "super"),
        ("Return", "enter"),
        ("enter", "enter"),
        ("Escape", "esc"),
        ("esc", "esc"),
        ("Page_Down", "pagedown"),
        ("PgUp", "pageup"),
        ("ArrowLeft", "left"),
        ("F12", "f12"),
        ("BackSpace", "backspace"),
        ("A", "a"),
        ("7", "7"),
        ("/", "/"),
        (" ", "space"),
        ("Option", "alt"),
        ("plus", "+"),
    ],
)
def test_aliases_normalize(name, canonical):
    assert normalize_key(name) == canonical


@pytest.mark.parametrize("name", ["hyper", "f25", "ctrll", "", "é", "enter key", "\n"])
def test_unknown_names_are_rejected_with_the_name(name):
    with pytest.raises(ActionError, match="unknown key name"):
        normalize_key(name)


def test_non_string_names_are_rejected():
    with pytest.raises(ActionError, match="must be a string"):
        normalize_key(17)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("ctrl+shift+t", ("ctrl", "shift", "t")),
        ("Control+C", ("ctrl", "c")),
        ("ctrl c", ("ctrl", "c")),
        ("ctrl-alt-delete", ("ctrl", "alt", "delete")),
        ("ctrl++", ("ctrl", "+")),
        ("Return", ("enter",)),
        ("+", ("+",)),
    ],
)
def test_combinations_split_and_normalize(text, keys):
    assert parse_combination(text) == keys


@pytest.mark.parametrize("text", ["", "   ", "ctrl++shift", "ctrl+", "ctrl+hyper"])
def test_malformed_combinations_are_rejected(text):
    with pytest.raises(ActionError):
        parse_combination(text)
