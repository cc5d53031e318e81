"""Typing and key presses on every keyboard layout, read back from real programs on Xvfb.

Three programs, started once each: bash in an xterm, where `cat > file` receives the text and
the file on disk is compared, a Qt QLineEdit (bench/rigs/target_window.py), whose text is read
back from its own log, and a Chromium page (tests/support/chromium_field.py), whose textarea is
read back from the DOM. A GTK entry (zenity, which prints what it held when Enter closes it) needs
one start per text, so it gets German and the two-group layouts only. Each layout (us, de, fr, ru,
and `us,ru` / `us,fr` with the second group active, as Russian and French users have them) gets
every text: ASCII with shell specials, accents, Cyrillic, CJK, an emoji, a 600-character line and
(in the terminal) a newline. A cell passes when the program received exactly the text, or when
the input performer refused the action in words before sending anything. Hotkeys are resolved by keysym
in the active group: "/" is "/" on German, "@" is "@" on French; a shortcut's letter the active
group lacks is pressed on its key in another group (ctrl+a and ctrl+v reach Chromium with Russian
active, as a user's do). The input conformance cases (tests/support/input_conformance.py) run here
for X11, with Russian active, in the Qt field and in the Chromium page's input, and a
loaded-machine test replaces spare keycode bindings under two CPU hogs.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.target_client import TargetWindow
from holodesk.automation.actions import Click, KeyCombo, Point, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11 import xkb
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.keyboard import LayoutChanged, X11Typer
from holodesk.automation.input.x11.unread import PING_TIMEOUT_S, ping_focused_window
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import XvfbServer
from tests.support.chromium_field import AREA, FIELD, ChromiumField
from tests.support.input_conformance import CASES, FENCE, Case, Field, run_case

pytestmark = pytest.mark.display

XTERM_ORIGIN = (60, 60)
QT_ORIGIN = (900, 400)
CHROMIUM_ORIGIN = (60, 600)

# (layouts for setxkbmap, the group to make active, counted from 0)
LAYOUTS = {
    "us": ("us", 0),
    "de": ("de", 0),
    "fr": ("fr", 0),
    "ru": ("ru", 0),
    "us,ru@ru": ("us,ru", 1),
    "us,fr@fr": ("us,fr", 1),
}
TEXTS = {
    "shell specials": "a/b > c | d 'e' \"f\" $HOME ~`x` & ; \\ [1] {2} (3) <4> #5 %6 ^7 *8 +9 =0 ?!@",
    "accents": "Grüße, déjà vu, naïve façade, Ærø, ñandú",
    "cyrillic": "Съешь же ещё этих мягких французских булок",
    "cjk": "東京で日本語を入力する",
    "emoji": "ok 👍 done ✓",
    "long line": ("The quick brown fox jumps over the lazy dog 0123456789; " * 11)[:600],
}
NEWLINE_TEXT = "first line\nsecond line"


def focus(window_id: int) -> None:
    """Give `window_id` the keyboard focus, as a window manager does when the user clicks it."""
    subprocess.run(["xdotool", "windowfocus", "--sync", str(window_id)], check=True, timeout=20)


def use_layout(name: str) -> None:
    layouts, group = LAYOUTS[name]
    subprocess.run(["setxkbmap", "-layout", layouts], check=True, timeout=20)
    from Xlib import display as xdisplay

    connection = xdisplay.Display()
    try:
        xkb.lock(connection, group=group)
        assert xkb.read_state(connection).group == group
    finally:
        connection.close()


def _wait_for_file(path: Path, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return path.exists()


def _wait_for_content(path: Path, expected: str, timeout_s: float = 15.0) -> str:
    """The file's text once it equals `expected`, or whatever it holds when `timeout_s` ran out."""
    deadline = time.monotonic() + timeout_s
    content = ""
    while time.monotonic() < deadline:
        content = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        if content == expected:
            return content
        time.sleep(0.05)
    return content


@pytest.fixture(scope="module")
def input_performer(xvfb: XvfbServer) -> Iterator[InputPerformer]:
    capture = ScreenCapture()
    input_performer = InputPerformer(X11Input(capture=capture))
    try:
        yield input_performer
    finally:
        input_performer.close()
        capture.close()
        subprocess.run(["setxkbmap", "-layout", "us"], check=False, timeout=20)


@pytest.fixture(scope="module")
def xterm(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """bash in an xterm at XTERM_ORIGIN in a UTF-8 locale, working in a fresh folder (yielded)."""
    if shutil.which("xterm") is None:
        pytest.fail("xterm is not installed (Debian: apt install xterm)", pytrace=False)
    folder = tmp_path_factory.mktemp("xterm")
    # Without bracketed paste: bash turns it off only when it starts a command, and xterm reads that
    # from the terminal asynchronously, so a paste into `cat` just after it started could be wrapped.
    (folder / "inputrc").write_text("set enable-bracketed-paste off\n")
    env = {**os.environ, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(folder), "PS1": "$ "}
    env["INPUTRC"] = str(folder / "inputrc")
    process = subprocess.Popen(
        ["xterm", "-u8", "-geometry", f"100x20+{XTERM_ORIGIN[0]}+{XTERM_ORIGIN[1]}", "-e", "bash", "--norc"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        found = subprocess.run(
            ["xdotool", "search", "--sync", "--onlyvisible", "--pid", str(process.pid)],
            check=True,
            timeout=30,
            capture_output=True,
            text=True,
        )
        (folder / "window-id").write_text(found.stdout.split()[0])
        ready = folder / "ready"
        # bash is ready once it ran a command typed into it
        focus(int(found.stdout.split()[0]))
        starter = InputPerformer(X11Input())
        try:
            starter.execute(TypeText("touch ready", at=_in_xterm(), press_enter=True))
        finally:
            starter.close()
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), "bash in the xterm did not run a typed command"
        yield folder
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def qt_field(xvfb: XvfbServer) -> Iterator[TargetWindow]:
    window = TargetWindow.start(*QT_ORIGIN)
    try:
        yield window
    finally:
        window.close()


@pytest.fixture(scope="module")
def chromium(xvfb: XvfbServer) -> Iterator[ChromiumField]:
    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        pytest.fail("Chromium is not installed (Debian: apt install chromium chromium-driver)", pytrace=False)
    window = ChromiumField(CHROMIUM_ORIGIN)
    try:
        yield window
    finally:
        window.close()


def _in_xterm() -> Point:
    return Point(XTERM_ORIGIN[0] + 80, XTERM_ORIGIN[1] + 60)


def _field_text(window: TargetWindow) -> str:
    texts = [event["text"] for event in window.sync() if event["event"] == "text"]
    return texts[-1] if texts else ""


def _xterm_cell(input_performer: InputPerformer, folder: Path, name: str, text: str) -> str | None:
    """Type `text` into `cat > file` in the xterm; None when exact, else what went wrong."""
    focus(int((folder / "window-id").read_text()))
    out = folder / f"{name.replace(' ', '-')}.txt"
    started = input_performer.execute(TypeText(f"cat > {out.name}", at=_in_xterm(), press_enter=True))
    if not started.ok:
        return f"starting cat failed: {started.detail}"
    # The shell opens the file after it has put the terminal back in line mode for cat: keys sent
    # before that would reach the terminal in readline's raw mode (no EOF on ctrl+d).
    _wait_for_file(out)
    try:
        typed = input_performer.execute(TypeText(text, press_enter=True))
    except ActionError as exc:
        input_performer.execute(KeyCombo(("ctrl", "d")))
        return None if str(exc) else "refused without words"
    input_performer.execute(KeyCombo(("ctrl", "d")))
    got = _wait_for_content(out, text + "\n")
    if got != text + "\n":
        return f"got {got!r} ({typed.detail})"
    return None


def _qt_cell(input_performer: InputPerformer, window: TargetWindow, text: str) -> str | None:
    focus(window.ready["window_id"])
    window.reset()
    try:
        typed = input_performer.execute(TypeText(text, at=window.centre("field")))
    except ActionError as exc:
        return None if str(exc) else "refused without words"
    got = _field_text(window)
    return None if got == text else f"got {got!r} ({typed.detail})"


def _chromium_cell(input_performer: InputPerformer, chromium: ChromiumField, text: str) -> str | None:
    """Type `text` into the page's text area (a line break is Enter); None when its DOM value is exact."""
    chromium.focus(AREA)
    try:
        typed = input_performer.execute(TypeText(text))
    except ActionError as exc:
        return None if str(exc) else "refused without words"
    got = chromium.wait_for_value(AREA, text)
    if got == text:
        return None
    # What the page saw, so that a rare miss (CI once got '' for a paste Chromium had read) says more.
    seen = f"the page saw keys {chromium.keys()[-6:]}, focus on {chromium.focused_element()!r}"
    return f"got {got!r} ({typed.detail}; {seen})"


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_text_arrives_exactly_in_a_chromium_text_area(
    layout: str, input_performer: InputPerformer, chromium: ChromiumField
) -> None:
    use_layout(layout)
    texts = [*TEXTS.items(), ("newline", NEWLINE_TEXT)]
    wrong = {name: cell for name, text in texts if (cell := _chromium_cell(input_performer, chromium, text))}
    assert not wrong, "\n".join(f"{layout}: Chromium text area / {name}: {what}" for name, what in wrong.items())


def test_with_no_latin_group_chromium_gets_a_paste_by_shift_insert(
    input_performer: InputPerformer, chromium: ChromiumField
) -> None:
    """Russian alone: no group has v, and Chromium reads ctrl+v by the physical key, so a spare keycode
    bound to v pastes nothing there; the paste key is then shift+insert, which has no letter."""
    use_layout("ru")
    text = "the quick brown fox jumps over the lazy dog: QWERTY"  # more keys than the spare keycodes
    chromium.focus(AREA)
    result = input_performer.execute(TypeText(text))
    assert result.ok, result.detail
    assert "shift+insert" in result.detail, result.detail
    assert chromium.wait_for_value(AREA, text) == text


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_text_arrives_exactly_in_a_terminal_and_a_qt_field(
    layout: str, input_performer: InputPerformer, xterm: Path, qt_field: TargetWindow
) -> None:
    use_layout(layout)
    wrong: dict[str, str] = {}
    for name, text in [*TEXTS.items(), ("newline", NEWLINE_TEXT)]:
        cell = _xterm_cell(input_performer, xterm, f"{layout}-{name}".replace(",", "_").replace("@", "_"), text)
        if cell:
            wrong[f"xterm / {name}"] = cell
    for name, text in TEXTS.items():
        cell = _qt_cell(input_performer, qt_field, text)
        if cell:
            wrong[f"Qt field / {name}"] = cell
    assert not wrong, "\n".join(f"{layout}: {cell}: {what}" for cell, what in wrong.items())


def test_the_focused_qt_field_answers_the_ping_the_typer_waits_for(qt_field: TargetWindow) -> None:
    """Before it rebinds a spare keycode the typer pings the focused window (automation.input.x11.keyboard).

    Qt answers on the root window with its own event mask; unheard, every rebind in a Qt program
    waited out the ping's timeout and a settle time (3 s) instead of the program's answer.
    """
    focus(qt_field.ready["window_id"])
    assert ping_focused_window(None, PING_TIMEOUT_S), "the Qt window's answer to _NET_WM_PING was not heard"


KEYS_LOG = "holodesk.automation.input.x11.backend"  # where the key presses sent are logged

# What the step logs it sent: the active group's a, the a of group 1 (a shortcut takes the Latin
# key, as a user's does), or a spare keycode where no group has a.
SELECT_ALL_SENT = {
    "ru": "ctrl+a: 2 key presses in layout group 1, 1 on temporarily bound keys",
    "us,ru@ru": "ctrl+a (the key that has a in group 1): 2 key presses in layout group 2",
    "us,fr@fr": "ctrl+a: 2 key presses in layout group 2",
    "de": "ctrl+a: 2 key presses in layout group 1",
}


@pytest.mark.parametrize("layout", list(SELECT_ALL_SENT))
def test_overwrite_selects_all_by_keysym_in_the_active_group(
    layout: str, input_performer: InputPerformer, qt_field: TargetWindow, caplog: pytest.LogCaptureFixture
) -> None:
    use_layout(layout)
    focus(qt_field.ready["window_id"])
    qt_field.reset()
    input_performer.execute(TypeText("old text", at=qt_field.centre("field")))
    with caplog.at_level(logging.INFO, logger=KEYS_LOG):
        result = input_performer.execute(TypeText("new", at=qt_field.centre("field"), overwrite=True))
    assert result.ok, result.detail
    assert _field_text(qt_field) == "new"
    assert "pressed ctrl+a" in result.detail and SELECT_ALL_SENT[layout] in caplog.text, caplog.text


@pytest.mark.parametrize(("layout", "key"), [("de", "/"), ("fr", "@"), ("us,fr@fr", "1"), ("us,ru@ru", "q")])
def test_a_symbol_key_sends_that_symbol_on_any_layout(
    layout: str, key: str, input_performer: InputPerformer, qt_field: TargetWindow
) -> None:
    use_layout(layout)
    focus(qt_field.ready["window_id"])
    qt_field.reset()
    input_performer.execute(TypeText("x", at=qt_field.centre("field")))
    result = input_performer.execute(KeyCombo((key,)))
    assert result.ok, result.detail
    assert _field_text(qt_field) == "x" + key


def test_overwrite_in_a_terminal_is_refused_before_anything_is_sent(
    input_performer: InputPerformer, xterm: Path
) -> None:
    use_layout("us")
    focus(int((xterm / "window-id").read_text()))
    pending = xterm / "PWNED"
    input_performer.execute(TypeText("echo pending; touch PWNED", at=_in_xterm()))
    with pytest.raises(ActionError, match="overwrite cannot be honoured in a terminal"):
        input_performer.validate(TypeText("echo replaced > f", overwrite=True, press_enter=True))
    with pytest.raises(ActionError, match="terminal"):
        input_performer.execute(TypeText("echo replaced > f", at=_in_xterm(), overwrite=True, press_enter=True))
    # Nothing was sent: the pending line is still there, not run. Clear it without running it.
    input_performer.execute(KeyCombo(("ctrl", "e")))
    input_performer.execute(KeyCombo(("ctrl", "u")))
    input_performer.execute(TypeText("touch checked", press_enter=True))
    assert _wait_for_file(xterm / "checked")
    assert not pending.exists()
    assert not (xterm / "f").exists()


def test_empty_text_with_press_enter_presses_enter_alone(input_performer: InputPerformer, xterm: Path) -> None:
    use_layout("us,ru@ru")
    focus(int((xterm / "window-id").read_text()))
    input_performer.execute(TypeText("touch entered", at=_in_xterm()))
    result = input_performer.execute(TypeText("", press_enter=True))
    assert result.ok, result.detail
    assert result.detail.startswith("press Enter")
    assert _wait_for_file(xterm / "entered")


def test_a_windows_line_end_is_one_line_break_and_the_approval_says_it_is_enter() -> None:
    action = TypeText("one\r\ntwo\rthree")
    assert action.text == "one\ntwo\nthree"
    assert "2 line breaks pressed as Enter" in action.describe()
    assert "line break" not in TypeText("one line").describe()


@pytest.fixture
def two_cpu_hogs() -> Iterator[None]:
    """Two busy processes, so the programs read their keys late (the machine the race shows on)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(timeout=10)


def test_replaced_bindings_never_change_keys_a_loaded_program_has_not_read(
    input_performer: InputPerformer, qt_field: TargetWindow, two_cpu_hogs: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Each text needs 15 keys no layout has; 19 spare keycodes force replacing bindings from the second on.

    Replacing them at once, 3 runs of 3 arrived wrong here (keys read with later bindings).
    """
    use_layout("us,ru@ru")
    focus(qt_field.ready["window_id"])
    texts = ["".join(chr(0x4E00 + 15 * round_ + i) for i in range(15)) for round_ in range(6)]
    qt_field.reset()
    input_performer.execute(Click(qt_field.centre("field")))
    with caplog.at_level(logging.INFO, logger=KEYS_LOG):
        details = [input_performer.execute(TypeText(text)).detail for text in texts]
    assert _field_text(qt_field) == "".join(texts), details
    sent = [r.getMessage() for r in caplog.records if r.getMessage().startswith("typed as")]
    assert len(sent) == len(texts) and all(
        "15 key presses in layout group 2, 15 on temporarily bound keys" in m for m in sent
    )


def test_a_locked_caps_lock_changes_nothing_and_stays_locked(
    input_performer: InputPerformer, qt_field: TargetWindow
) -> None:
    use_layout("us")
    from Xlib import display as xdisplay

    connection = xdisplay.Display()
    try:
        xkb.lock(connection, lock_mods=xkb.LOCK_MASK)
        assert _qt_cell(input_performer, qt_field, "Hello ü World") is None
        assert xkb.read_state(connection).caps_locked
    finally:
        xkb.lock(connection, unlock_mods=xkb.LOCK_MASK)
        connection.close()


def test_a_group_switch_while_typing_is_reported_not_hidden(
    input_performer: InputPerformer, qt_field: TargetWindow
) -> None:
    """The user switches to Russian after the first key (done here from the typer's own key log)."""
    use_layout("us,ru@ru")
    from Xlib import display as xdisplay

    connection = xdisplay.Display()
    xkb.lock(connection, group=0)  # English active when the text starts
    switched: list[bool] = []

    def switch_once(keys: list[str]) -> None:
        if not switched:
            xkb.lock(connection, group=1)
            switched.append(True)

    focus(qt_field.ready["window_id"])
    qt_field.reset()
    input_performer.execute(Click(qt_field.centre("field")))
    typer = X11Typer(on_keys=switch_once)
    try:
        with pytest.raises(LayoutChanged, match="layout group changed from 1 to 2 while keys were sent"):
            typer.type_text("hello", CancelToken())
    finally:
        typer.close()
        xkb.lock(connection, group=0)
        connection.close()


# -- the input conformance cases (tests/support/input_conformance.py), as the Wayland backend runs them


def _x11_field(input_performer: InputPerformer, window: TargetWindow) -> Field:
    def prepare(start: str) -> None:
        focus(window.ready["window_id"])
        window.reset()
        input_performer.execute(TypeText(start, at=window.centre("field")) if start else Click(window.centre("field")))
        window.sync()

    def read_until_fence() -> tuple[str, bool]:
        events = window.sync()  # the fence was sent last: every earlier event is in
        texts = [event["text"] for event in events if event["event"] == "text"]
        text = texts[-1] if texts else ""
        enter = any(event["event"] == "key_press" and event["key"] == "Return" for event in events)
        return (text[: -len(FENCE)] if text.endswith(FENCE) else text + " (no fence)"), enter

    return Field(prepare, read_until_fence)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_input_conformance_cases_with_russian_active(
    case: Case, input_performer: InputPerformer, qt_field: TargetWindow
) -> None:
    use_layout("us,ru@ru")
    problem = run_case(input_performer, _x11_field(input_performer, qt_field), case)
    assert problem is None, problem


def _gtk_cell(input_performer: InputPerformer, text: str) -> str | None:
    """Type `text` into a GTK entry (zenity), press Enter; zenity prints what the entry held. None when exact."""
    entry = subprocess.Popen(
        ["zenity", "--entry", "--text", "type here"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
    )
    try:
        found = subprocess.run(
            ["xdotool", "search", "--sync", "--onlyvisible", "--pid", str(entry.pid)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        focus(int(found.stdout.split()[-1]))
        try:
            typed = input_performer.execute(TypeText(text, press_enter=True))
        except ActionError as exc:
            return None if str(exc) else "refused without words"
        out, _ = entry.communicate(timeout=15)
        return None if out == text + "\n" else f"got {out!r} ({typed.detail})"
    finally:
        if entry.poll() is None:
            entry.kill()
            entry.wait(timeout=10)


@pytest.mark.parametrize("layout", ["de", "us,ru@ru", "us,fr@fr"])
def test_every_text_arrives_exactly_in_a_gtk_entry(
    layout: str, input_performer: InputPerformer, xvfb: XvfbServer
) -> None:
    if shutil.which("zenity") is None:
        pytest.fail("zenity is not installed (Debian: apt install zenity)", pytrace=False)
    use_layout(layout)
    wrong = {name: cell for name, text in TEXTS.items() if (cell := _gtk_cell(input_performer, text))}
    assert not wrong, "\n".join(f"{layout}: GTK entry / {name}: {what}" for name, what in wrong.items())


def _chromium_field(input_performer: InputPerformer, chromium: ChromiumField) -> Field:
    def prepare(start: str) -> None:
        chromium.focus(FIELD)
        if start:
            input_performer.execute(TypeText(start))
        assert chromium.wait_for_value(FIELD, start) == start, "the Chromium field did not take the start text"

    def read_until_fence() -> tuple[str, bool]:
        text = chromium.wait_for_ending(FIELD, FENCE)  # the fence was typed last: every earlier key is in
        found = text[: -len(FENCE)] if text is not None else chromium.value(FIELD) + " (no fence)"
        return found, chromium.enters() > 0

    return Field(prepare, read_until_fence)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_input_conformance_cases_in_chromium_with_russian_active(
    case: Case, input_performer: InputPerformer, chromium: ChromiumField
) -> None:
    use_layout("us,ru@ru")
    problem = run_case(input_performer, _chromium_field(input_performer, chromium), case)
    assert problem is None, problem
