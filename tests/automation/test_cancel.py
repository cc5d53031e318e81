"""CancelToken: a stop asked from one thread is seen by another, at once and for good."""

from __future__ import annotations

import threading
import time

import pytest

from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import Cancelled


def test_a_fresh_token_is_not_cancelled() -> None:
    token = CancelToken()
    assert not token.cancelled
    token.raise_if_cancelled()
    assert token.sleep(0.01) is False


def test_cancel_is_seen_and_keeps_the_first_reason() -> None:
    token = CancelToken()
    token.cancel("kill switch")
    token.cancel("tray menu")
    assert token.cancelled
    assert token.reason == "kill switch"
    with pytest.raises(Cancelled, match="kill switch"):
        token.raise_if_cancelled()


def test_sleep_wakes_as_soon_as_another_thread_cancels() -> None:
    token = CancelToken()
    threading.Timer(0.05, token.cancel).start()
    started = time.monotonic()
    assert token.sleep(10.0) is True
    assert time.monotonic() - started < 2.0


def test_sleep_on_a_cancelled_token_returns_at_once() -> None:
    token = CancelToken()
    token.cancel()
    started = time.monotonic()
    assert token.sleep(5.0) is True
    assert token.sleep(0) is True
    assert time.monotonic() - started < 0.5
