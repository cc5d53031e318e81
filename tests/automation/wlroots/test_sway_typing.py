"""Typing on sway through the virtual-keyboard protocol with wtype, read back from a native Wayland Qt field.

wtype uploads a keymap made of the text's own keysyms, so what it types does not depend on any layout.
Each case ends with Return: the window then logs the field's whole content (`enter`), so the check
waits for that one event and compares exactly, with nothing left to arrive afterwards.

The first key after a new virtual keyboard appears was lost here ("Hello" arrived as "ello" in 1 run
of 1; with a 20 ms pause or a Shift tap first it arrived whole): each call taps Shift first, a key
that types nothing, so the text's own first key is never the one lost.
"""

from __future__ import annotations

import subprocess

import pytest

from bench.rigs.sway_stack import SwayStack
from tests.automation.wlroots.conftest import SwayTarget

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

CASES = {
    "ascii": "The quick brown fox jumps over 13 lazy dogs; (ok)?",
    "accents": "café déjà vu, naïve Ærøskøbing, Ñandú",
    "cyrillic": "Съешь же ещё этих мягких французских булок",
    "cjk": "漢字かなカナ 한국어 中文",
}


def wtype(stack: SwayStack, text: str) -> None:
    """Type `text`, then Return, through wtype on the stack's sway."""
    assert not text.startswith("-"), "wtype would read the text as an option"
    done = subprocess.run(
        ["wtype", "-k", "Shift_L", text, "-k", "Return"], env=stack.env(), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, f"wtype failed ({done.returncode}): {done.stderr.strip()}"


@pytest.mark.parametrize("name", list(CASES))
def test_wtype_text_arrives_exactly_in_a_wayland_qt_field(
    sway_stack: SwayStack, sway_target: SwayTarget, name: str
) -> None:
    sway_target.clear()
    wtype(sway_stack, CASES[name])
    received = sway_target.wait_for("enter", 20.0)["text"]
    assert received == CASES[name]
