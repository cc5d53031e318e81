"""Which tests share a pytest-xdist worker, and the order the scheduler hands them out.

tests/run.sh runs the suite on parallel workers (`-n`, `--dist loadgroup`, `--no-loadscope-reorder`).
Most of the suite waits on other processes (Xvfb, programs, a vLLM server computing on one core), so two
workers on two cores overlap those waits. xdist's `loadgroup` sends each group of tests to one worker
whole; `group_items` names the groups:

- `vllm`: every test that uses the session's vLLM pool (tests/support/vllm_pool.py). The pool lives
  in one process and plans when each server starts and stops from the order it collected; one worker
  must run all of its tests for that plan to hold, and it keeps at most its two servers beside the
  rest. A `vllm` test with a server of its own (a benchmark, a test that kills its server) is not
  in it: it runs with its file, on whichever worker is free.
- `wayland`: the headless GNOME stack's tests. Each module starts its own stack; two stacks (mutter,
  PipeWire, the portal, XWayland) at once on two cores made their bounded waits the slow part.
- a benchmark (marked `bench`): itself. Each runs `python -m bench` in a process of its own and shares
  no fixture, so the minutes of them spread over the workers instead of running one after another.
- every other test: its file. A module's fixtures (its Xvfb, its programs) are then set up once.

`front_load` then orders the groups longest first, as measured in the fresh-clone runs: `vllm` (about
8 min), `wayland` (about 4), the benchmarks, then the files in `LONG_FILES`, then the rest as
collected. With `--no-loadscope-reorder` the scheduler hands out groups in that order, so the two long
groups start at once on the two workers, the minute-long ones follow and the short files fill in at
the end: handed out last, a 95 s file kept one worker busy 85 s after the other had finished. xdist
gives a busy worker no new group while it has more than two tests waiting, so the `vllm` worker is
not handed files to hold up.

Without xdist (`pytest` alone, or `-p no:xdist`) the marks change nothing and the order is the same
tests, the vLLM tier first.
"""

from __future__ import annotations

import pytest

from tests.support import vllm_pool

VLLM = "vllm"
POOL_FIXTURE = "vllm_pool"  # tests/conftest.py's session fixture; every pooled server's fixture uses it
WAYLAND = "wayland"
BENCH = "bench"
# The files of more than half a minute that are one group each, longest first (seconds in a
# fresh-clone run on two workers).
LONG_FILES = (
    "tests/packaging/test_deb.py",  # 95: builds the package, lintian
    "tests/automation/test_typing_layouts.py",  # 81
    "tests/app/eval/test_miniwob_ray.py",  # 52
    "tests/automation/kde/test_kde_typing_matrix.py",  # 45 (measured alone, on one worker)
    "tests/e2e/test_kill_safety.py",  # 36
    "tests/automation/input/x11/test_performer.py",  # 28
)


def group_of(item: pytest.Item) -> str:
    """The xdist group of `item`: `vllm`, `wayland`, a benchmark's own node id, or its file relative to
    the rootdir."""
    if POOL_FIXTURE in item.fixturenames or vllm_pool.item_specs(item):
        return VLLM
    if item.get_closest_marker(WAYLAND) is not None:
        return WAYLAND
    if item.get_closest_marker(BENCH) is not None:
        return item.nodeid
    return item.path.relative_to(item.config.rootpath).as_posix()


def rank_of(item: pytest.Item) -> int:
    """Where `item`'s group starts: the longest groups first (see the module docstring)."""
    group = group_of(item)
    if group == VLLM:
        return 0
    if group == WAYLAND:
        return 1
    if item.get_closest_marker(BENCH) is not None:
        return 2
    if group in LONG_FILES:
        return 3 + LONG_FILES.index(group)
    return 3 + len(LONG_FILES)


def group_items(items: list[pytest.Item]) -> None:
    """Mark each test with its xdist group; must run before xdist's own collection hook reads the marks."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))


def front_load(items: list[pytest.Item]) -> None:
    """Reorder `items` in place, the longest groups first (`rank_of`); within a rank the collected order."""
    items.sort(key=rank_of)  # sort is stable


class ParallelPlugin:
    """The front-loading hook, wrapped around every other ordering (the pool's comes first)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> object:
        result = yield
        front_load(items)
        return result
