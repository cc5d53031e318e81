"""The `holodesk` command as the tests start it: this interpreter, the installed entry point's module."""

from __future__ import annotations

import signal
import sys

HOLODESK_COMMAND = (sys.executable, "-m", "holodesk.app.cli")


def ctrl_c_as_from_a_terminal() -> None:
    """`preexec_fn` for a command a test stops with Ctrl+C: SIGINT at its default, as a user's terminal
    gives it. A test run started in the background by a non-interactive shell inherits SIGINT ignored,
    and so would the command (seen: `holodesk eval` never saw the test's Ctrl+C)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
