"""GuiThreadCaller: calls from another thread run on the GUI thread, results and errors come back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from holodesk.app.gui.gui_thread import GuiCallTimeout, GuiThreadCaller
from holodesk.app.gui.qt import QtCore


def from_another_thread(qtbot, work: Callable[[], Any]) -> list[Any]:  # type: ignore[no-untyped-def]
    """Run `work` on a new thread while this (GUI) thread keeps its event loop going."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    qtbot.waitUntil(lambda: not thread.is_alive(), timeout=3000)
    return outcome


def test_a_call_runs_on_the_gui_thread_and_returns_its_result(qtbot, qapp) -> None:  # type: ignore[no-untyped-def]
    caller = GuiThreadCaller()
    gui_thread = qapp.thread()
    outcome = from_another_thread(qtbot, lambda: caller.call(lambda: QtCore.QThread.currentThread() == gui_thread))
    assert outcome == [True]


def test_an_error_on_the_gui_thread_is_raised_to_the_caller(qtbot) -> None:  # type: ignore[no-untyped-def]
    caller = GuiThreadCaller()

    def fail() -> None:
        raise ValueError("widget gone")

    (outcome,) = from_another_thread(qtbot, lambda: caller.call(fail))
    assert isinstance(outcome, ValueError)
    assert str(outcome) == "widget gone"


def test_a_busy_gui_thread_times_out_instead_of_hanging() -> None:
    caller = GuiThreadCaller()
    outcome: list[BaseException] = []

    def run() -> None:
        try:
            caller.call(lambda: None, timeout_s=0.05)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(2)  # this thread (the GUI's) runs no event loop meanwhile
    assert len(outcome) == 1 and isinstance(outcome[0], GuiCallTimeout)


def test_on_the_gui_thread_the_call_simply_runs() -> None:
    caller = GuiThreadCaller()
    assert caller.call(lambda: 42) == 42
