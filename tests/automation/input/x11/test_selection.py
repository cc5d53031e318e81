"""Holodesk's own X selection owner: real programs paste exactly the offered text, and the user's comes back after.

Three targets on Xvfb: bash in an xterm (shift+insert pastes PRIMARY; `cat > file` receives the text
and the file is compared), a Qt QLineEdit (ctrl+v pastes CLIPBOARD; read back from its own log),
and tests/support/gated_paste_target.py, a window that asks for the selection only when the test
tells it to: a deterministically slow target, one that never asks, and one during whose paste
another program takes the selections over. The user's previous texts are read back with xclip, a
reader independent of the module.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.rigs.target_client import TargetWindow
from holodesk.automation.actions import TypeText
from holodesk.automation.clipboard import XCLIP, XCLIP_PRIMARY
from holodesk.automation.input.performer import ExecutionResult, InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.selection import (
    PreviousContent,
    SelectionError,
    SelectionOffer,
    offer,
    paste_with_own_selection,
    program_words,
    restore_previous,
)
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import XvfbServer
from tests.support.line_process import LineProcess
from tests.support.user_clipboard import selection_owner, serve_user_text
from tests.support.waiting import wait_until
from tests.support.xterm_shell import shell_env, wait_for_prompt

pytestmark = pytest.mark.display

XTERM_ORIGIN = (40, 40)
QT_ORIGIN = (900, 420)
GATED_ORIGIN = (100, 700)
# Generous: only a failure waits this long.
WAIT_S = 60.0

TEXTS = {
    "ascii": "plain ASCII: a/b > c | 'd' $HOME ~ [1]",
    "cyrillic": "Съешь же ещё этих мягких французских булок",
    "cjk": "東京で日本語を入力する",
    "emoji": "ok 👍 done ✓ 🙂",
    "long line": ("The quick brown fox jumps over the lazy dog 0123456789; " * 11)[:600],
}
USER_CLIPBOARD = "what the user copied ✓"
USER_PRIMARY = "what the user selected ✓"


def xdotool(*args: str) -> str:
    return subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=20, check=True).stdout


def set_user_selections() -> None:
    """The user's own CLIPBOARD and PRIMARY texts, each served by a new xclip known to own it (serve_user_text)."""
    serve_user_text(USER_CLIPBOARD)
    serve_user_text(USER_PRIMARY, "PRIMARY")


def assert_user_selections_back() -> None:
    assert (XCLIP.read_text(), XCLIP_PRIMARY.read_text()) == (USER_CLIPBOARD, USER_PRIMARY)


def no_thread_named(name: str) -> bool:
    return not any(thread.name == name for thread in threading.enumerate())


def no_serving_thread() -> bool:
    return no_thread_named("holodesk-selection")


@pytest.fixture(scope="module")
def xterm(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """bash in an xterm (folder, window id); bash's bracketed paste off, so a paste is the bare text."""
    if shutil.which("xterm") is None:
        pytest.fail("xterm is not installed (Debian: apt install xterm)", pytrace=False)
    folder = tmp_path_factory.mktemp("xterm")
    (folder / "inputrc").write_text("set enable-bracketed-paste off\n")
    env = {**shell_env(folder), "INPUTRC": str(folder / "inputrc")}
    process = subprocess.Popen(
        ["xterm", "-u8", "-geometry", f"100x20+{XTERM_ORIGIN[0]}+{XTERM_ORIGIN[1]}", "-e", "bash", "--norc"],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        window = int(xdotool("search", "--sync", "--onlyvisible", "--pid", str(process.pid)).split()[0])
        wait_for_prompt(folder)
        yield folder, window
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


@pytest.fixture
def gated(xvfb: XvfbServer) -> Iterator[tuple[LineProcess, int]]:
    """The gated paste target (its process, its window id), focused."""
    target = LineProcess("tests.support.gated_paste_target", *map(str, GATED_ORIGIN))
    try:
        ready = target.next(WAIT_S)
        assert ready is not None and ready.startswith("ready "), ready
        window = int(ready.split()[1])
        xdotool("windowfocus", "--sync", str(window))
        yield target, window
    finally:
        target.close()


def _start_cat(folder: Path, window: int, name: str) -> Path:
    """Run `cat > name` in the xterm; return the file once the shell opened it."""
    xdotool("windowfocus", "--sync", str(window))
    xdotool("type", "--delay", "0", f"cat > {name}")
    xdotool("key", "Return")
    out = folder / name
    wait_until(out.exists, WAIT_S, f"the shell opening {name}")
    return out


def _end_cat(out: Path, expected: str) -> str:
    xdotool("key", "Return", "ctrl+d")
    wait_until(lambda: out.read_text(encoding="utf-8", errors="replace") == expected, WAIT_S, f"{out.name} written")
    return out.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", list(TEXTS))
def test_xterm_pastes_exactly_the_offered_text_and_the_users_texts_come_back(
    name: str, xterm: tuple[Path, int]
) -> None:
    folder, window = xterm
    text = TEXTS[name]
    set_user_selections()
    out = _start_cat(folder, window, f"{name.replace(' ', '-')}.txt")
    note = paste_with_own_selection(text, lambda: xdotool("key", "shift+Insert"))
    assert _end_cat(out, text + "\n") == text + "\n"
    assert note.startswith("taken from PRIMARY by window 0x"), note
    assert_user_selections_back()
    assert no_serving_thread()


@pytest.mark.parametrize("name", list(TEXTS))
def test_a_qt_field_pastes_exactly_the_offered_text_and_the_users_texts_come_back(
    name: str, qt_field: TargetWindow
) -> None:
    text = TEXTS[name]
    set_user_selections()
    xdotool("windowfocus", "--sync", str(qt_field.ready["window_id"]))
    qt_field.reset()
    field = qt_field.centre("field")
    xdotool("mousemove", str(field.x), str(field.y), "click", "1")  # --sync would wait for no motion
    note = paste_with_own_selection(text, lambda: xdotool("key", "ctrl+v"))
    texts = [event["text"] for event in qt_field.sync() if event["event"] == "text"]
    assert texts[-1:] == [text]
    assert note.startswith("taken from CLIPBOARD by window 0x"), note
    assert_user_selections_back()


def test_the_x11_backend_pastes_into_xterm_with_shift_insert_and_says_who_took_it(xterm: tuple[Path, int]) -> None:
    folder, window = xterm
    text = "Grüße — 東京 🙂"
    set_user_selections()
    out = _start_cat(folder, window, "input_performer.txt")
    capture = ScreenCapture()
    try:
        result = InputPerformer(X11Input(capture=capture, x11_typing=False)).execute(TypeText(text))
    finally:
        capture.close()
    assert _end_cat(out, text + "\n") == text + "\n"
    assert result.ok, result.detail
    assert "pasted through the clipboard with shift+insert; taken from PRIMARY by window 0x" in result.detail
    assert_user_selections_back()


def _paste_in_background(text: str, timeout_s: float) -> tuple[threading.Thread, list[ExecutionResult]]:
    """The input performer pasting `text` into the focused window on a thread (it waits for the target)."""
    results: list[ExecutionResult] = []

    def paste() -> None:
        capture = ScreenCapture()
        try:
            backend = X11Input(capture=capture, x11_typing=False)
            backend.paste_offer_timeout_s = timeout_s
            results.append(InputPerformer(backend).execute(TypeText(text)))
        finally:
            capture.close()

    thread = threading.Thread(target=paste, daemon=True)
    thread.start()
    return thread, results


def test_the_users_text_comes_back_only_after_a_slow_target_asked(gated: tuple[LineProcess, int]) -> None:
    target, window = gated
    text = "slow target: 東京 ✓"
    set_user_selections()
    thread, results = _paste_in_background(text, timeout_s=WAIT_S)
    assert target.next(WAIT_S) == "key"
    # The target has not asked yet: the text is still offered (xclip reading it does not count).
    assert XCLIP.read_text() == text
    assert thread.is_alive()
    target.send("paste CLIPBOARD")
    assert target.next(WAIT_S) == "got " + json.dumps(text)
    thread.join(WAIT_S)
    assert results and results[0].ok, results
    assert f"taken from CLIPBOARD by window {window:#x}" in results[0].detail
    assert_user_selections_back()
    assert no_serving_thread()


def test_a_target_that_never_asks_is_reported_not_pasted(gated: tuple[LineProcess, int]) -> None:
    target, window = gated
    set_user_selections()
    thread, results = _paste_in_background("never asked for: 東京", timeout_s=1.0)
    assert target.next(WAIT_S) == "key"
    target.send("ignore")
    thread.join(WAIT_S)
    assert results and not results[0].ok, results
    assert (
        f"the focused window ({window:#x}) did not ask for the text within 1 s of the paste key: "
        "the paste was not taken" in results[0].detail
    )
    assert "pasted through" not in results[0].detail
    assert_user_selections_back()


def test_another_program_taking_the_selections_mid_paste_is_reported_and_keeps_them(
    gated: tuple[LineProcess, int],
) -> None:
    target, _ = gated
    set_user_selections()
    thread, results = _paste_in_background("taken over: 東京", timeout_s=WAIT_S)
    assert target.next(WAIT_S) == "key"
    XCLIP.write_text("another program's clipboard")
    XCLIP_PRIMARY.write_text("another program's primary")
    thread.join(WAIT_S)
    target.send("ignore")
    assert results and not results[0].ok, results
    assert "took over CLIPBOARD" in results[0].detail and "took over PRIMARY" in results[0].detail
    assert "before the focused window asked for the text" in results[0].detail
    # The restore leaves the new owner's content alone.
    assert XCLIP.read_text() == "another program's clipboard"
    assert XCLIP_PRIMARY.read_text() == "another program's primary"


def test_a_claim_the_server_ignored_is_an_error_not_an_offer(xvfb: XvfbServer) -> None:
    """A claim with a time before the current owner's is ignored by the server (ICCCM 2.1)."""
    set_user_selections()
    offer = SelectionOffer("never offered", ("CLIPBOARD",), claim_time=1)
    with pytest.raises(SelectionError, match=r"could not take over the CLIPBOARD selection \(window 0x[0-9a-f]+ still"):
        offer.start()
    assert XCLIP.read_text() == USER_CLIPBOARD


@contextmanager
def frozen_clipboard_owner(text: str) -> Iterator[subprocess.Popen[bytes]]:
    """xclip in the foreground serving `text` on CLIPBOARD, then stopped (SIGSTOP): an owner that never
    answers while the block runs. It runs again after the block, and is ended."""
    before = selection_owner()
    xclip = subprocess.Popen(
        ["xclip", "-selection", "clipboard", "-i", "-quiet"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert xclip.stdin is not None
        xclip.stdin.write(text.encode())
        xclip.stdin.close()
        # Read back only once it owns CLIPBOARD: the owner before may be frozen too.
        wait_until(lambda: selection_owner() not in (before, 0), WAIT_S, "xclip taking CLIPBOARD")
        assert XCLIP.read_text() == text
        xclip.send_signal(signal.SIGSTOP)
        try:
            yield xclip
        finally:
            xclip.send_signal(signal.SIGCONT)
    finally:
        xclip.kill()
        xclip.wait(WAIT_S)


def test_an_owner_that_never_answers_is_named_and_nothing_is_claimed(xvfb: XvfbServer) -> None:
    """A frozen program owns CLIPBOARD: the offer fails after its bound, naming the program, and the
    user's clipboard stays the user's."""
    frozen_text = "what a frozen program copied"
    with frozen_clipboard_owner(frozen_text) as xclip:
        offer = SelectionOffer("never offered", ("CLIPBOARD",))
        with pytest.raises(SelectionError) as failed:
            offer.start()
        assert str(failed.value) == (
            f"the program owning CLIPBOARD (xclip, process {xclip.pid}) did not answer within 5 s, so its "
            "content could not be kept for afterwards: nothing was pasted"
        )
        xclip.send_signal(signal.SIGCONT)
        # It answers once it runs again, to a window still there: an answer to a closed one ends xclip.
        assert XCLIP.read_text() == frozen_text
        wait_until(lambda: no_thread_named("holodesk-selection-late-answer"), WAIT_S, "the late answer taken")
        assert xclip.poll() is None, "xclip ended"
        assert XCLIP.read_text() == frozen_text
        assert no_thread_named("holodesk-selection")


def test_an_owner_that_loses_the_selection_while_asked_is_not_taken_for_its_successor(xvfb: XvfbServer) -> None:
    """While the offer waits for a frozen owner, a second frozen program takes CLIPBOARD. The first then
    runs, answers the offer's request late and exits; the offer must take the second one's text, not
    that late answer, and put it back afterwards."""
    with frozen_clipboard_owner("the first owner's text") as first:
        first_window = selection_owner()
        offer = SelectionOffer("offered", ("CLIPBOARD",))
        started: list[BaseException | None] = []

        def start() -> None:
            try:
                offer.start()
                started.append(None)
            except BaseException as exc:
                started.append(exc)

        thread = threading.Thread(target=start)
        thread.start()
        wait_until(lambda: offer.waiting_for_owner == first_window, WAIT_S, "the offer asking the first owner")
        with frozen_clipboard_owner("the second owner's text") as second:
            second_window = selection_owner()
            wait_until(lambda: offer.waiting_for_owner == second_window, WAIT_S, "the offer asking the second")
            first.send_signal(signal.SIGCONT)
            first.wait(WAIT_S)  # it answered the offer's first request, saw it lost CLIPBOARD, and exited
            second.send_signal(signal.SIGCONT)
            thread.join(WAIT_S)
    assert started == [None]
    try:
        assert offer.previous["CLIPBOARD"] == PreviousContent("CLIPBOARD", owned=True, text="the second owner's text")
        assert XCLIP.read_text() == "offered"
    finally:
        problems = restore_previous(offer, 5.0)
    assert problems == []
    assert XCLIP.read_text() == "the second owner's text"


def test_a_program_whose_process_ended_is_named_by_its_window() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait(WAIT_S)
    assert program_words(gone.pid, 0x400001) == (
        f"window 0x400001; its X connection was opened by process {gone.pid}, which has ended"
    )
    assert program_words(None, 0x400001) == "window 0x400001"
    own_name = Path("/proc/self/comm").read_text().strip()
    assert program_words(os.getpid(), 0x400001) == f"{own_name}, process {os.getpid()}"


def test_latin1_text_is_also_served_as_string_and_other_text_is_refused_there(xvfb: XvfbServer) -> None:
    def read(target: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["xclip", "-selection", "clipboard", "-o", "-t", target], capture_output=True, timeout=20)

    for text, latin1 in (("Grüße", True), ("東京", False)):
        offer = SelectionOffer(text, ("CLIPBOARD",))
        offer.start()
        try:
            targets = read("TARGETS").stdout.decode().split()
            assert read("UTF8_STRING").stdout == text.encode("utf-8")
            assert read("text/plain;charset=utf-8").stdout == text.encode("utf-8")
            string = read("STRING")
            if latin1:
                assert "STRING" in targets and string.stdout == text.encode("latin-1")
            else:
                assert "STRING" not in targets and string.returncode != 0
        finally:
            offer.close()


def test_a_text_larger_than_one_request_is_refused_before_anything_is_claimed(xvfb: XvfbServer) -> None:
    set_user_selections()
    with pytest.raises(SelectionError, match="more than one X request carries here"):
        SelectionOffer("x" * 1_000_000).start()
    assert_user_selections_back()


def ask_clipboard(target: str) -> str:
    """CLIPBOARD's answer for `target` as another X client gets it (a compositor's bridge, here a stand-in)."""
    from Xlib import X
    from Xlib import display as xdisplay

    display = xdisplay.Display()
    try:
        window = display.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
        clipboard, prop = display.intern_atom("CLIPBOARD"), display.intern_atom("HOLODESK_TEST_ASK")
        window.convert_selection(clipboard, display.intern_atom(target), prop, X.CurrentTime)
        display.flush()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if not display.pending_events():
                time.sleep(0.01)
                continue
            event = display.next_event()
            if event.type == X.SelectionNotify:
                value = window.get_full_property(prop, X.AnyPropertyType)
                if value is None:
                    return ""
                if target == "TARGETS":
                    return " ".join(display.get_atom_name(atom) for atom in value.value)
                return bytes(value.value).decode()
        raise AssertionError(f"no answer for {target} within {WAIT_S:g} s")
    finally:
        display.close()


@pytest.mark.parametrize("copy", [True, False], ids=["compositor copies (mutter)", "formats only"])
def test_on_xwayland_the_paste_key_waits_for_the_compositors_copy_where_it_keeps_one(
    xvfb: XvfbServer, copy: bool
) -> None:
    """A loaded GNOME once read its copy more than the quiet moment after the formats: the key, sent
    then, pasted the previous clipboard. With `copy` the wait lasts until the text was read."""
    noted = threading.Event()
    with offer("offered ✓", ("CLIPBOARD",)) as current:
        waiter = threading.Thread(
            target=lambda: (current.wait_until_noted(0.3, WAIT_S, copy=copy), noted.set()), daemon=True
        )
        waiter.start()
        assert "UTF8_STRING" in ask_clipboard("TARGETS").split()
        if copy:
            assert not noted.wait(1.5)  # five quiet moments after the formats: still waiting for the copy
            assert ask_clipboard("UTF8_STRING") == "offered ✓"
        assert noted.wait(WAIT_S)
        waiter.join(WAIT_S)
