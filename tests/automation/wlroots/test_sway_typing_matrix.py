"""The typing matrix on headless sway: every text of the X11 matrix into four native Wayland programs, read back.

Holodesk's wlroots backend (WtypeKeyboard through the InputPerformer, as an approved step) types
each text of tests/automation/test_typing_layouts.py into:
- a Qt QLineEdit (tests/support/wayland_target.py, QT_QPA_PLATFORM=wayland) and a GTK 3 entry
  (tests/support/gtk_target.py, GDK_BACKEND=wayland), each logging its whole text after every change
  (neither takes a line break, so not the newline text);
- foot, the Wayland-native terminal (kitty and alacritty need GL, which a pixman sway does not
  offer), running `cat > received.txt`: the file is what the terminal sent its program, newline
  text included;
- Chromium on Wayland (`--ozone-platform=wayland`, as it runs on a Wayland desktop by default; the
  stack has no XWayland), its text area read from the DOM, newline text included.
Each program has a workspace of its own (the test's hand switches to it, as a user would).

A cell passes when the program holds exactly the text and a fence typed after it (a bounded wait for
that exact text, never a prefix), or when the backend refused the text in words before sending
anything (then only the fence arrives); the one refusal allowed is a character beyond U+FFFF.

Layouts: wtype sends a keymap of the text's own keysyms, so sway's configured layout reaches the
programs only if sway put it on wtype's keyboard (test_wtype_layouts.py guards that in Qt). The
cases here are `us` and `us,ru` with two groups, where a program that kept the configured keymap's
second group or read keys by position would differ; de, fr and ru alone run in test_wtype_layouts.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from bench.rigs.sway_stack import StackError, SwayStack
from holodesk.automation.actions import KeyCombo, TypeText
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.wlroots.keyboard import BEYOND_BMP_WORDS, WtypeKeyboard
from tests.automation.test_typing_layouts import NEWLINE_TEXT, TEXTS
from tests.automation.wayland.test_portal_layouts import LoggedField
from tests.automation.wlroots.conftest import SwayTarget
from tests.support.chromium_field import AREA, ChromiumField
from tests.support.line_process import LineProcess
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.display, pytest.mark.wlroots, pytest.mark.chromium]

FENCE = "5"
READ_BACK_S = 30.0
START_S = 30.0


@dataclass
class Program:
    """One program of the matrix: how to empty it, and what it holds now."""

    name: str
    workspace: str
    takes_newline: bool
    reset: Callable[[], None]
    held: Callable[[], str]  # what arrived since the last reset


@dataclass
class Desk:
    stack: SwayStack
    performer: InputPerformer
    programs: dict[str, Program]


def show(stack: SwayStack, workspace: str) -> None:
    """Switch sway to `workspace`: its only window takes the whole output and the keyboard focus."""
    stack.swaymsg("command", f"workspace {workspace}")


def windows_on(stack: SwayStack, workspace: str) -> int:
    """How many windows sway shows on `workspace`."""
    tree = stack.swaymsg("get_tree")
    assert isinstance(tree, dict)

    def views(node: dict[str, object]) -> int:
        children = [c for c in [*node.get("nodes", []), *node.get("floating_nodes", [])] if isinstance(c, dict)]  # type: ignore[misc]
        return (1 if node.get("pid") else 0) + sum(views(child) for child in children)

    for output in tree.get("nodes", []):
        for space in output.get("nodes", []):
            if space.get("type") == "workspace" and space.get("name") == workspace:
                return views(space)
    return 0


def start_foot(stack: SwayStack, stop: list[Callable[[], None]], workspace: str) -> Program:
    folder = stack.root / "foot"
    folder.mkdir()
    received = folder / "received.txt"
    env = {**stack.env(), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    log = (folder / "foot.log").open("wb")
    process = subprocess.Popen(
        ["foot", "--working-directory", str(folder), "sh", "-c", f"exec cat > {received.name}"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def end() -> None:
        process.terminate()
        process.wait(timeout=10)
        log.close()

    stop.append(end)
    wait_until(received.exists, START_S, "the program in foot starting")
    since = [0]

    def reset() -> None:
        since[0] = len(received.read_text(encoding="utf-8", errors="replace"))

    return Program(
        "foot", workspace, True, reset, lambda: received.read_text(encoding="utf-8", errors="replace")[since[0] :]
    )


def start_gtk(stack: SwayStack, stop: list[Callable[[], None]], workspace: str) -> Program:
    env = {**stack.env(), "GDK_BACKEND": "wayland", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    process = LineProcess("tests.support.gtk_target", env=env)
    stop.append(process.close)
    field = LoggedField(process, "GTK entry")
    shown = field.next_record("shown", START_S)
    assert shown is not None, "the GTK entry did not show"
    assert shown["display"] == "GdkWaylandDisplay", shown
    return Program("GTK entry", workspace, False, field.clear, lambda: _drained(field))


def start_qt(stack: SwayStack, stop: list[Callable[[], None]], workspace: str) -> Program:
    target = SwayTarget(stack)
    stop.append(target.close)
    field = LoggedField(target.process, "Qt field")
    return Program("Qt field", workspace, False, field.clear, lambda: _drained(field))


def start_chromium(stack: SwayStack, stop: list[Callable[[], None]], workspace: str) -> Program:
    with pytest.MonkeyPatch.context() as patch:  # ChromiumField starts chromedriver with this process's environment
        for key in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR"):
            patch.delenv(key, raising=False)
        for key in ("WAYLAND_DISPLAY", "XDG_RUNTIME_DIR"):
            patch.setenv(key, stack.env()[key])
        page = ChromiumField((0, 0), ozone_platform="wayland")
    stop.append(page.close)

    def reset() -> None:
        page.focus(AREA)

    return Program("Chromium", workspace, True, reset, lambda: page.value(AREA))


def _drained(field: LoggedField) -> str:
    """The field's text after every record it logged so far was read (a short wait for more)."""
    field.next_record("\0", 0.05)
    return field.text


def cell(desk: Desk, program: Program, text: str) -> str | None:
    """Type `text` (or see it refused), then the fence; None when the program holds what it must."""
    show(desk.stack, program.workspace)
    program.reset()
    try:
        desk.performer.validate(TypeText(text))
        refusal = None
    except ActionError as exc:
        refusal = str(exc)
    if refusal is None:
        typed = desk.performer.execute(TypeText(text))
        if not typed.ok:
            return f"failed: {typed.detail}"
    elif BEYOND_BMP_WORDS not in refusal:
        return f"refused, where it can be done: {refusal}"
    assert desk.performer.execute(TypeText(FENCE, press_enter=program.takes_newline)).ok
    expected = ("" if refusal else text) + FENCE + ("\n" if program.takes_newline else "")
    deadline = time.monotonic() + READ_BACK_S
    while (got := program.held()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    if got == expected:
        return None
    return f"{'refused (' + refusal + ') but' if refusal else 'typed, but'} it holds {got!r}, not {expected!r}"


@pytest.fixture(params=["us", "us,ru"], scope="module")
def desk(request: pytest.FixtureRequest) -> Iterator[Desk]:
    stack = SwayStack(keyboard_layout=request.param)
    stop: list[Callable[[], None]] = []
    try:
        stack.start()
    except StackError as exc:
        pytest.fail(f"the headless sway stack did not start: {exc}", pytrace=False)
    backend = WtypeKeyboard(environ=stack.env())
    performer = InputPerformer(backend)
    try:
        # The seat has no keyboard until the backend's: Chromium's page has the focus only once the seat has one.
        backend.seat_keyboard.open()
        if "," in request.param:
            stack.swaymsg("command", "input type:keyboard xkb_switch_layout 1")  # Russian active, as its users have it
        programs = {}
        for number, start in enumerate((start_gtk, start_foot, start_chromium, start_qt), 1):
            show(stack, str(number))  # each program maps on an empty workspace of its own
            program = start(stack, stop, str(number))
            space = program.workspace
            wait_until(lambda: windows_on(stack, space) == 1, START_S, f"{program.name}'s window")  # noqa: B023
            programs[program.name] = program
        yield Desk(stack, performer, programs)
    finally:
        performer.close()
        for end in reversed(stop):
            end()
        stack.stop()


@pytest.mark.parametrize("program", ["Qt field", "GTK entry", "foot", "Chromium"])
def test_every_text_arrives_exactly_or_is_refused_in_words(desk: Desk, program: str) -> None:
    chosen = desk.programs[program]
    texts = {**TEXTS, **({"newline": NEWLINE_TEXT} if chosen.takes_newline else {})}
    wrong = {name: problem for name, text in texts.items() if (problem := cell(desk, chosen, text))}
    assert wrong == {}, f"{desk.stack.keyboard_layout}: {program}: " + "; ".join(f"{n}: {p}" for n, p in wrong.items())


# GTK 3 on sway takes ctrl+a from wtype's keyboard as ctrl held with 'a' (no 'a' is typed) but does not
# select: the step reports done and the next text lands after the old one ('old text5'). Seen whether
# the text before came from Holodesk's keyboard or wtype's, with 'a' on the same key in both keymaps,
# and with ctrl held 100 ms around it; not diagnosed further (GTK's own bindings are its own).
GTK_SELECT_ALL = "GTK 3 on sway does not act on ctrl+a from wtype's keyboard (see the note above)"


@pytest.mark.parametrize(
    "program",
    ["Qt field", pytest.param("GTK entry", marks=pytest.mark.xfail(strict=True, reason=GTK_SELECT_ALL)), "Chromium"],
)
def test_select_all_then_typing_replaces_the_text(desk: Desk, program: str) -> None:
    """ctrl+a (through wtype, whose keyboard numbers its keys itself) selects all; the fence replaces it."""
    chosen = desk.programs[program]
    show(desk.stack, chosen.workspace)
    chosen.reset()
    assert desk.performer.execute(TypeText("old text")).ok
    assert desk.performer.execute(KeyCombo(("ctrl", "a"))).ok
    assert desk.performer.execute(TypeText(FENCE, press_enter=chosen.takes_newline)).ok
    expected = FENCE + ("\n" if chosen.takes_newline else "")
    deadline = time.monotonic() + (5.0 if program == "GTK entry" else READ_BACK_S)  # the known failure: no long wait
    while (got := chosen.held()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got == expected, f"{desk.stack.keyboard_layout}: {program} holds {got!r}, not {expected!r}"
