"""Layout-independent typing through XTEST: unit rules, then a real xterm running what was typed.

The xterm tests type a shell command with `/`, `>`, `|` and non-ASCII text into bash in an xterm,
under the default (US) layout and under `setxkbmap de` (where `/` is shift+7 and `|` needs AltGr),
and check the file the command wrote. A keymap with no spare keycode sends the text through the
clipboard instead, with the paste key xterm expects.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.automation.actions import KeyCombo, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import ActionError, Cancelled
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.programs import paste_keys
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.keyboard import (
    XK_RETURN,
    Keymap,
    X11Typer,
    focused_window_class,
    keysym_for,
    untypable_characters,
)
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import XvfbServer
from tests.support.waiting import wait_until
from tests.support.xterm_shell import shell_env, wait_for_prompt

XTERM_ORIGIN = (200, 150)
# How long to wait for xterm and bash to do something: generous, because a loaded machine can be slow
# and only a failure ever waits this long.
WAIT_S = 60.0
# Every character class that went wrong before: '/' and '>' (mistyped on a German layout by a
# US table), '|' (AltGr on German), quotes, and text no layout has (German, a dash, Japanese).
PAYLOAD = "a/b > c | Grüße — 東京 'x'"


def test_keysyms_follow_latin1_then_unicode() -> None:
    assert keysym_for("a") == ord("a")
    assert keysym_for("ü") == 0xFC
    assert keysym_for("東") == 0x01000000 + ord("東")
    assert keysym_for("\n") == XK_RETURN
    with pytest.raises(ActionError, match=r"U\+001B"):
        keysym_for("\x1b")
    assert untypable_characters("ok\x1b[2J\x07\x1b") == ["\x1b", "\x07"]


def test_keymap_reads_the_active_group_and_finds_the_spare_keycodes() -> None:
    # keycode 10: a/A in group 1, Cyrillic ef in group 2; 11: 1/! in both; 12..14: empty (spare)
    ef, ef_capital = 0x6C6, 0x6E6
    rows = [[ord("a"), ord("A"), ef, ef_capital], [ord("1"), ord("!"), ord("1"), ord("!")], [0, 0], [0, 0], [0]]
    first = Keymap(10, rows, group=0)
    assert first.direct(ord("A")) == (10, True)
    assert first.direct(ef) is None
    assert first.spare == [14, 13, 12]
    second = Keymap(10, rows, group=1)
    assert second.direct(ef_capital) == (10, True)
    assert second.direct(ord("a")) is None  # not on the active group: it goes on a spare keycode
    assert second.direct(ord("!")) == (11, True)


def test_keymap_finds_a_keysym_on_its_key_in_another_group_for_shortcuts() -> None:
    # keycode 10: v/V in group 1, Cyrillic em in group 2; 11: 1/! in group 1 only (repeated); 12: spare
    # bound to v by us (a spare keycode is no key of any group); 13: Cyrillic ve in group 2 only.
    em, em_capital, ve = 0x6CD, 0x6ED, 0x6D7
    rows = [[ord("v"), ord("V"), em, em_capital], [ord("1"), ord("!"), ord("1"), ord("!")], [ord("v"), ord("v")]]
    rows.append([0, 0, ve, 0])
    russian = Keymap(10, rows, group=1)
    assert russian.in_other_group(ord("v"), skip={12}) == (10, 0)
    assert russian.in_other_group(ord("v"), skip={10, 12}) is None
    assert russian.in_other_group(em) is None  # the active group's own key is not another group's
    assert russian.in_other_group(ord("V")) is None  # level 2 would need Shift
    latin = Keymap(10, rows, group=0)
    assert latin.in_other_group(em) == (10, 1)
    assert latin.in_other_group(ve) == (13, 1)
    assert latin.in_other_group(ord("1")) is None  # a one-group key's repeat is no second group


def test_terminals_paste_with_their_own_keys() -> None:
    assert paste_keys("linux", "Gnome-terminal") == ("ctrl", "shift", "v")
    assert paste_keys("linux", "XTerm") == ("shift", "insert")
    assert paste_keys("linux", "firefox") == ("ctrl", "v")
    assert paste_keys("darwin", "Terminal") == ("super", "v")


# -- a real xterm ---------------------------------------------------------------------------------


def _xdotool(*args: str) -> str:
    return subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=20, check=True).stdout


@pytest.fixture(scope="module")
def xterm(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """bash in an xterm at XTERM_ORIGIN, in a UTF-8 locale, working in a fresh folder (yielded)."""
    if shutil.which("xterm") is None:
        pytest.fail("xterm is not installed (Debian: apt install xterm)", pytrace=False)
    folder = tmp_path_factory.mktemp("xterm")
    env = shell_env(folder)
    geometry = f"100x20+{XTERM_ORIGIN[0]}+{XTERM_ORIGIN[1]}"
    process = subprocess.Popen(
        ["xterm", "-u8", "-geometry", geometry, "-e", "bash", "--norc", "--noprofile"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _xdotool("search", "--sync", "--onlyvisible", "--pid", str(process.pid))
        wait_for_prompt(folder)
        yield folder
    finally:
        process.terminate()
        process.wait(timeout=10)
        subprocess.run(["setxkbmap", "us"], check=False, timeout=20)


def _inside_xterm() -> Point:
    return Point(XTERM_ORIGIN[0] + 60, XTERM_ORIGIN[1] + 40)


def _wait_for_file(path: Path) -> str:
    """The file's text once a whole line is in it (the shell command that writes it has run)."""
    wait_until(lambda: path.exists() and path.read_bytes().endswith(b"\n"), WAIT_S, f"{path} written")
    return path.read_text(encoding="utf-8")


@pytest.mark.display
@pytest.mark.parametrize("layout", ["us", "de"])
def test_a_command_typed_into_xterm_runs_exactly_on_any_layout(
    xterm: Path, layout: str, caplog: pytest.LogCaptureFixture
) -> None:
    subprocess.run(["setxkbmap", layout], check=True, timeout=20)
    probe = X11Typer()
    slash = probe.keymap().direct(ord("/"))
    probe.close()
    assert slash is not None and slash[1] == (layout == "de")  # German: '/' is shift+7; US: unshifted
    out = xterm / f"out-{layout}.txt"
    command = f"printf '%s\\n' \"{PAYLOAD}\" > {out.name}\n"
    capture = ScreenCapture()
    try:
        with caplog.at_level(logging.INFO, logger="holodesk.automation.input.x11.backend"):
            result = InputPerformer(X11Input(capture=capture)).execute(TypeText(command, at=_inside_xterm()))
    finally:
        capture.close()
    assert result.ok, result.detail
    assert "key presses in layout group 1" in caplog.text  # logged; the result says it in words
    assert "clipboard" not in result.detail
    assert _wait_for_file(out) == PAYLOAD + "\n"
    assert focused_window_class() == "XTerm"


@pytest.mark.display
def test_without_a_spare_keycode_xterm_gets_the_text_pasted_with_shift_insert(xterm: Path, xvfb: XvfbServer) -> None:
    subprocess.run(["setxkbmap", "us"], check=True, timeout=20)
    typer = X11Typer()
    spare = typer.keymap().spare
    typer.close()
    # Fill every spare keycode (with a keysym no text uses), so '東' has nowhere to go.
    subprocess.run(["xmodmap", "-"], input="".join(f"keycode {k} = F35\n" for k in spare), text=True, check=True)
    try:
        out = xterm / "pasted.txt"
        capture = ScreenCapture()
        try:
            input_performer = InputPerformer(X11Input(capture=capture))
            # the text is pasted; the Enter that runs it is a key press (xterm pastes no newline as Enter)
            pasted = input_performer.execute(TypeText(f"printf '%s\\n' '東京 a/b' > {out.name}", at=_inside_xterm()))
            typed = input_performer.execute(KeyCombo(("enter",)))
        finally:
            capture.close()
        assert pasted.ok and typed.ok, (pasted.detail, typed.detail)
        assert "pasted through the clipboard with shift+insert" in pasted.detail
        assert "more than the 0 spare keycodes" in pasted.detail
        assert _wait_for_file(out) == "東京 a/b\n"
    finally:
        subprocess.run(["xmodmap", "-"], input="".join(f"keycode {k} =\n" for k in spare), text=True, check=True)


@pytest.mark.display
def test_typing_stops_between_keys_when_cancelled_and_keeps_the_binding_xterm_may_still_read(xterm: Path) -> None:
    """xterm takes no _NET_WM_PING, so it can never show it read the é keys: their binding stays (cleared
    only once xterm is gone, or by the next start from the marker; automation.input.x11.unread)."""
    subprocess.run(["setxkbmap", "us"], check=True, timeout=20)
    typer = X11Typer(key_interval_s=0.01)
    spare_before = typer.keymap().spare
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    with pytest.raises(Cancelled):
        typer.type_text("é" * 400, token)
    assert len(typer.keymap().spare) == len(spare_before) - 1  # é stays on its spare keycode
    assert "XTerm may still read keys" in typer.close()
    _xdotool("key", "ctrl+u")  # clear the half-typed line
    subprocess.run(["setxkbmap", "us"], check=True, timeout=20)  # the test's own clean-up of the binding
