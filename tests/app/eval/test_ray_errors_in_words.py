"""What a Ray failure says: the worker's own exception where Ray kept it, else Ray's last line."""

from __future__ import annotations

import pytest

from holodesk.app.eval.ray_backend import _cause


def test_a_task_error_is_said_by_the_exception_raised_in_the_worker() -> None:
    ray = pytest.importorskip("ray")
    inside = ValueError("the page did not load")
    error = ray.exceptions.RayTaskError("run", "Traceback (most recent call last):\n  ...\nValueError: ...", inside)
    assert _cause(error) == "the page did not load"


def test_an_error_without_a_cause_is_said_by_its_last_line() -> None:
    assert _cause(RuntimeError("the actor died\nnode 10.0.0.2 lost")) == "node 10.0.0.2 lost"
    assert _cause(RuntimeError("")) == "RuntimeError"
