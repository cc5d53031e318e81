"""Typing and pasting into kitty and alacritty (Debian's packages) on Xvfb, read back from what the terminal sent.

Each terminal runs `cat > file` (tests/support/gl_terminal_shell.py), so the file holds exactly what
the terminal passed to its program. The faults these guard, found in a matrix of programs and layouts:

- kitty compiles a changed keymap only at the next key it handles, with the modifier state the
  server has then: when it read our first key while Shift was already down for a later one, the
  first letter came out upper-case and the step said done. Here kitty is paused (SIGSTOP) from the
  first key until Shift is held, as a loaded machine's kitty was late; the typer must wait for it
  before pressing Shift.
- alacritty asks for a paste from a second X connection of its own: the text arrived, and the step
  said "the paste was not taken" and never pressed Enter. The paste must count, and Enter be pressed.
- kitty with Russian active read ctrl+shift+v on the key that has v in group 1 as ctrl+shift+м and
  sent `ESC[1084;6u` into its program. The paste key must have no letter there, and a paste key
  nobody took must be reported as having reached the terminal's program.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator

import pytest
from Xlib import display as xdisplay

from holodesk.automation.actions import TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.primitives import KeyPresses, PastedText
from holodesk.automation.input.x11 import xkb
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.keyboard import X11Typer
from holodesk.automation.input.x11.selection import PasteNotTaken
from holodesk.automation.virtual_display import XvfbServer
from tests.support.gl_terminal_shell import GlTerminal, gl_terminal

pytestmark = pytest.mark.display

# More characters than there are spare keycodes for its missing keys on Russian: it goes through the clipboard.
PASTED = "Съешь же ещё этих мягких французских булок, the quick brown fox"


def use_layout(layouts: str, group: int) -> None:
    subprocess.run(["setxkbmap", "-layout", layouts], check=True, timeout=20)
    connection = xdisplay.Display()
    try:
        xkb.lock(connection, group=group)
        assert xkb.read_state(connection).group == group
    finally:
        connection.close()


@pytest.fixture(scope="module")
def kitty(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GlTerminal]:
    with gl_terminal("kitty", tmp_path_factory.mktemp("kitty")) as terminal:
        yield terminal


@pytest.fixture(scope="module")
def alacritty(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GlTerminal]:
    with gl_terminal("alacritty", tmp_path_factory.mktemp("alacritty")) as terminal:
        yield terminal


@pytest.fixture
def input_performer(xvfb: XvfbServer) -> Iterator[InputPerformer]:
    performer = InputPerformer(X11Input())
    try:
        yield performer
    finally:
        performer.close()
        subprocess.run(["setxkbmap", "-layout", "us"], check=False, timeout=20)


def _type_with_kitty_late(kitty: GlTerminal, typer: X11Typer, text: str) -> str:
    """Type `text` + Enter with kitty paused from just before the first key until Shift is held
    (0.5 s between keys; kitty resumes 1.2 s after the first, while the 3rd to 8th keys are shifted).
    What kitty sent its program."""
    resume = threading.Timer(1.2, kitty.resume)
    started: list[bool] = []

    def first_key(keys: list[str]) -> None:
        if not started:
            started.append(True)
            resume.start()

    since = len(kitty.text())
    typer.on_keys = first_key
    typer.key_interval_s = 0.5
    kitty.focus()
    kitty.pause()
    try:
        typer.type_text(text + "\n", CancelToken())
    finally:
        resume.cancel()
        kitty.resume()
    return kitty.added(text + "\n", since)


def test_kitty_reads_the_first_key_after_a_new_binding_without_a_later_shift(kitty: GlTerminal) -> None:
    """ü is bound to a spare keycode for this text: kitty compiles that keymap at its first key."""
    use_layout("us", 0)
    typer = X11Typer()
    try:
        assert _type_with_kitty_late(kitty, typer, "aüBCDEFG") == "aüBCDEFG\n"
    finally:
        typer.close()


def test_kitty_reads_the_first_key_after_a_layout_change_without_a_later_shift(kitty: GlTerminal) -> None:
    """The user switches from us to German between two texts (/ is Shift+7 there)."""
    use_layout("us", 0)
    typer = X11Typer()
    try:
        since = len(kitty.text())
        kitty.focus()
        typer.type_text("ok: go\n", CancelToken())
        assert kitty.added("ok: go\n", since) == "ok: go\n"
        use_layout("de", 0)
        assert _type_with_kitty_late(kitty, typer, "a//////") == "a//////\n"
    finally:
        typer.close()


@pytest.mark.parametrize(("layouts", "group"), [("ru", 0), ("us,ru", 1)])
def test_alacritty_takes_a_paste_from_its_second_connection_and_enter_follows(
    layouts: str, group: int, alacritty: GlTerminal, input_performer: InputPerformer
) -> None:
    use_layout(layouts, group)
    alacritty.focus()
    since = len(alacritty.text())
    result = input_performer.execute(TypeText(PASTED, press_enter=True))
    assert result.ok, result.detail
    assert "pasted through the clipboard" in result.detail and "pressed enter" in result.detail, result.detail
    assert alacritty.added(PASTED + "\n", since) == PASTED + "\n"


def test_kitty_with_russian_active_pastes_with_a_key_that_has_no_letter(
    kitty: GlTerminal, input_performer: InputPerformer
) -> None:
    use_layout("us,ru", 1)
    kitty.focus()
    since = len(kitty.text())
    result = input_performer.execute(TypeText(PASTED, press_enter=True))
    assert result.ok, result.detail
    assert "pasted through the clipboard with shift+insert" in result.detail, result.detail
    assert kitty.added(PASTED + "\n", since) == PASTED + "\n"


def test_a_paste_key_kitty_did_not_take_is_reported_as_reaching_its_program(
    kitty: GlTerminal, xvfb: XvfbServer
) -> None:
    """ctrl+shift+v on group 1's v key with Russian active, as before the fix: kitty sends it on."""
    use_layout("us,ru", 1)
    kitty.focus()
    backend = X11Input()
    backend.paste_offer_timeout_s = 2.0
    since = len(kitty.text())
    try:
        with pytest.raises(PasteNotTaken) as raised:
            backend.perform(PastedText("never pasted", ("ctrl", "shift", "v")), CancelToken())
        backend.perform(KeyPresses((), ("enter",)), CancelToken())  # cat writes the line
    finally:
        backend.close()
    message = str(raised.value)
    assert "the paste was not taken" in message, message
    assert "ctrl+shift+v reached kitty as a key press" in message and "that program received it" in message, message
    assert kitty.added("\x1b[1084;6u\n", since) == "\x1b[1084;6u\n"  # what the words say reached it
