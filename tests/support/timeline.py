"""Where a test run's minutes went: each test's start and end on its worker, and a summary of them.

With HOLODESK_TEST_TIMELINE=FILE, every worker (or the one pytest process) appends one JSON line per
test to FILE: the worker, the test's xdist group, and wall-clock start and end (setup to teardown).
`python -m tests.support.timeline FILE` then prints, per worker, how long it was busy and where its
time went (its longest groups), and how long each worker stood idle before the last one finished: the
figures that say whether a change shortens the run or only moves work from one worker to the other.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

ENV = "HOLODESK_TEST_TIMELINE"


class TimelinePlugin:
    """Appends each finished test's line to the timeline file (registered by tests/conftest.py)."""

    def __init__(self, path: Path, worker: str) -> None:
        self._path = path
        self._worker = worker

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> object:
        began = time.time()
        try:
            return (yield)
        finally:
            mark = item.get_closest_marker("xdist_group")
            group = str(mark.args[0]) if mark is not None and mark.args else item.nodeid
            line = {"worker": self._worker, "test": item.nodeid, "group": group, "start": began, "end": time.time()}
            # One short append per test: the workers' lines do not interleave.
            with self._path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")


def plugin_for() -> TimelinePlugin | None:
    """The plugin when HOLODESK_TEST_TIMELINE names a file, else None."""
    path = os.environ.get(ENV)
    if not path:
        return None
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return TimelinePlugin(Path(path), worker)


def summary(lines: list[dict[str, object]], top: int = 8) -> str:
    """Per worker: busy time, idle time before the run's end, and its longest groups (seconds)."""
    if not lines:
        return "the timeline is empty"
    first = min(float(str(line["start"])) for line in lines)
    last = max(float(str(line["end"])) for line in lines)
    rows = [f"tests from first start to last end: {last - first:.0f} s"]
    by_worker: dict[str, list[dict[str, object]]] = defaultdict(list)
    for line in lines:
        by_worker[str(line["worker"])].append(line)
    for worker, own in sorted(by_worker.items()):
        ended = max(float(str(line["end"])) for line in own)
        groups: dict[str, float] = defaultdict(float)
        for line in own:
            groups[str(line["group"])] += float(str(line["end"])) - float(str(line["start"]))
        busy = sum(groups.values())
        rows.append(
            f"{worker}: {len(own)} tests, busy {busy:.0f} s, done {ended - first:.0f} s after the first start"
            f" (idle {last - ended:.0f} s at the end)"
        )
        for group, seconds in sorted(groups.items(), key=lambda kv: -kv[1])[:top]:
            rows.append(f"  {seconds:7.1f} s  {group}")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("timeline", type=Path, help=f"the file {ENV} named")
    parser.add_argument("--top", type=int, default=8, help="the longest groups to list per worker")
    arguments = parser.parse_args()
    text = arguments.timeline.read_text(encoding="utf-8")
    print(summary([json.loads(line) for line in text.splitlines() if line.strip()], arguments.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
