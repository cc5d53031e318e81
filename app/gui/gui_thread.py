"""Run a callable on the Qt GUI thread from any other thread, and wait for it to finish.

The engine works on its own thread but widgets may only be touched on the GUI thread. A queued
signal carries the callable across; a threading.Event carries the result back. Called on the GUI
thread itself, the callable simply runs (waiting there would deadlock).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.gui.qt import QtCore, Signal

T = TypeVar("T")


class GuiCallTimeout(HolodeskAppError, TimeoutError):
    """The GUI thread did not run the call in time (its event loop is busy or not running)."""


@dataclass
class _Call:
    function: Callable[[], Any]
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class GuiThreadCaller(QtCore.QObject):
    """Create it on the GUI thread; `call` may then be used from any thread."""

    _posted = Signal(object)

    def __init__(self, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        # The receiver lives on the GUI thread, so a signal emitted elsewhere is queued to it.
        self._posted.connect(self._run, QtCore.Qt.ConnectionType.QueuedConnection)

    def on_gui_thread(self) -> bool:
        return QtCore.QThread.currentThread() == self.thread()

    def call(self, function: Callable[[], T], timeout_s: float = 2.0) -> T:
        """Run `function` on the GUI thread and return its result (or raise its exception)."""
        if self.on_gui_thread():
            return function()
        pending = _Call(function)
        self._posted.emit(pending)
        if not pending.done.wait(timeout_s):
            raise GuiCallTimeout(f"the GUI thread did not answer within {timeout_s:g} s")
        if pending.error is not None:
            raise pending.error
        return pending.result

    def post(self, function: Callable[[], Any]) -> None:
        """Run `function` on the GUI thread later, without waiting."""
        if self.on_gui_thread():
            QtCore.QTimer.singleShot(0, function)
        else:
            self._posted.emit(_Call(function))

    def _run(self, pending: _Call) -> None:
        try:
            pending.result = pending.function()
        except BaseException as exc:  # handed to the waiting thread, which re-raises it
            pending.error = exc
        finally:
            pending.done.set()
