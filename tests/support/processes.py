"""Live processes by their parent or process group, read from Linux's /proc."""

from __future__ import annotations

from pathlib import Path


def _stats() -> list[tuple[int, str, list[str]]]:
    """(pid, name, the fields after the name) of every live process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        found.append((int(entry.name), text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()))
    return found


def children_of(parent: int) -> list[int]:
    """Pids of the live processes whose parent is `parent`."""
    return [pid for pid, _, fields in _stats() if int(fields[1]) == parent]


def processes_in_group(group: int) -> list[str]:
    """Names of the live processes whose process group is `group`."""
    return [name for _, name, fields in _stats() if int(fields[3]) == group]
