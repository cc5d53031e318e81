"""Which bound keycodes a program may still read keys on (automation.input.x11.unread), without a display.

The ping itself is replaced by a stand-in that answers as told (real programs answer it in
tests/automation/test_typing_freeze.py and test_typing_layouts.py); what is checked here is the
bookkeeping: who is asked, when a keycode is free again, the words, and the wait that grows.
"""

from __future__ import annotations

import time

import pytest

from holodesk.automation.input.x11 import unread
from holodesk.automation.input.x11.unread import PING_TIMEOUT_S, PingAnswer, Reader, UnreadKeys

KITTY = Reader(0x400001, "kitty")
XTERM = Reader(0x600001, "XTerm")


class Pings:
    """Answers pings from a table (window -> answer), after `delay_s`; remembers each (window, timeout)."""

    def __init__(self, answers: dict[int, PingAnswer], delay_s: float = 0.0) -> None:
        self.answers = answers
        self.delay_s = delay_s
        self.asked: list[tuple[int, float]] = []

    def __call__(self, display_name: str | None, window_id: int, timeout_s: float) -> PingAnswer:
        self.asked.append((window_id, timeout_s))
        time.sleep(self.delay_s)
        return self.answers[window_id]


def _unread(monkeypatch: pytest.MonkeyPatch, pings: Pings) -> UnreadKeys:
    monkeypatch.setattr(unread, "ping_window", pings)
    return UnreadKeys(":0")


def test_an_answer_frees_the_keycodes_only_of_the_program_that_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _unread(monkeypatch, Pings({KITTY.window: PingAnswer.ANSWERED, XTERM.window: PingAnswer.NOT_TAKEN}))
    keys.sent(KITTY, {10, 11})
    keys.sent(XTERM, {11, 12})
    assert keys.pending({10, 11, 12}) == {11, 12}  # 11 was sent to both: xterm may still read it
    assert keys.readers({10, 11, 12}) == ["XTerm"]


def test_a_program_that_takes_no_ping_or_does_not_answer_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _unread(monkeypatch, Pings({KITTY.window: PingAnswer.SILENT, XTERM.window: PingAnswer.NOT_TAKEN}))
    keys.sent(KITTY, {10})
    keys.sent(XTERM, {11})
    assert keys.confirm(KITTY) == f"kitty did not answer a _NET_WM_PING within {PING_TIMEOUT_S:g} s (busy or stopped)"
    assert keys.confirm(XTERM) == "XTerm does not answer _NET_WM_PING, so that it read them cannot be known"
    assert keys.pending({10, 11}) == {10, 11}


def test_a_window_that_is_gone_reads_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _unread(monkeypatch, Pings({KITTY.window: PingAnswer.GONE}))
    keys.sent(KITTY, {10})
    assert keys.confirm(KITTY) == "" and keys.pending({10}) == set()


def test_keys_sent_with_no_window_to_ask_are_never_confirmed(monkeypatch: pytest.MonkeyPatch) -> None:
    pings = Pings({})
    keys = _unread(monkeypatch, pings)
    nobody = Reader(0, "the focused program")
    keys.sent(nobody, {10})
    assert "no window with the keyboard focus takes _NET_WM_PING" in keys.confirm(nobody)
    assert keys.pending({10}) == {10} and pings.asked == []


def test_a_binding_someone_else_replaced_waits_for_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = _unread(monkeypatch, Pings({XTERM.window: PingAnswer.NOT_TAKEN}))
    keys.sent(XTERM, {10, 11})
    keys.forget({10})  # setxkbmap reloaded the keymap: keycode 10 carries no binding of ours
    assert keys.pending({10, 11}) == {11}


def test_the_wait_grows_with_the_slowest_answer_the_window_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    pings = Pings({KITTY.window: PingAnswer.ANSWERED}, delay_s=0.9)
    keys = _unread(monkeypatch, pings)
    keys.sent(KITTY, {10})
    assert keys.confirm(KITTY) == ""
    keys.sent(KITTY, {10})
    keys.confirm(KITTY)
    first, second = (timeout for _, timeout in pings.asked)
    assert first == PING_TIMEOUT_S and second >= 3 * 0.9  # three times its slowest answer
    assert keys.wait_s(XTERM.window) == PING_TIMEOUT_S  # another window's own history counts
