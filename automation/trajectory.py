"""Trajectories: one folder per session with `session.jsonl` and the screenshots.

Every line is appended and flushed (and fsynced) as the step happens, so a crash loses nothing
that was already done; a reader skips a cut-off last line with a warning. Screenshots are PNG-encoded
on a background thread while the model thinks, and a step's line is written only after its
screenshot is on disk, so every recorded step has its image.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from holodesk.automation.screen import ScreenFrame

log = logging.getLogger(__name__)

SESSION_FILE = "session.jsonl"
SCREENSHOT_DIR = "screenshots"
FORMAT_VERSION = 1


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
        self.folder = folder
        self.task = task
        (folder / SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        self._file = open(folder / SESSION_FILE, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the session
        self._encoder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="holodesk-png")
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
        """Encode `frame` as PNG in the background; the future gives its path relative to the folder."""
        relative = f"{SCREENSHOT_DIR}/{name}.png"
        target = self.folder / relative

        def encode() -> str:
            # Level 1: five times faster than the default and still lossless; disk is cheap here.
            tmp = target.with_suffix(".png.part")
            frame.to_image().save(tmp, format="PNG", compress_level=1)
            os.replace(tmp, target)
            return relative

        return self._encoder.submit(encode)

    def append(self, record: dict[str, Any]) -> None:
        """Append one record (a step, a note, the end) and make it durable."""
        self._write({"time": _now_iso(), **record})

    def finish(self, outcome: str, detail: str = "", **extra: Any) -> None:
        """Write the closing record and release the file."""
        if self._closed:
            return
        self.append({"type": "end", "outcome": outcome, "detail": detail, **extra})
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._encoder.shutdown(wait=True)
        self._file.close()

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        self._file.write(line + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


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
        elif kind == "end":
            session.end = record
    if not session.header:
        session.warnings.append(f"{path}: no session header")
    return session


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
    with open(tmp, "w", encoding="utf-8") as handle:
        for folder in iter_session_folders(root):
            for record in corrections(read_session(folder)):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    os.replace(tmp, out)
    return count
