"""A terminal on Wayland through the portal: a typed text arrives exactly, a paste it does not take fails in words.

bash runs in an xterm through XWayland on the headless GNOME stack and appends every line it accepts
to its history file (PROMPT_COMMAND runs `history -a` before each prompt): what bash received is read
back from disk, byte for byte. xterm does not paste with ctrl+v, and Wayland does not tell the backend
which program has the focus, so a text the layouts cannot type is offered on XWayland's CLIPBOARD,
nobody asks for it, and the step must fail in words saying the paste was not taken (never "pasted"),
with the user's clipboard back (read with xclip on XWayland's display). bash takes that ctrl+v as
quoted-insert (the next key is inserted as it is); the failed step says so, and the second test
checks that what it says holds: a character typed next (the fence, digits every layout types)
arrives unchanged, an Enter sent next is inserted instead of running the line, and a character typed
and deleted ends that state. Layouts: us, and `us,ru` with Russian active (mutter's layouts hand, as
in test_portal_layouts.py), where nothing Latin is typed by keysym and ctrl+v goes on the key that has
v in layout 1.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.rigs.gnome_stack import GnomeStack
from holodesk.automation.actions import Click, KeyCombo, Point, TypeText
from holodesk.automation.clipboard import XCLIP
from holodesk.automation.input.performer import ExecutionResult, InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.session import WaylandSession
from tests.automation.test_typing_layouts import TEXTS
from tests.automation.wayland.test_portal_layouts import use_layout
from tests.support.gnome_session import inside_gnome_session
from tests.support.user_clipboard import serve_user_text
from tests.support.waiting import wait_until
from tests.support.xterm_shell import shell_env, wait_for_prompt

pytestmark = pytest.mark.display

USER_CLIPBOARD = "what the user copied ✓"
# Bash takes each text as a comment: it runs nothing, and the history keeps the line as typed.
TYPED = "# " + TEXTS["shell specials"]
PASTED = "# Grüße, déjà vu — 東京で日本語"
FENCE = "5"  # every layout types digits; bash runs it as a command that is not found
WAIT_S = 30.0
PASTE_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def gnome_stack() -> Iterator[GnomeStack]:
    """This module's own stack: mutter whose layouts the test sets (overrides conftest's)."""
    with inside_gnome_session(layouts_hand=True) as stack:
        yield stack


@pytest.fixture(scope="module")
def backend(session: tuple[WaylandSession, list[str]]) -> PortalInput:
    return PortalInput(session[0], paste_timeout_s=PASTE_TIMEOUT_S)


class ShellHistory:
    """The lines bash accepted, as its history file has them."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[str]:
        """Split on line feeds only: a carriage return bash inserted stays inside its line."""
        text = self.path.read_bytes().decode("utf-8") if self.path.exists() else ""  # read_text would turn \r into \n
        return text.split("\n")[:-1]

    def lines_after(self, count: int, expected: int) -> list[str]:
        """The lines after the first `count`, once there are `expected` of them (bounded)."""
        wait_until(lambda: len(self.lines()) >= count + expected, WAIT_S, f"bash accepting {expected} more line(s)")
        return self.lines()[count:]


@pytest.fixture(scope="module")
def xterm(gnome_stack: GnomeStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShellHistory]:
    """bash in a maximized xterm on XWayland, history expansion off (`!` is a character like any other)."""
    if shutil.which("xterm") is None:
        pytest.fail("xterm is not installed (Debian: apt install xterm)", pytrace=False)
    folder = tmp_path_factory.mktemp("xterm")
    history = folder / "history"
    env = {
        **shell_env(folder),
        "PROMPT_COMMAND": f"history -a; touch {folder / '.prompted'}",
        "HISTFILE": str(history),
        "HISTCONTROL": "",
        "HISTIGNORE": "",
    }
    process = subprocess.Popen(
        ["xterm", "-u8", "-maximized", "-e", "bash", "--norc", "--noprofile", "+H"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_prompt(folder)
        yield ShellHistory(history)
    finally:
        process.terminate()
        process.wait(timeout=10)


def set_user_clipboard() -> None:
    """The user's own clipboard text, served on XWayland by a new xclip known to own it (serve_user_text)."""
    serve_user_text(USER_CLIPBOARD)


@dataclass(frozen=True, slots=True)
class Cell:
    result: ExecutionResult
    received: list[str]  # the lines bash accepted: the text's (typed), or the fence's (after a failed paste)
    clipboard: str | None  # the user's clipboard afterwards


def enter_line(input_performer: InputPerformer, text: str) -> ExecutionResult:
    typed = input_performer.execute(TypeText(text))
    if typed.ok:
        entered = input_performer.execute(KeyCombo(("enter",)))
        assert entered.ok, entered.detail
    return typed


def run_cell(backend: PortalInput, history: ShellHistory, text: str) -> Cell:
    """Focus the terminal, type `text` and Enter; after a failed step, the fence and Enter."""
    input_performer = InputPerformer(backend)
    screen = backend.monitors()[0].rect
    assert input_performer.execute(Click(Point(screen.left + screen.width // 2, screen.top + screen.height // 2))).ok
    set_user_clipboard()
    before = len(history.lines())
    result = enter_line(input_performer, text)
    if not result.ok:
        fence = enter_line(input_performer, FENCE)
        assert fence.ok, fence.detail
    return Cell(result, history.lines_after(before, 1), XCLIP.read_text())


PASTE_NOT_TAKEN = "no program asked for the text within 1 s of the paste key: the paste was not taken"
TERMINAL_STATE = "a terminal takes it as 'insert the next key as it is' (bash's quoted-insert)"
# What ctrl+v is pressed on: by keysym on us; on the key that has v in layout 1 with Russian active.
PASTE_KEY = {"us": "ctrl+v by keysym", "us,ru@ru": "ctrl+v (the key that has v in layout 1)"}
CELLS = [
    ("us", "shell specials", TYPED, "typed"),
    ("us", "accents and CJK", PASTED, "failed"),
    ("us,ru@ru", "shell specials", TYPED, "failed"),  # no Latin letter is typed while Russian is active
    ("us,ru@ru", "accents and CJK", PASTED, "failed"),
]


@pytest.mark.parametrize(
    ("layout", "text", "outcome"),
    [(layout, text, outcome) for layout, _, text, outcome in CELLS],
    ids=[f"{layout}-{name}" for layout, name, _, _ in CELLS],
)
def test_a_typed_text_arrives_exactly_and_a_paste_the_terminal_does_not_take_fails_in_words(
    layout: str,
    text: str,
    outcome: str,
    gnome_stack: GnomeStack,
    backend: PortalInput,
    xterm: ShellHistory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    use_layout(gnome_stack, layout)
    with caplog.at_level(logging.INFO, logger="holodesk.automation.input.portal.backend"):
        cell = run_cell(backend, xterm, text)
    detail = cell.result.detail
    print(layout, outcome, repr(detail))
    if outcome == "typed":
        assert cell.result.ok, detail
        assert "typed by keycode" in caplog.text, caplog.text  # the log's words; the result says it plainly
        assert cell.received == [text]
    else:
        assert not cell.result.ok, f"a paste nobody took passed as done: {detail}"
        assert PASTE_NOT_TAKEN in detail, detail
        assert "pasted" not in detail, detail
        assert f"the paste key ({PASTE_KEY[layout]}) reached the focused program as a plain key" in detail, detail
        assert TERMINAL_STATE in detail, detail
        # The fence typed next arrives unchanged, as the words say: bash holds exactly it, nothing else.
        assert cell.received == [FENCE]
    assert cell.clipboard == USER_CLIPBOARD


@pytest.mark.parametrize("layout", ["us", "us,ru@ru"])
def test_what_the_failed_paste_says_about_the_terminal_holds_in_bash(
    layout: str, gnome_stack: GnomeStack, backend: PortalInput, xterm: ShellHistory
) -> None:
    """Enter sent right after the failed paste is inserted, not acting; a character typed and deleted ends that."""
    use_layout(gnome_stack, layout)
    input_performer = InputPerformer(backend)
    before = len(xterm.lines())
    for first, recovery, last in (("12", (), "34"), ("56", ("0", "backspace"), "")):
        assert input_performer.execute(TypeText(first)).ok
        failed = input_performer.execute(TypeText(PASTED))
        assert not failed.ok and TERMINAL_STATE in failed.detail, failed.detail
        for key in recovery:
            sent = input_performer.execute(TypeText(key) if len(key) == 1 else KeyCombo((key,)))
            assert sent.ok, sent.detail
        assert input_performer.execute(KeyCombo(("enter",))).ok
        if last:
            assert enter_line(input_performer, last).ok
    # The first Enter became a carriage return inside the line; after the recovery Enter ran the line.
    assert xterm.lines_after(before, 2) == ["12\r34", "56"]
