"""A child process spoken to by lines: commands on its stdin, its stdout lines on a queue.

The hotkey and tray tests run their Qt or pynput code in a child process (a QApplication or pynput
thread tied to a module's Xvfb must not live in the test process) and read what it reports.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from typing import IO


class LineProcess:
    """`python -m MODULE ARGS...` with line-based stdin/stdout."""

    def __init__(
        self, module: str, *args: str, env: dict[str, str] | None = None, stderr: IO[str] | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def next(self, timeout: float) -> str | None:
        """The next line, or None when none came within `timeout` seconds."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
