"""The terminal approver on a real pseudo-terminal, read back as the user's screen shows it.

`TerminalOnScreen.start(action, note=...)` runs tests/support/terminal_approval_child.py on a pty of
the given size (80x24 by default): the child asks about one step with the real TerminalApprover,
its stdin and stdout the pty, as `holodesk run` does. What it writes goes through pyte (a VT100
terminal emulator), so `lines()` is what a person sees, wrapping and scrolling included.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pyte

CHILD = Path(__file__).with_name("terminal_approval_child.py")
REPO_ROOT = Path(__file__).resolve().parents[2]


class TerminalOnScreen:
    """A child on a pty and the screen it draws."""

    def __init__(self, process: subprocess.Popen[bytes], master: int, columns: int, rows: int) -> None:
        self.process = process
        self.master = master
        self.screen = pyte.Screen(columns, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = b""

    @classmethod
    def start(cls, request: dict[str, Any], columns: int = 80, rows: int = 24) -> TerminalOnScreen:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TERM": "vt100"}
        process = subprocess.Popen(
            [sys.executable, str(CHILD), json.dumps(request)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=REPO_ROOT,
            start_new_session=True,
        )
        os.close(slave)
        return cls(process, master, columns, rows)

    def _read(self, timeout_s: float) -> bool:
        readable, _, _ = select.select([self.master], [], [], timeout_s)
        if not readable:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the child closed the pty
            return False
        self.raw += data
        self.stream.feed(data)
        return bool(data)

    def lines(self) -> list[str]:
        """The screen's rows, trailing spaces removed."""
        return [row.rstrip() for row in self.screen.display]

    def wait_for(self, text: str, timeout_s: float = 30.0) -> list[str]:
        """The screen once a row shows `text` (on a row of its own or inside one)."""
        deadline = time.monotonic() + timeout_s
        while not any(text in row for row in self.lines()):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self.process.poll() is not None and not self._read(0)):
                raise AssertionError(f"{text!r} never showed; the screen:\n" + "\n".join(self.lines()))
            self._read(min(remaining, 0.2))
        return self.lines()

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self, timeout_s: float = 20.0) -> str:
        """The child's last line (its decision as JSON) once it exits."""
        deadline = time.monotonic() + timeout_s
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0.05):
            pass
        self.close()
        return self.raw.decode(errors="replace").strip().splitlines()[-1]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)
        os.close(self.master)
