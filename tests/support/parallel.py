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
- every other test: its file. A module's fixtures (its Xvfb, its programs) are then set up once.

`front_load` then puts the `vllm` group first and `wayland` second in the collected order: with
`--no-loadscope-reorder` the scheduler hands out groups in that order, so the two long groups start at
once on the two workers and the short files fill in around them. xdist gives a busy worker no new group
while it has more than two tests waiting, so the `vllm` worker is not handed files to hold up.

Without xdist (`pytest` alone, or `-p no:xdist`) the marks change nothing and the order is the same
tests, the vLLM tier first.
"""

from __future__ import annotations

import pytest

from tests.support import vllm_pool

VLLM = "vllm"
POOL_FIXTURE = "vllm_pool"  # tests/conftest.py's session fixture; every pooled server's fixture uses it
WAYLAND = "wayland"
# The groups that start first, in this order (see the module docstring).
FIRST = (VLLM, WAYLAND)


def group_of(item: pytest.Item) -> str:
    """The xdist group of `item`: `vllm`, `wayland`, or its file relative to the rootdir."""
    if POOL_FIXTURE in item.fixturenames or vllm_pool.item_specs(item):
        return VLLM
    if item.get_closest_marker(WAYLAND) is not None:
        return WAYLAND
    return item.path.relative_to(item.config.rootpath).as_posix()


def group_items(items: list[pytest.Item]) -> None:
    """Mark each test with its xdist group; must run before xdist's own collection hook reads the marks."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))


def front_load(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: the `vllm` group, then `wayland`, then the rest; each keeps its own order."""
    rank = {group: index for index, group in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(group_of(item), len(FIRST)))  # sort is stable


class ParallelPlugin:
    """The front-loading hook, wrapped around every other ordering (the pool's comes first)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> object:
        result = yield
        front_load(items)
        return result
