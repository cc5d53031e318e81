"""The tasks a user typed recently, newest first, kept in a small JSON file (written atomically)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

MAX_RECENT = 20


def default_path() -> Path:
    from platformdirs import user_data_path

    return user_data_path("holodesk", appauthor=False) / "recent_tasks.json"


class RecentTasks:
    """Newest first, without duplicates, at most `limit` entries."""

    def __init__(self, path: Path, limit: int = MAX_RECENT) -> None:
        self.path = path
        self.limit = limit
        self.tasks: list[str] = self._load()

    def _load(self) -> list[str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            # Losing suggestions is harmless; the file is left for the user to inspect.
            log.warning("ignoring unreadable recent tasks file %s: %s", self.path, exc)
            return []
        if not isinstance(data, list):
            log.warning("ignoring recent tasks file %s: not a list", self.path)
            return []
        return [item for item in data if isinstance(item, str) and item.strip()][: self.limit]

    def add(self, task: str) -> None:
        task = task.strip()
        if not task:
            return
        self.tasks = [task, *(t for t in self.tasks if t != task)][: self.limit]
        self._save()

    def matching(self, text: str) -> list[str]:
        needle = text.strip().lower()
        return [t for t in self.tasks if needle in t.lower()] if needle else list(self.tasks)

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".recent-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(self.tasks, handle, ensure_ascii=False, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:  # the temp file goes on any way out, Ctrl+C too; re-raised
            Path(tmp).unlink(missing_ok=True)
            raise
