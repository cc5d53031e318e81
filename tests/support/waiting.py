"""Wait for a condition, bounded: the tests' one way to let something happen on a loaded machine."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_S = 0.05


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `condition` until it holds; raise AssertionError naming `what` after `timeout_s`.

    Timeouts are generous on purpose: only a failure waits that long, and a loaded machine is slow.
    """
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        time.sleep(POLL_S)
