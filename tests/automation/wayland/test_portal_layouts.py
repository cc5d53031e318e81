"""The typing matrix through the portal on headless GNOME, on every keyboard layout, read back.

Mutter runs with a hand on its layouts (bench/rigs/mutter_keyboard.py: the two calls gnome-shell
makes when the user picks an input source). Each layout (us, de, fr, ru, and `us,ru` / `us,fr` with
the second one active, as Russian and French users have them) gets every text of the X11 matrix
(tests/automation/test_typing_layouts.py) in three programs: two native Wayland ones, a Qt QLineEdit
(tests/support/wayland_target.py) and a GTK 3 entry (tests/support/gtk_target.py), each logging
its text after every change (neither takes a line break, so the newline text is not theirs), and
Chromium through XWayland (tests/support/chromium_field.py), whose text area, read from the DOM,
also gets the newline text. A cell
passes when the program holds exactly the text, or when the input performer refused the action in words
before anything was sent (the field then holds only the fence). The clipboard works in this stack,
so a refusal is expected only where no layout has v and ctrl+v cannot be pressed (ru alone); with
`us,ru` the text goes through the clipboard and ctrl+v is pressed on the key that has v in layout 1
(by keycode: the active Russian layout has no v keysym for mutter to find).

A fence ends each cell's input: one character every layout types, after which the field must hold
exactly the expected text and the fence (a bounded wait for that text, never a prefix match). The
test's own hand (mutter's RemoteDesktop, not Holodesk) first shows which layout is active: with two
layouts, a character only the second one has types only while it is.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pytest

from bench.rigs.gnome_stack import GnomeStack
from bench.rigs.mutter_remote import MutterRemote
from holodesk.automation.actions import Click, KeyCombo, Point, TypeText
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.keymap import compositor_keymap
from holodesk.automation.wayland.session import WaylandSession
from tests.automation.test_typing_layouts import NEWLINE_TEXT, TEXTS
from tests.automation.wayland.conftest import WaylandTarget
from tests.support.chromium_field import AREA, ChromiumField
from tests.support.gnome_session import inside_gnome_session
from tests.support.line_process import LineProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.display


@dataclass(frozen=True, slots=True)
class Layout:
    layouts: str  # as mutter is given them
    group: int  # the active one, from 0
    names: tuple[str, ...]  # the layout names the compositor's keymap then has
    witness: str = ""  # a character only the active layout has (two layouts only)


LAYOUTS = {
    "us": Layout("us", 0, ("English (US)",)),
    "de": Layout("de", 0, ("German",)),
    "fr": Layout("fr", 0, ("French",)),
    "ru": Layout("ru", 0, ("Russian",)),
    "us,ru@ru": Layout("us,ru", 1, ("English (US)", "Russian"), witness="й"),
    "us,fr@fr": Layout("us,fr", 1, ("English (US)", "French"), witness="é"),
}
WITNESS_KEYSYMS = {"й": 0x6CA, "é": 0xE9}
# Typed by every layout (on fr with Shift); the wait is for the whole expected text, so it may occur in texts.
FENCE = "5"
FENCE_KEYSYM = 0x35
# Where a refusal is right: ru alone has no key with v, so nothing it lacks can be pasted.
MAY_REFUSE = {"ru": "the key 'v' is not on the desktop's keyboard layout (Russian)"}
READ_BACK_S = 30.0
KEYS_UP_S = 10.0
CHROMIUM_ORIGIN = (60, 60)


@pytest.fixture(scope="module")
def gnome_stack() -> Iterator[GnomeStack]:
    """This module's own stack: mutter whose layouts the test sets (overrides conftest's)."""
    # MUTTER_DEBUG=input: mutter logs each virtual key it drops as repeated (the failure report quotes it).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MUTTER_DEBUG", "input")
        with inside_gnome_session(layouts_hand=True) as stack:
            yield stack


@pytest.fixture(scope="module")
def input_performer(session: tuple[WaylandSession, list[str]]) -> InputPerformer:
    return InputPerformer(PortalInput(session[0]))


def use_layout(stack: GnomeStack, name: str) -> None:
    layout = LAYOUTS[name]
    stack.set_keymap(layout.layouts, layout.group)
    deadline = time.monotonic() + 10
    while (found := compositor_keymap().layout_names) != layout.names:
        assert time.monotonic() < deadline, f"the compositor's keymap has {found}, not {layout.names}"
        time.sleep(0.05)


class LoggedField:
    """A program's text field that logs its text as JSON lines and empties itself on "clear"."""

    def __init__(self, process: LineProcess, name: str) -> None:
        self.process = process
        self.name = name
        self.text = ""
        self.keys: list[tuple[str, bool]] = []  # the key presses it reported since the last clear
        self.held: set[int] = set()  # the keys it saw go down and not yet up, by code

    def next_record(self, event: str, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            line = self.process.next(remaining)
            if line is None:
                break
            record = json.loads(line)
            if record["event"] == "text":
                self.text = record["text"]
            elif record["event"] == "key":
                self.keys.append((str(record["text"]), bool(record["shift"])))
                self.held.add(int(record["code"]))
            elif record["event"] == "key_up":
                self.held.discard(int(record["code"]))
            if record["event"] == event:
                return dict(record)
        return None

    def keys_seen(self) -> list[tuple[str, bool]]:
        return list(self.keys)

    def clear(self) -> None:
        """Empty the field by the program's own hand (no key is sent); every earlier record is read then."""
        self.process.send("clear")
        assert self.next_record("cleared", READ_BACK_S) is not None, f"the {self.name} did not clear its field"
        self.text = ""
        self.keys = []

    def keys_still_down(self, timeout_s: float = KEYS_UP_S) -> list[str]:
        """The keys the program saw go down and not up within `timeout_s` (none once all are up)."""
        deadline = time.monotonic() + timeout_s
        while self.held and (remaining := deadline - time.monotonic()) > 0:
            self.next_record("key_up", remaining)
        return [str(code) for code in sorted(self.held)]

    def wait_for_text(self, expected: str, timeout_s: float = READ_BACK_S) -> str:
        """The field's text once it is `expected`, or what it holds when `timeout_s` ran out."""
        deadline = time.monotonic() + timeout_s
        while self.text != expected and (remaining := deadline - time.monotonic()) > 0:
            self.next_record("text", remaining)
        return self.text


@dataclass(frozen=True, slots=True)
class Cell:
    outcome: str  # typed, pasted, refused or failed
    detail: str  # the step's result, or the refusal
    problem: str | None  # None when the cell passed


def run_cell(input_performer: InputPerformer, field: LoggedField, text: str) -> Cell:
    """Type `text` into the emptied field, then the fence; read back what the program holds."""
    field.clear()
    return typed_cell(input_performer, text, field, "the field")


class Receiver(Protocol):
    """A program's text and key log, as a cell reads them back."""

    def wait_for_text(self, expected: str, timeout_s: float = READ_BACK_S) -> str:
        """The text once it is `expected`, or what it holds when `timeout_s` ran out."""

    def keys_seen(self) -> list[tuple[str, bool]]:
        """The key presses it was given in this cell: the character, and whether Shift was down."""

    def keys_still_down(self, timeout_s: float = KEYS_UP_S) -> list[str]:
        """The keys it saw go down and not up within `timeout_s`."""


def typed_cell(input_performer: InputPerformer, text: str, receiver: Receiver, place: str) -> Cell:
    """Type `text` (or see it refused), then the fence; read back what `receiver` got. The cell ends
    once the program saw every key come up: mutter looks a keysym up again on its release, so a layout
    change before then (the next cell's) would leave its Shift counted as held."""
    refusal: str | None = None
    try:
        input_performer.validate(TypeText(text))
    except ActionError as exc:
        refusal = str(exc)
    detail = refusal or ""
    if refusal is None:
        typed = input_performer.execute(TypeText(text))
        if not typed.ok:
            return Cell("failed", typed.detail, f"failed: {typed.detail}")
        detail = typed.detail
    assert input_performer.execute(TypeText(FENCE)).ok
    expected = (text if refusal is None else "") + FENCE
    got = receiver.wait_for_text(expected)
    still_down = receiver.keys_still_down()
    if still_down:
        return Cell("failed", detail, f"keys still down {KEYS_UP_S:g} s after the text arrived: {still_down}")
    if refusal is not None:
        problem = None if refusal and got == expected else f"refused ({refusal!r}) but {place} got {got!r}"
        return Cell("refused", refusal, problem)
    outcome = "pasted" if "pasted through the clipboard" in detail else "typed"
    if got == expected:
        return Cell(outcome, detail, None)
    seen = keys_words(receiver.keys_seen())
    return Cell(outcome, detail, f"got {got[: -len(FENCE)]!r} ({detail}); key presses seen: {seen}")


def keys_words(keys: list[tuple[str, bool]], most: int = 40) -> str:
    """The key presses a program reported, "⇧" marking those it was told Shift was down for."""
    shown = " ".join(("⇧" if shift else "") + repr(key)[1:-1] for key, shift in keys[:most])
    shifted = sum(shift for _, shift in keys)
    return shown + (" ..." if len(keys) > most else "") + f" ({len(keys)} in all, {shifted} with Shift down)"


def cells_in_order(texts: dict[str, str], run: Callable[[str], Cell]) -> dict[str, Cell]:
    """Each text's cell, in order, up to the first that left keys down: the rest would be typed with
    them held (a held ctrl turns letters into the program's shortcuts) and say nothing of their own."""
    cells: dict[str, Cell] = {}
    for name, text in texts.items():
        cells[name] = run(text)
        if (cells[name].problem or "").startswith("keys still down"):
            break
    return cells


def check_matrix(
    stack: GnomeStack, layout: str, program: str, input_performer: InputPerformer, field: LoggedField
) -> None:
    judge(stack, layout, program, cells_in_order(TEXTS, lambda text: run_cell(input_performer, field, text)))


# Mutter's own words when a virtual key goes astray (its warnings, and MUTTER_DEBUG=input's topic).
MUTTER_KEY_TROUBLE = ("Dropping repeated", "Received multiple", "No keycode found", "Unhandled level", "unexpected key")


def desktop_key_report(stack: GnomeStack) -> str:
    """What mutter logged about dropped keys, and the X modifier map XWayland's clients see."""
    log = (stack.logs / "mutter.log").read_text(errors="replace").splitlines()
    trouble = [line for line in log if any(words in line for words in MUTTER_KEY_TROUBLE)]
    emitted = sum("Emitting virtual key" in line for line in log)
    modmap = subprocess.run(["xmodmap", "-pm"], capture_output=True, text=True, timeout=10, check=False)
    dropped = "".join(f"\n  {line}" for line in trouble[-12:])
    modifiers = (modmap.stdout or modmap.stderr).strip()
    return (
        f"\nmutter logged {emitted} virtual key events and {len(trouble)} dropped or unplaced keys{dropped}"
        f"\nXWayland's modifier map:\n{modifiers}"
    )


def judge(stack: GnomeStack, layout: str, program: str, cells: dict[str, Cell]) -> None:
    """Every cell exact or refused in words; refused only where MAY_REFUSE allows; ctrl+v's key named."""
    print(layout, program, {name: cell.outcome for name, cell in cells.items()})
    wrong = {name: cell.problem for name, cell in cells.items() if cell.problem}
    for name, cell in cells.items():
        if cell.outcome == "refused" and MAY_REFUSE.get(layout, "\0") not in cell.detail:
            wrong[name] = f"refused, where it can be done: {cell.detail}"
        if (
            cell.outcome == "pasted"
            and layout == "us,ru@ru"
            and "ctrl+v (the key that has v in layout 1)" not in cell.detail
        ):
            wrong[name] = f"pasted without naming the key ctrl+v went on: {cell.detail}"
    if wrong:
        report = "\n".join(f"{layout}: {program} / {name}: {what}" for name, what in wrong.items())
        pytest.fail(report + desktop_key_report(stack), pytrace=False)


def check_active_layout(layout: str, hand: MutterRemote, field: LoggedField) -> None:
    """The test's own hand types the witness: it arrives only when the expected layout is the active one."""
    witness = LAYOUTS[layout].witness
    if not witness:
        return
    field.clear()
    hand.key(WITNESS_KEYSYMS[witness])
    hand.key(FENCE_KEYSYM)
    got = field.wait_for_text(witness + FENCE, 10.0)
    assert got == witness + FENCE, f"{layout}: the active layout is not the expected one ({got!r})"
    assert not field.keys_still_down(), f"{layout}: the hand's keys did not come up"


@pytest.fixture(scope="module")
def qt_field(wayland_target: WaylandTarget) -> LoggedField:
    return LoggedField(wayland_target.process, "Qt field")


def focus_qt_field(input_performer: InputPerformer, target: WaylandTarget) -> None:
    left, top, width, height = target.ready["layout"]["field"]
    assert input_performer.execute(Click(Point(left + width // 2, top + height // 2))).ok


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_text_arrives_exactly_in_a_native_qt_field_or_is_refused_in_words(
    layout: str,
    gnome_stack: GnomeStack,
    input_performer: InputPerformer,
    mutter_remote: MutterRemote,
    wayland_target: WaylandTarget,
    qt_field: LoggedField,
) -> None:
    use_layout(gnome_stack, layout)
    focus_qt_field(input_performer, wayland_target)
    check_active_layout(layout, mutter_remote, qt_field)
    check_matrix(gnome_stack, layout, "Qt field", input_performer, qt_field)


@pytest.fixture
def gtk_entry(gnome_stack: GnomeStack, input_performer: InputPerformer) -> Iterator[LoggedField]:
    """A GTK 3 entry on Wayland, full screen over the Qt window while the test runs, with the keyboard focus."""
    env = gnome_stack.env()
    env["GDK_BACKEND"] = "wayland"
    process = LineProcess("tests.support.gtk_target", env=env)
    try:
        field = LoggedField(process, "GTK entry")
        shown = field.next_record("shown", READ_BACK_S)
        assert shown is not None, "the GTK entry did not show"
        assert shown["display"] == "GdkWaylandDisplay", shown
        if field.next_record("focused", 5.0) is None:  # mutter gives a new window the focus; else a click does
            left, top, width, height = shown["entry"]
            assert input_performer.execute(Click(Point(left + width // 2, top + height // 2))).ok
            assert field.next_record("focused", READ_BACK_S) is not None, "the GTK entry did not get the focus"
        yield field
    finally:
        process.close()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_text_arrives_exactly_in_a_native_gtk_entry_or_is_refused_in_words(
    layout: str,
    gnome_stack: GnomeStack,
    input_performer: InputPerformer,
    mutter_remote: MutterRemote,
    gtk_entry: LoggedField,
) -> None:
    use_layout(gnome_stack, layout)
    check_active_layout(layout, mutter_remote, gtk_entry)
    check_matrix(gnome_stack, layout, "GTK entry", input_performer, gtk_entry)


def check_select_all_with_russian_active(
    input_performer: InputPerformer, field: LoggedField, caplog: pytest.LogCaptureFixture
) -> None:
    """ctrl+a on the key that has a in layout 1 selects the field's text: the next character replaces it."""
    field.clear()
    assert input_performer.execute(TypeText("old")).ok  # pasted: ctrl+v by keycode too
    assert field.wait_for_text("old") == "old"
    with caplog.at_level(logging.INFO, logger="holodesk.automation.input.portal.backend"):
        selected = input_performer.execute(KeyCombo(("ctrl", "a")))
    assert selected.ok, selected.detail
    assert selected.detail == "press ctrl+a", selected.detail  # how the key went is the log's
    assert caplog.records[-1].getMessage() == "sent ctrl+a (the key that has a in layout 1)", caplog.text
    assert input_performer.execute(TypeText(FENCE)).ok
    assert field.wait_for_text(FENCE) == FENCE, f"{field.name}: ctrl+a did not select the text"


def test_a_shortcut_letter_the_active_layout_lacks_reaches_qt_on_its_key(
    gnome_stack: GnomeStack,
    input_performer: InputPerformer,
    wayland_target: WaylandTarget,
    qt_field: LoggedField,
    caplog: pytest.LogCaptureFixture,
) -> None:
    use_layout(gnome_stack, "us,ru@ru")
    focus_qt_field(input_performer, wayland_target)
    check_select_all_with_russian_active(input_performer, qt_field, caplog)


def test_a_shortcut_letter_the_active_layout_lacks_reaches_gtk_on_its_key(
    gnome_stack: GnomeStack, input_performer: InputPerformer, gtk_entry: LoggedField, caplog: pytest.LogCaptureFixture
) -> None:
    use_layout(gnome_stack, "us,ru@ru")
    check_select_all_with_russian_active(input_performer, gtk_entry, caplog)


def test_a_letter_key_alone_the_active_layout_lacks_is_refused_not_pressed_on_its_key(
    gnome_stack: GnomeStack, input_performer: InputPerformer
) -> None:
    """Without ctrl, alt or super the key would type the active layout's letter (й for q): refused in words."""
    use_layout(gnome_stack, "us,ru@ru")
    with pytest.raises(ActionError, match=r"the key 'q' is not on the desktop's keyboard layout \(Russian\)"):
        input_performer.validate(KeyCombo(("q",)))


@pytest.fixture
def chromium(gnome_stack: GnomeStack) -> Iterator[ChromiumField]:
    """Chromium through XWayland (an X client of mutter's XWayland), new for each test so mutter focuses it."""
    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        pytest.fail("Chromium is not installed (Debian: apt install chromium chromium-driver)", pytrace=False)
    window = ChromiumField(CHROMIUM_ORIGIN)
    try:
        yield window
    finally:
        window.close()


def chromium_cell(input_performer: InputPerformer, chromium: ChromiumField, text: str) -> Cell:
    """Type `text` into the emptied text area (a line break is Enter), then the fence; read its DOM value."""
    chromium.focus(AREA)
    wait_for_mutters_focus(chromium.window_id)
    return typed_cell(input_performer, text, ChromiumArea(chromium), "the text area")


def wait_for_mutters_focus(window_id: int, timeout_s: float = 30.0) -> None:
    """Until mutter's own focus (the _NET_ACTIVE_WINDOW it sets) is the X window `window_id`.

    xdotool gives the window XWayland's X focus; where the portal's keys go is mutter's keyboard
    focus, which follows once mutter handled that change. A first key sent sooner reached no text area
    (seen once: a new Chromium window, a refused cell, and its fence never arrived).
    """
    try:
        wait_until(lambda: active_window() == str(window_id), timeout_s, f"mutter focusing Chromium's {window_id}")
    except AssertionError as exc:
        raise AssertionError(f"{exc} (its active window: {active_window()})") from None


def active_window() -> str:
    """The X window mutter calls active (xdotool's words when it cannot say)."""
    found = subprocess.run(["xdotool", "getactivewindow"], capture_output=True, text=True, timeout=10, check=False)
    return found.stdout.strip() or found.stderr.strip()


@dataclass(frozen=True, slots=True)
class ChromiumArea:
    """The page's text area as a Receiver."""

    chromium: ChromiumField

    def wait_for_text(self, expected: str, timeout_s: float = READ_BACK_S) -> str:
        return self.chromium.wait_for_value(AREA, expected, timeout_s)

    def keys_seen(self) -> list[tuple[str, bool]]:
        return self.chromium.keys()

    def keys_still_down(self, timeout_s: float = KEYS_UP_S) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while (held := self.chromium.held()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return held


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_text_arrives_exactly_in_chromium_through_xwayland_or_is_refused_in_words(
    layout: str, gnome_stack: GnomeStack, input_performer: InputPerformer, chromium: ChromiumField
) -> None:
    use_layout(gnome_stack, layout)
    texts = {**TEXTS, "newline": NEWLINE_TEXT}
    cells = cells_in_order(texts, lambda text: chromium_cell(input_performer, chromium, text))
    judge(gnome_stack, layout, "Chromium text area", cells)


def test_a_capital_goes_on_shift_and_its_key_by_keycode_so_no_layout_change_can_strand_shift(
    gnome_stack: GnomeStack,
    input_performer: InputPerformer,
    wayland_target: WaylandTarget,
    qt_field: LoggedField,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Mutter's log (MUTTER_DEBUG=input): Shift then A, each by keycode and released by it; a keysym,
    looked up again on its release, would leave Shift counted as held after a layout change."""
    use_layout(gnome_stack, "us")
    focus_qt_field(input_performer, wayland_target)
    qt_field.clear()
    log = gnome_stack.logs / "mutter.log"
    start = len(log.read_bytes())
    with caplog.at_level(logging.INFO, logger="holodesk.automation.input.portal.backend"):
        typed = input_performer.execute(TypeText("A"))
    assert typed.ok and caplog.records[-1].getMessage() == "typed by keycode", (typed.detail, caplog.text)
    assert qt_field.wait_for_text("A") == "A"
    assert not qt_field.keys_still_down()
    lines = log.read_bytes()[start:].decode(errors="replace").splitlines()
    # evdev KEY_LEFTSHIFT is 0x2a, KEY_A 0x1e; a key sent by keycode is logged without a level.
    order = [
        line.split("INPUT: ")[-1].split(" (device")[0]
        for line in lines
        if "Emitting virtual key-" in line and (" 0x2a" in line or " 0x1e" in line)
    ]
    assert order == [
        "Emitting virtual key-press of key 0x2a",
        "Emitting virtual key-press of key 0x1e",
        "Emitting virtual key-release of key 0x1e",
        "Emitting virtual key-release of key 0x2a",
    ], "\n".join(lines[-20:])
