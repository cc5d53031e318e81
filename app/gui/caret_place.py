"""Where the caret is, in screen pixels, read through AT-SPI in a helper process (no Qt here).

`CaretReader.read(pid)` asks app/gui/caret_atspi.py, started on first use and kept running (by this
Python, or by the system's where this one cannot import gi), for the
caret of the focused object of the accessible application whose process is `pid`. Every read is
bounded: it answers None rather than wait past its deadline, when there is no accessibility bus or no
PyGObject/Atspi (the helper says so once and is not started again for a while), when the application
is not accessible or its focused object has no Text interface, and while the helper is still busy
with an earlier question (a hung application: the helper is ended once it stays busy too long).
Nothing raises into the caller; why a caret is unknown is logged.

What is assumed (app/gui/focused_area.py checks the rest): the accessible application is found by
its process id, which AT-SPI reads from the application's D-Bus connection, so it is only as good as
the X window's _NET_WM_PID (a client on another host does not match); the toolkit reports screen
coordinates in X root pixels divided by a whole scale factor (GTK 3 under GDK_SCALE=2 halves them),
which the caller finds by comparing the accessible window's size with the X window's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from holodesk.automation.coords import Rect

log = logging.getLogger(__name__)

HELPER_FILE = str(Path(__file__).with_name("caret_atspi.py"))  # needs only the standard library and gi
SYSTEM_PYTHON = "/usr/bin/python3"
READ_DEADLINE_S = 0.3  # one read, once the helper is up (about 10 ms when the application answers)
START_WAIT_S = 1.5  # how long a read waits for a just-started helper (Python and gi load in about 0.3 s)
HUNG_AFTER_S = 5.0  # a question unanswered this long: the helper is stuck on a hung application
RETRY_AFTER_S = 30.0  # after the helper ended or was ended, it is started again no sooner


@dataclass(frozen=True, slots=True)
class CaretAnswer:
    """The caret's rectangle, the text field's and its window's, in the toolkit's screen coordinates
    (X root pixels divided by its scale: app/gui/focused_area.py compares `window` with the X window's)."""

    caret: Rect
    field: Rect
    window: Rect


def helper_commands() -> tuple[tuple[str, ...], ...]:
    """This Python first; then the system's, for a private venv that cannot import Debian's gi (the
    Debian package's): the helper is one file that needs nothing of Holodesk. -I: no folder of its own
    on sys.path, no user site-packages."""
    commands = [(sys.executable, "-I", HELPER_FILE)]
    if sys.executable != SYSTEM_PYTHON and os.path.exists(SYSTEM_PYTHON):
        commands.append((SYSTEM_PYTHON, "-I", HELPER_FILE))
    return tuple(commands)


class CaretReader:
    """The helper process and the questions put to it; one per tray application (see `caret_reader`)."""

    def __init__(
        self,
        commands: tuple[tuple[str, ...], ...] | None = None,
        deadline_s: float = READ_DEADLINE_S,
        start_wait_s: float = START_WAIT_S,
        hung_after_s: float = HUNG_AFTER_S,
        retry_after_s: float = RETRY_AFTER_S,
    ) -> None:
        self.commands = commands if commands is not None else helper_commands()
        self._command = 0  # the one to start: the next is tried once one says it has no gi
        self.deadline_s = deadline_s
        self.start_wait_s = start_wait_s
        self.hung_after_s = hung_after_s
        self.retry_after_s = retry_after_s
        self._lock = threading.Lock()  # one question at a time, from whichever thread asks
        self._process: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[dict[str, object]] = queue.Queue()
        self._stderr: list[str] = []
        self._stderr_reader: threading.Thread | None = None
        self._ready = False
        self._next_id = 0
        self._waiting: tuple[int, float] | None = None  # the question not answered yet: its id, when asked
        self._not_before = 0.0  # no new helper before this (time.monotonic())
        self.last_reason = ""  # why the last read gave no caret, in words

    def read(self, pid: int) -> CaretAnswer | None:
        """The caret of `pid`'s focused object; None (with `last_reason` saying why) within the deadline."""
        with self._lock:
            try:
                return self._read(pid)
            except (OSError, ValueError) as exc:  # the pipe broke under us: the helper ended
                self._end(f"the AT-SPI helper failed: {exc}")
                return None

    def _read(self, pid: int) -> CaretAnswer | None:
        process = self._running()
        if process is None:
            return None
        if not self._ready:
            if not self._wait_ready(time.monotonic() + self.start_wait_s):
                return None
            process = self._process  # another command's helper, where the first had no gi
            assert process is not None
        earlier = self._waiting
        if earlier is not None and self._take(earlier[0], time.monotonic()) is None:
            if self._process is None:  # it ended meanwhile (said so)
                return None
            if time.monotonic() - earlier[1] > self.hung_after_s:
                self._end(f"the AT-SPI helper got no answer in {self.hung_after_s:g} s (a hung application)")
            else:
                self._reason("the AT-SPI helper is still waiting for an application's earlier answer")
            return None
        self._next_id += 1
        asked = time.monotonic()
        self._waiting = (self._next_id, asked)
        assert process.stdin is not None
        process.stdin.write(json.dumps({"id": self._next_id, "pid": pid}) + "\n")
        process.stdin.flush()
        answer = self._take(self._next_id, asked + self.deadline_s)
        if answer is None:
            if self._process is not None:
                self._reason(f"AT-SPI did not answer within {self.deadline_s:g} s")
            return None
        caret, field, window = _rect(answer.get("caret")), _rect(answer.get("field")), _rect(answer.get("window"))
        if caret is None or field is None or window is None:
            self._reason(str(answer.get("none", f"an answer without a caret: {answer}")))
            return None
        return CaretAnswer(caret, field, window)

    def _running(self) -> subprocess.Popen[str] | None:
        """The helper, started when there is none and none has ended lately."""
        if self._process is not None:
            return self._process
        if time.monotonic() < self._not_before:
            return None
        try:
            process = subprocess.Popen(
                self.commands[self._command],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
            )
        except OSError as exc:
            self._end(f"the AT-SPI helper did not start: {exc}")
            return None
        self._process, self._ready, self._waiting = process, False, None
        self._answers = queue.Queue()
        self._stderr = []
        threading.Thread(target=self._read_answers, args=(process, self._answers), daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, args=(process, self._stderr), daemon=True)
        self._stderr_reader.start()
        return process

    @staticmethod
    def _read_answers(process: subprocess.Popen[str], answers: queue.Queue[dict[str, object]]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # not the protocol: a library printing to stdout
            if isinstance(record, dict):
                answers.put(record)
        answers.put({"event": "ended"})

    @staticmethod
    def _read_stderr(process: subprocess.Popen[str], lines: list[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip())
            del lines[:-20]

    def _wait_ready(self, deadline: float) -> bool:
        while True:
            record = self._next(deadline)
            if record is None:
                self._reason("the AT-SPI helper is still starting")
                return False
            if record.get("event") == "ready":
                self._ready = True
                return True
            no_gi = record.get("event") == "unavailable" and record.get("missing") == "gi"
            if no_gi and self._command + 1 < len(self.commands):  # another Python may have gi: at once
                log.debug("no caret helper in %s: %s", self.commands[self._command][0], record.get("reason"))
                self._forget()
                self._command += 1
                if self._running() is None:
                    return False
                continue
            if record.get("event") in ("unavailable", "ended"):
                self._end(str(record.get("reason") or self._ended_words()))
                return False

    def _take(self, wanted: int, deadline: float) -> dict[str, object] | None:
        """The answer to question `wanted`, or None at the deadline; earlier answers are dropped."""
        while True:
            record = self._next(deadline)
            if record is None:
                return None
            if record.get("event") == "ended":
                self._end(self._ended_words())
                return None
            if record.get("id") == wanted:
                self._waiting = None
                return record

    def _next(self, deadline: float) -> dict[str, object] | None:
        try:
            return self._answers.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def _ended_words(self) -> str:
        process = self._process
        code = process.poll() if process is not None else None
        if process is not None and code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):  # its exit status, if it comes soon
                code = process.wait(timeout=1.0)
        if self._stderr_reader is not None:
            self._stderr_reader.join(timeout=0.5)  # its last words, once its stderr closes
        said = " ".join(line for line in self._stderr[-3:] if line.strip())
        return f"the AT-SPI helper ended (exit status {code}){': ' + said if said else ''}"

    def _end(self, reason: str) -> None:
        """Stop the helper, say why, and start none again for a while."""
        self._forget()
        self._not_before = time.monotonic() + self.retry_after_s
        log.info("the caret's place is not read (%s): the focused window's bottom rows are kept clear instead", reason)
        self.last_reason = reason

    def _forget(self) -> None:
        process, self._process = self._process, None
        self._ready, self._waiting = False, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()

    def _reason(self, reason: str) -> None:
        log.debug("no caret: %s", reason)
        self.last_reason = reason

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()


def _rect(value: object) -> Rect | None:
    """[x, y, w, h] from the helper as a Rect; None for anything else."""
    if not (isinstance(value, list) and len(value) == 4):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in value) or value[2] <= 0 or value[3] <= 0:
        return None
    return Rect(value[0], value[1], value[2], value[3])


_reader: CaretReader | None = None
_reader_lock = threading.Lock()


def caret_reader() -> CaretReader:
    """The process's one reader (its helper outlives single reads)."""
    global _reader
    with _reader_lock:
        if _reader is None:
            _reader = CaretReader()
        return _reader
