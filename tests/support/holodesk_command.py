"""The `holodesk` command as the tests start it: this interpreter, the installed entry point's module."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

import pytest

HOLODESK_COMMAND = (sys.executable, "-m", "holodesk.app.cli")


def ctrl_c_as_from_a_terminal() -> None:
    """`preexec_fn` for a command a test stops with Ctrl+C: SIGINT at its default, as a user's terminal
    gives it. A test run started in the background by a non-interactive shell inherits SIGINT ignored,
    and so would the command (seen: `holodesk eval` never saw the test's Ctrl+C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ctrl_c_and_wait(command: subprocess.Popen[str], within_s: float, state: Callable[[], str] = str) -> str:
    """Send Ctrl+C to `command` (started with `python -X faulthandler`) and return its stderr once it ended.

    Still running after `within_s`: SIGABRT makes it print every thread's stack, and the test fails with
    them and `state()` (what else the test knows, such as which workers still run).
    """
    command.send_signal(signal.SIGINT)
    try:
        return command.communicate(timeout=within_s)[1]
    except subprocess.TimeoutExpired:
        known = state()
        command.send_signal(signal.SIGABRT)
        err = command.communicate(timeout=30)[1]
        pytest.fail(
            f"still running {within_s:g} s after Ctrl+C{f' ({known})' if known else ''}; its stderr:\n{err[-4000:]}"
        )
