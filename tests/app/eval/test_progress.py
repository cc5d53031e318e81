"""The batch progress display: tqdm's bar on a terminal, plain countable lines in a log."""

from __future__ import annotations

import io

import pytest

from holodesk.app.eval.progress import ProgressBar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_plain_line_every_n_items_and_at_the_end() -> None:
    ticks = iter([0.0, 2.0, 4.0, 5.0])
    log = io.StringIO()
    bar = ProgressBar(5, log, unit="episodes", every=2, clock=lambda: next(ticks))
    for index in range(5):
        bar.advance(failed=index == 1, note=f"task-{index}")
    bar.close()
    lines = log.getvalue().splitlines()
    assert [line.split(" ")[0] for line in lines] == ["2/5", "4/5", "5/5"]
    assert "1 failed" in lines[-1] and lines[-1].endswith("task-4")
    assert "\r" not in log.getvalue()


def test_a_terminal_gets_a_bar_that_counts_failures() -> None:
    terminal = _Terminal()
    bar = ProgressBar(4, terminal, unit="items")
    bar.advance()
    bar.advance(failed=True, note="click-button")
    bar.close()
    shown = terminal.getvalue()
    assert "2/4" in shown and "failed=1" in shown and "click-button" in shown


def test_a_negative_total_is_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        ProgressBar(-1, io.StringIO())
