"""Trajectories: one folder per session with `session.jsonl` and the screenshots.

Every line is appended and flushed as the step happens, so a killed process loses nothing that
was already done; a reader skips a cut-off last line with a warning. A step's line is also fsynced
before its action, which makes every line before it durable too (a power cut loses at most the
result lines since the last action began: those steps read as interrupted). Screenshots are PNG-encoded
and fsynced on a background thread while the model thinks, so a step's line can name its PNG at once.
Before a step acts (and when the session closes) the writer confirms, within a bound, that the step's
own PNG and every earlier one is on disk: no action runs unrecorded, whatever the timing, and a
screenshot that could not be written (or a disk that stalls) stops the run before the action. The
wait is normally over already: the model's proposal takes longer than the encoding. A PNG still being
written when the process died (a step that never acted, such as the final answer) is reported by the
reader (missing or cut off).

Steps are written ahead of their action (`StepLog`): the step's record (proposal, mapped action,
decision) goes to disk before any input is sent, marked `result_pending`; a `step_result` line
follows when the action ends. The reader pairs them, and a step whose result never came (the
process was killed mid-action) reads as `interrupted`. So a kill at any moment loses no step that
began to act.

Sessions are private: folders are created 0700 and files 0600 whatever the umask, because the
screenshots show whatever was on the user's screen. A write that fails raises TrajectoryWriteError
(the engine stops the run with it) rather than losing records quietly.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import AutomationError, Cancelled
from holodesk.automation.screen import ScreenFrame

log = logging.getLogger(__name__)

SESSION_FILE = "session.jsonl"
SCREENSHOT_DIR = "screenshots"
FORMAT_VERSION = 1
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
INTERRUPTED_DETAIL = "interrupted: the run ended (killed or crashed) before this action finished"
# Screenshots waiting to be encoded hold their frame (8 MB at 1920x1080). A step normally leaves its
# PNG a whole step to finish; should encoding fall further behind than this (a slow disk), taking a
# screenshot waits for the oldest instead of letting frames pile up in memory.
MAX_PENDING_SCREENSHOTS = 2
# How long an action waits for its screenshots to be on disk before the run stops (a stalled disk). A
# 4000x3000 screen encodes in well under a second; the bound only has to end a wait that would not end.
SCREENSHOT_WAIT_S = 30.0
SCREENSHOT_POLL_S = 0.02  # how often that wait looks at the stop flag
PNG_TRAILER = b"IEND\xaeB`\x82"  # the last 8 bytes of every complete PNG: the IEND chunk and its CRC
# A routine replay judges a step's effect only once it proposes the next one: its verdict travels in
# that next step's `grounding` as a list of {"routine_step": n, "flags": [words...], "detail": words},
# and the reader moves each onto the step it judges, as `replay_verdict` ({"flags", "detail"}).
VERDICTS_KEY = "verdicts"
REPLAY_VERDICT = "replay_verdict"


class TrajectoryWriteError(AutomationError):
    """The session could not be written (folder not writable, disk full, removed mid-run)."""


def make_private_folder(folder: Path, *, existing_too: bool = True) -> None:
    """Create `folder` (and its parents) readable by its owner only, whatever the umask.

    An existing folder is made private too unless `existing_too` is False: the sessions root may be
    a folder the user chose (even their home), whose mode is theirs to decide.
    """
    try:
        folder.mkdir(mode=PRIVATE_DIR_MODE, parents=True)
        created = True
    except FileExistsError:
        created = False
    if os.name == "posix" and (created or existing_too):
        os.chmod(folder, PRIVATE_DIR_MODE)


def open_private_file(path: Path, flags: int) -> int:
    """os.open with mode 0600, also correcting an existing file's mode; returns the descriptor."""
    descriptor = os.open(path, flags | os.O_CREAT, PRIVATE_FILE_MODE)
    if hasattr(os, "fchmod"):
        os.fchmod(descriptor, PRIVATE_FILE_MODE)
    return descriptor


def check_writable(root: Path) -> None:
    """Raise TrajectoryWriteError, saying why, unless sessions can be recorded under `root`.

    Called before a run starts, so an unwritable sessions folder is reported up front instead of
    failing at the first step (or, worse, losing steps quietly).
    """
    try:
        make_private_folder(root, existing_too=False)
        probe = root / f".holodesk-write-check-{uuid.uuid4().hex[:8]}"
        descriptor = open_private_file(probe, os.O_WRONLY | os.O_EXCL)
        try:
            os.write(descriptor, b"ok")
        finally:
            os.close(descriptor)
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise TrajectoryWriteError(_write_failure(root, exc)) from exc


def _write_failure(where: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc)
    return f"cannot record the session in {where}: {reason}"


def default_root() -> Path:
    """The platform's user data folder for Holodesk sessions."""
    from platformdirs import user_data_path

    return user_data_path("holodesk", appauthor=False) / "sessions"


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return slug[:limit].rstrip("-") or "task"


class TrajectoryWriter:
    """Appends one session's records. Not thread-safe for appends: the engine thread owns it."""

    def __init__(self, folder: Path, task: str, meta: dict[str, Any] | None = None) -> None:
        """Raises TrajectoryWriteError when the folder or its session file cannot be created."""
        self.folder = folder
        self.task = task
        try:
            make_private_folder(folder.parent, existing_too=False)
            make_private_folder(folder)
            make_private_folder(folder / SCREENSHOT_DIR)
            descriptor = open_private_file(folder / SESSION_FILE, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise TrajectoryWriteError(_write_failure(folder, exc)) from exc
        self._file = os.fdopen(descriptor, "a", encoding="utf-8")
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="holodesk-png")
        # Screenshots not yet confirmed on disk, oldest first, with their paths (for messages).
        self._pending: deque[tuple[str, Future[str]]] = deque()
        self._failure: TrajectoryWriteError | None = None  # a screenshot that failed, not yet reported
        self._stalled = False  # a screenshot outlived its wait: the encoder may never return
        self._unsynced = False  # lines were flushed since the last fsync
        self._lock = threading.Lock()
        self._closed = False
        self._write({"type": "session", "version": FORMAT_VERSION, "time": _now_iso(), "task": task, **(meta or {})})

    @classmethod
    def create(cls, root: Path, task: str, meta: dict[str, Any] | None = None) -> TrajectoryWriter:
        """A new session folder under `root`, named by time and task so listings sort by age."""
        # Milliseconds too: two sessions started within one second must still sort by age, not by task.
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]
        folder = root / f"{stamp}-{_slug(task)}-{uuid.uuid4().hex[:6]}"
        return cls(folder, task, meta)

    def save_screenshot(self, name: str, frame: ScreenFrame) -> Future[str]:
        """Encode `frame` as PNG in the background; the future gives its path relative to the folder.

        The path is known at once (`screenshot_path`), so a step's line can name it before the PNG
        exists; `confirm_screenshots` says whether it was written.
        """
        relative = self.screenshot_path(name)
        target = self.folder / relative

        def encode() -> str:
            # Level 1: five times faster than the default and still lossless; disk is cheap here.
            # Pillow releases the GIL while it encodes, so this runs beside the engine on another core;
            # fpng (tried) encodes 6x faster but holds the GIL, and the engine's step got slower for it.
            # Written under another name, fsynced, then renamed: the PNG is whole or absent.
            tmp = target.with_suffix(".png.part")
            with os.fdopen(open_private_file(tmp, os.O_WRONLY | os.O_TRUNC), "wb") as handle:
                frame.to_image().save(handle, format="PNG", compress_level=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
            return relative

        while len(self._pending) >= MAX_PENDING_SCREENSHOTS:
            # Waits for the oldest (bounded); a failure is kept for confirm_screenshots.
            if not self._settle_oldest(time.monotonic() + SCREENSHOT_WAIT_S, None):
                raise self._stall_error(SCREENSHOT_WAIT_S)
        screenshot = self._encoder.submit(encode)
        self._pending.append((relative, screenshot))
        return screenshot

    @staticmethod
    def screenshot_path(name: str) -> str:
        """Where screenshot `name` is written, relative to the session folder."""
        return f"{SCREENSHOT_DIR}/{name}.png"

    def screenshots_pending(self) -> bool:
        """True while a screenshot taken so far is not yet written (confirm_screenshots would wait)."""
        return any(not screenshot.done() for _, screenshot in self._pending)

    def confirm_screenshots(self, within_s: float = SCREENSHOT_WAIT_S, cancel: CancelToken | None = None) -> None:
        """Wait, at most `within_s`, until every screenshot taken so far is on disk.

        Raises TrajectoryWriteError, saying why, when one could not be written (a disk fault, a frame
        that could not be encoded) or was not written in time (a stalled disk); each failure is raised
        once. Raises Cancelled as soon as `cancel` is cancelled while waiting.
        """
        if self._stalled:
            within_s = 0.0  # the encoder is stuck: say what is missing, do not wait for it again
        deadline = time.monotonic() + within_s
        while self._pending:
            if not self._settle_oldest(deadline, cancel):
                raise self._stall_error(within_s)
        if cancel is not None:
            cancel.raise_if_cancelled()  # a stop asked for while waiting wins over a PNG that came after it
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _settle_oldest(self, deadline: float, cancel: CancelToken | None) -> bool:
        """Wait until `deadline` for the oldest pending screenshot and settle it; False if it is not done."""
        _, screenshot = self._pending[0]
        while not screenshot.done():
            if cancel is not None:
                cancel.raise_if_cancelled()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stalled = True
                return False
            wait_for_futures([screenshot], timeout=min(remaining, SCREENSHOT_POLL_S))
        self._pending.popleft()
        self._settle(screenshot)
        return True

    def _stall_error(self, within_s: float) -> TrajectoryWriteError:
        relative, _ = self._pending[0]
        return TrajectoryWriteError(
            f"cannot record the session in {self.folder}: {relative} was not written within {within_s:g} s"
            " (the disk may be stalled)"
        )

    def _settle(self, screenshot: Future[str]) -> None:
        """Keep a done screenshot's failure (the first one) for confirm_screenshots."""
        exc = screenshot.exception()
        if exc is None or self._failure is not None:
            return
        if isinstance(exc, OSError):
            self._failure = TrajectoryWriteError(_write_failure(self.folder / SCREENSHOT_DIR, exc))
        else:
            self._failure = TrajectoryWriteError(
                f"cannot record the session in {self.folder}: a screenshot could not be encoded"
                f" ({type(exc).__name__}: {exc})"
            )
        self._failure.__cause__ = exc

    def append(self, record: dict[str, Any], *, sync: bool = True) -> None:
        """Append one record (a step, a note, the end) and make it durable.

        With `sync=False` the line is flushed (a killed process cannot lose it) but its fsync is left
        to the next synced line or the close: for lines written after an action, where a power cut
        would only turn the step into an interrupted one. An fsync costs milliseconds a line.
        """
        self._write({"time": _now_iso(), **record}, sync=sync)

    def begin_step(self, record: dict[str, Any], frame: ScreenFrame | None = None) -> StepLog:
        """A step's records: `record` (filled in as the step goes), naming the screenshot of `frame`
        that starts encoding now."""
        if frame is not None:
            name = f"step-{int(record.get('index', 0)):04d}"
            self.save_screenshot(name, frame)
            record["screenshot"] = self.screenshot_path(name)
        return StepLog(self, record)

    def finish(self, outcome: str, detail: str = "", **extra: Any) -> None:
        """Write the closing record and release the file. Never raises: a run that could not be
        recorded has already said so, and the end of a run must not fail for it."""
        if self._closed:
            return
        try:
            self.append({"type": "end", "outcome": outcome, "detail": detail, **extra})
        except TrajectoryWriteError as exc:
            log.error("%s", exc)
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # A stalled encoder would hold the close forever: its screenshot is reported missing instead.
        self._encoder.shutdown(wait=not self._stalled, cancel_futures=self._stalled)
        try:
            if self._unsynced:
                os.fsync(self._file.fileno())
            self._file.close()
        except OSError as exc:  # the final flush of a file on a failed disk
            log.error("%s", _write_failure(self.folder, exc))

    def _write(self, record: dict[str, Any], *, sync: bool = True) -> None:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        try:
            self._file.write(line + "\n")
            self._file.flush()
            if sync:
                os.fsync(self._file.fileno())
            self._unsynced = not sync
        except OSError as exc:
            raise TrajectoryWriteError(_write_failure(self.folder, exc)) from exc


def record_stopped_before_start(root: Path, task: str, detail: str, meta: Mapping[str, Any] | None = None) -> Path:
    """The session of a run stopped during its start-up (a signal while the model loaded): its opening
    record and an end that says so, with no step. Its folder; TrajectoryWriteError when it cannot be written."""
    writer = TrajectoryWriter.create(root, task, dict(meta or {}))
    writer.finish("stopped", detail, steps=0)
    return writer.folder


class StepLog:
    """One step on disk: written ahead of its action, completed when the step ends.

    The engine fills `record` as the step goes. `write_ahead()` (just before the action) waits for the
    step's screenshot and every earlier one, then appends the record with `result_pending: true`;
    `close()` (whatever way the step ends) appends a `step_result` line with what was added since,
    or the whole record if the step never reached an action (a skip, a stop at approval, the final
    answer), naming a screenshot that may still be encoding: no input depends on it.
    """

    def __init__(self, writer: TrajectoryWriter, record: dict[str, Any]) -> None:
        self.writer = writer
        self.record = record
        self._ahead: dict[str, Any] | None = None
        self._closed = False

    def screenshots_pending(self) -> bool:
        """True when write_ahead would wait for a screenshot (this step's or an earlier one)."""
        return self.writer.screenshots_pending()

    def write_ahead(self, within_s: float = SCREENSHOT_WAIT_S, cancel: CancelToken | None = None) -> None:
        """Make the step durable before its action, its screenshot included (waiting at most `within_s`).

        TrajectoryWriteError if that fails, or if a screenshot could not be written (act on nothing
        then); Cancelled if `cancel` is cancelled while waiting. Either way the step's line says why
        it was not performed (close() writes it, if the session file still can be written).
        """
        try:
            self.writer.confirm_screenshots(within_s, cancel)
        except (TrajectoryWriteError, Cancelled) as exc:
            self.record["result"] = {"ok": False, "detail": f"not performed: {exc}"}
            raise
        self._ahead = dict(self.record)
        self.writer.append({**self._ahead, "result_pending": True})

    def close(self) -> None:
        """Append what the step ended with (once)."""
        if self._closed:
            return
        self._closed = True
        if self._ahead is None:
            self.writer.append(self.record, sync=False)  # no input was sent: nothing to lose but the line
            return
        changed = {key: value for key, value in self.record.items() if self._ahead.get(key, _MISSING) != value}
        self.writer.append({**changed, "type": "step_result", "index": self.record.get("index")}, sync=False)


_MISSING = object()


@dataclass
class Session:
    """A session read back from disk. `warnings` lists lines that could not be read."""

    folder: Path
    header: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def task(self) -> str:
        return str(self.header.get("task", ""))

    @property
    def outcome(self) -> str:
        return str(self.end.get("outcome")) if self.end else "unfinished"

    @property
    def interrupted_steps(self) -> list[dict[str, Any]]:
        """Steps whose action began but whose result was never written (the process died mid-action)."""
        return [step for step in self.steps if step.get("interrupted")]


def read_session(folder: Path) -> Session:
    """Read a session folder; a truncated or corrupt line is skipped with a warning, not fatal."""
    path = folder / SESSION_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{folder} is not a Holodesk session: {SESSION_FILE} is missing") from None
    session = Session(folder=folder, header={})
    lines = raw.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
            if not isinstance(record, dict):
                raise ValueError("not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            last = number == len(lines) or all(not rest.strip() for rest in lines[number:])
            where = "cut-off last line" if last else "corrupt line"
            message = f"{path}:{number}: skipped {where} ({exc})"
            log.warning(message)
            session.warnings.append(message)
            continue
        kind = record.get("type")
        if kind == "session":
            session.header = record
        elif kind == "step":
            session.steps.append(record)
        elif kind == "step_result":
            _pair_result(session, record, f"{path}:{number}")
        elif kind == "effect":  # what the step changed on screen, judged after it ran
            _pair_effect(session, record)
        elif kind == "end":
            session.end = record
    _pair_verdicts(session)
    for step in session.steps:
        if step.pop("result_pending", False):
            step["interrupted"] = True
            step.setdefault("result", {"ok": False, "detail": INTERRUPTED_DETAIL})
        _check_screenshot(session, step)
    if not session.header:
        session.warnings.append(f"{path}: no session header")
    return session


def _pair_effect(session: Session, effect: dict[str, Any]) -> None:
    """Merge an `effect` line into its step: `visible_change` (False: the screen stayed the same) and
    the result in words; one for a step never begun is dropped (its step has nothing to show it on)."""
    index = effect.get("index")
    for step in reversed(session.steps):
        if step.get("index") == index:
            step["visible_change"] = effect.get("visible_change")
            if effect.get("result"):
                step["effect_result"] = str(effect["result"])
            return


def _pair_verdicts(session: Session) -> None:
    """Give each routine step the replay's verdict on it, carried by a later step's grounding (see
    VERDICTS_KEY): the latest earlier step of the same routine with that routine step number."""
    for position, step in enumerate(session.steps):
        grounding = step.get("grounding")
        if not isinstance(grounding, dict) or not isinstance(grounding.get(VERDICTS_KEY), list):
            continue
        for verdict in grounding[VERDICTS_KEY]:
            if not isinstance(verdict, dict):
                continue
            flags = verdict.get("flags")
            words = [str(flag) for flag in flags] if isinstance(flags, list) else []
            for earlier in reversed(session.steps[:position]):
                judged = earlier.get("grounding")
                if (
                    isinstance(judged, dict)
                    and judged.get("routine") == grounding.get("routine")
                    and judged.get("routine_step") == verdict.get("routine_step")
                ):
                    earlier[REPLAY_VERDICT] = {"flags": words, "detail": str(verdict.get("detail", ""))}
                    break


def _pair_result(session: Session, result: dict[str, Any], where: str) -> None:
    """Merge a `step_result` line into the written-ahead step it completes."""
    index = result.get("index")
    for step in reversed(session.steps):
        if step.get("index") == index and step.get("result_pending"):
            step.pop("result_pending")
            step.update({key: value for key, value in result.items() if key not in ("type", "index", "time")})
            step["result_time"] = result.get("time")
            return
    message = f"{where}: skipped a result for step {index!r}, which was never begun"
    log.warning(message)
    session.warnings.append(message)


def _check_screenshot(session: Session, step: dict[str, Any]) -> None:
    """A step's line names its PNG before the PNG is written: say so when it never was (or was cut off).

    Sets `screenshot_error` on the step and adds a warning; only the PNG's last bytes are read.
    """
    shot = step.get("screenshot")
    if not isinstance(shot, str) or "screenshot_error" in step:
        return
    path = session.folder / shot
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - len(PNG_TRAILER)))
            complete = handle.read() == PNG_TRAILER
        problem = None if complete else "cut off (the PNG was not written to its end)"
    except FileNotFoundError:
        problem = "missing (the run ended, or its disk failed, before it was written)"
    except OSError as exc:
        problem = f"unreadable ({exc.strerror or exc})"
    if problem is not None:
        step["screenshot_error"] = f"{shot} is {problem}"
        session.warnings.append(f"{path}: step {step.get('index')!r}'s screenshot is {problem}")


def iter_session_folders(root: Path) -> Iterator[Path]:
    """Session folders under `root`, oldest first."""
    if not root.is_dir():
        return iter(())
    return iter(sorted(p for p in root.iterdir() if (p / SESSION_FILE).is_file()))


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def prune_sessions(root: Path, max_bytes: int, keep_latest: int = 1) -> list[Path]:
    """Delete the oldest sessions until the rest fit in `max_bytes`; the newest `keep_latest` stay."""
    folders = list(iter_session_folders(root))
    sizes = {folder: folder_size(folder) for folder in folders}
    total = sum(sizes.values())
    removed: list[Path] = []
    for folder in folders[: max(0, len(folders) - keep_latest)]:
        if total <= max_bytes:
            break
        shutil.rmtree(folder)
        total -= sizes[folder]
        removed.append(folder)
    return removed


def corrections(session: Session) -> Iterator[dict[str, Any]]:
    """Steps where the user moved the target: (screenshot, instruction, corrected point in image pixels)."""
    for step in session.steps:
        if step.get("decision") != "edit":
            continue
        proposed = step.get("action_screen") or {}
        edited = step.get("edited_screen") or {}
        point = _first_point(edited)
        if point is None or point == _first_point(proposed) or not step.get("screenshot"):
            continue
        if step.get("screenshot_error"):
            continue  # no usable image: a grounding example needs one
        region = step.get("region") or {}
        image_x = point[0] - int(region.get("left", 0))
        image_y = point[1] - int(region.get("top", 0))
        if not (0 <= image_x < int(region.get("width", 0)) and 0 <= image_y < int(region.get("height", 0))):
            continue  # moved onto another monitor: the screenshot does not show it
        # The model's own description of the target is the best grounding instruction there is.
        instruction = (
            step.get("element") or step.get("target") or step.get("note") or step.get("thought") or session.task
        )
        yield {
            "image": str((session.folder / step["screenshot"]).resolve()),
            "instruction": instruction,
            "point": [image_x, image_y],
            "proposed": _first_point(proposed),
            "session": session.folder.name,
            "step": step.get("index"),
        }


def _first_point(action: dict[str, Any]) -> list[int] | None:
    for key in ("at", "to", "start"):
        value = action.get(key)
        if isinstance(value, list) and len(value) == 2:
            return [int(value[0]), int(value[1])]
    return None


def export_corrections(root: Path, out: Path) -> int:
    """Write every correction under `root` as a grounding data set (JSONL); returns the count."""
    count = 0
    tmp = out.with_suffix(out.suffix + ".part")
    # Private like the sessions it comes from (screens, typed text): 0600, a leftover .part included.
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        for folder in iter_session_folders(root):
            for record in corrections(read_session(folder)):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    os.replace(tmp, out)
    return count
