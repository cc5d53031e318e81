"""Routines on MiniWoB++ pages: recorded by the oracle on one episode, replayed on new ones without the model.

The page's own JavaScript scores each replayed episode; a new episode has new texts (the routine's
parameter takes the new value) and, for click-dialog, the dialog at a new place.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.routines import run_task
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1024, 768)], indirect=True, ids=str, scope="module"),
]


@pytest.fixture(scope="module")
def browser(xvfb: XvfbServer) -> Iterator[MiniWoBBrowser]:
    with MiniWoBBrowser(zoom=3) as opened:
        yield opened


@pytest.mark.parametrize("task", ["focus-text", "enter-text", "login-user", "click-dialog"])
def test_a_routine_recorded_once_solves_new_episodes_without_the_model(browser, task, tmp_path):
    (row,) = run_task(browser, ScreenCapture(), task, [11, 12], tmp_path)
    assert row.failures == []
    assert (row.successes, row.episodes, row.wrong, row.model_calls) == (2, 2, 0, 0)
    assert row.steps_without_model == row.steps >= 2
