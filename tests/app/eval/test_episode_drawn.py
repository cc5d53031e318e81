"""An episode's first screenshot waits until the screen shows the new episode (no display: a scripted
frame source plays a compositor that lags behind the page)."""

from __future__ import annotations

from holodesk.app.eval.miniwob_eval import wait_until_drawn
from holodesk.automation.screen import ScreenFrame
from tests.automation.frames import solid_frame, with_box


class LaggingScreen:
    """Shows `old` for `lag` grabs, then `new` for ever: what X shows while Chromium's compositor catches up."""

    def __init__(self, old: ScreenFrame, new: ScreenFrame, lag: int) -> None:
        self.old, self.new, self.lag, self.grabs = old, new, lag, 0

    def grab(self, monitor: int | None) -> ScreenFrame:
        self.grabs += 1
        return self.old if self.grabs <= self.lag else self.new


def test_the_wait_ends_only_after_the_screen_changed_and_settled():
    old = solid_frame()
    new = with_box(old, 10, 10, 20, (255, 255, 255))
    screen = LaggingScreen(old, new, lag=5)
    wait_until_drawn(screen, 1, old)
    assert screen.grabs >= 5 + 2  # past the lag, then two equal frames of the new screen
    assert screen.grab(1) is new


def test_a_screen_that_never_changes_is_waited_for_only_within_the_bound(monkeypatch):
    monkeypatch.setattr("holodesk.app.eval.miniwob_eval.DRAWN_TIMEOUT_S", 0.3)
    old = solid_frame()
    screen = LaggingScreen(old, old, lag=0)
    wait_until_drawn(screen, 1, old)  # returns: a new episode that looks like the last one is not an error
    assert screen.grabs >= 3
