"""Clicks approved together stay single clicks: spaced beyond the desktop's double-click interval, which
is read from XSETTINGS (automation/click_spacing.py).

The settings are built here byte by byte after the XSETTINGS specification, served the way a
settings daemon does (a window of the test's own owns `_XSETTINGS_S0` and holds the property) on a
private Xvfb, and the clicks are read back as the X server stamped them on a window of the test's
own: the time from the first click's release to the second's press.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from Xlib import X
from Xlib import display as xdisplay

from holodesk.automation.actions import Action, Click, Done, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.click_spacing import (
    DEFAULT_DOUBLE_CLICK_MS,
    SPACING_MARGIN_MS,
    XSettingsError,
    parse_xsettings,
    read_double_click_time,
)
from holodesk.automation.coords import ImagePixelSpace
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import ApprovalDecision, ApprovalRequest, Decision, EngineSettings, Outcome
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.proposal import Grounding, PastStep, Proposal
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import XvfbServer


def setting(kind: int, name: str, value: bytes, order: str = "<") -> bytes:
    """One setting: type, pad, name length, name padded to 4, last-change serial, value."""
    encoded = name.encode("ascii")
    return struct.pack(f"{order}BxH", kind, len(encoded)) + encoded + b"\0" * (-len(encoded) % 4) + b"\0\0\0\0" + value


def xsettings(entries: Sequence[bytes], order: str = "<") -> bytes:
    return (
        bytes([0 if order == "<" else 1]) + b"\0\0\0" + struct.pack(f"{order}II", 7, len(entries)) + b"".join(entries)
    )


def double_click_settings(ms: int, order: str = "<") -> bytes:
    theme = b"Adwaita"
    return xsettings(
        [
            setting(1, "Net/ThemeName", struct.pack(f"{order}I", len(theme)) + theme + b"\0", order),
            setting(2, "Gtk/Color", struct.pack(f"{order}4H", 1, 2, 3, 4), order),
            setting(0, "Net/DoubleClickTime", struct.pack(f"{order}i", ms), order),
        ],
        order,
    )


@pytest.mark.parametrize("order", ["<", ">"])
def test_the_double_click_time_is_found_among_other_settings_in_either_byte_order(order: str) -> None:
    parsed = parse_xsettings(double_click_settings(650, order))
    assert parsed == {"Net/ThemeName": "Adwaita", "Gtk/Color": (1, 2, 3, 4), "Net/DoubleClickTime": 650}


@pytest.mark.parametrize(
    "data", [b"", b"\x05" + b"\0" * 11, double_click_settings(650)[:-3], xsettings([setting(9, "X", b"")])]
)
def test_garbled_settings_are_an_error_in_words(data: bytes) -> None:
    with pytest.raises(XSettingsError):
        parse_xsettings(data)


@contextmanager
def settings_manager(data: bytes) -> Iterator[None]:
    """Own _XSETTINGS_S0 with a window holding `data` as _XSETTINGS_SETTINGS, as a settings daemon does."""
    display = xdisplay.Display()
    window = display.screen().root.create_window(0, 0, 1, 1, 0, X.CopyFromParent)
    atom = display.intern_atom("_XSETTINGS_SETTINGS")
    window.change_property(atom, atom, 8, data)
    window.set_selection_owner(display.intern_atom("_XSETTINGS_S0"), X.CurrentTime)
    display.sync()
    try:
        yield
    finally:
        window.destroy()
        display.close()


@pytest.mark.display
def test_the_desktops_double_click_time_is_read_from_its_settings_manager(xvfb: XvfbServer) -> None:
    none = read_double_click_time()
    assert (none.ms, none.source) == (
        DEFAULT_DOUBLE_CLICK_MS,
        "default (400 ms, as GTK and Qt): no XSETTINGS manager runs",
    )
    with settings_manager(double_click_settings(650)):
        read = read_double_click_time()
    assert (read.ms, read.source) == (650, "XSETTINGS Net/DoubleClickTime")
    with settings_manager(double_click_settings(0)):
        assert "implausible" in read_double_click_time().source


class ClickLog:
    """A window of the test's own that keeps the X server's timestamps of its button presses and releases."""

    def __init__(self, x: int, y: int) -> None:
        self.display = xdisplay.Display()
        root = self.display.screen().root
        self.window = root.create_window(
            x, y, 300, 200, 0, X.CopyFromParent, background_pixel=self.display.screen().white_pixel,
            event_mask=X.ButtonPressMask | X.ButtonReleaseMask, override_redirect=True,
        )  # fmt: skip
        self.window.map()
        self.display.sync()

    def events(self) -> list[tuple[str, int]]:
        self.display.sync()
        out: list[tuple[str, int]] = []
        while self.display.pending_events():
            event: Any = self.display.next_event()
            if event.type in (X.ButtonPress, X.ButtonRelease):
                out.append(("press" if event.type == X.ButtonPress else "release", int(event.time)))
        return out

    def close(self) -> None:
        self.window.destroy()
        self.display.close()


class Steps:
    def __init__(self, actions: Sequence[Action]) -> None:
        self.actions = list(actions)

    def propose(
        self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame], cancel: CancelToken
    ) -> Proposal:
        frame = frames[-1]
        action = self.actions.pop(0) if self.actions else Done("done")
        grounding = Grounding(exact=True, how="found exactly where recorded", source="routine 'r'")
        return Proposal(action, "", frame.width, frame.height, space=ImagePixelSpace(), grounding=grounding)

    def interrupt(self) -> None:
        pass


class ApproveAll:
    def __init__(self) -> None:
        self.asked = 0

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked += 1
        return ApprovalDecision(Decision.APPROVE_ALL_EXACT)


@pytest.mark.display
def test_two_exact_clicks_under_approve_all_land_further_apart_than_the_desktops_double_click_time(
    xvfb: XvfbServer,
) -> None:
    log = ClickLog(100, 100)
    capture = ScreenCapture()
    approver = ApproveAll()
    try:
        with settings_manager(double_click_settings(700)):
            steps = Steps([Click(Point(150, 150)), Click(Point(160, 150))])
            engine = StepEngine(steps, approver, InputPerformer(X11Input(capture=capture)), capture, EngineSettings())
            result = engine.run("two clicks")
        events = log.events()
    finally:
        capture.close()
        log.close()
    assert result.outcome is Outcome.DONE, result.detail
    assert approver.asked == 1  # the second click went through under "approve all"
    assert [kind for kind, _ in events] == ["press", "release", "press", "release"]
    gap_ms = events[2][1] - events[1][1]
    assert gap_ms > 700 + SPACING_MARGIN_MS // 2, f"the second click came {gap_ms} ms after the first"


class ApproveAllThenStop(ApproveAll):
    """Approves all at once; once the second click is on its way, stops the run during its spacing wait."""

    def __init__(self, engine_box: list[StepEngine]) -> None:
        super().__init__()
        self.engine_box = engine_box

    def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        # Only the first step is asked; the second runs under "approve all" and waits out the spacing.
        timer = threading.Timer(0.5, self.engine_box[0].cancel.cancel)
        timer.daemon = True
        timer.start()
        return super().decide(request)


@pytest.mark.display
def test_a_stop_during_the_spacing_wait_is_recorded_as_nothing_performed(xvfb: XvfbServer, tmp_path: Path) -> None:
    log = ClickLog(100, 100)
    capture = ScreenCapture()
    box: list[StepEngine] = []
    approver = ApproveAllThenStop(box)
    try:
        with settings_manager(double_click_settings(5000)):  # the wait is long enough to be stopped in
            steps = Steps([Click(Point(150, 150)), Click(Point(160, 150))])
            settings = EngineSettings(trajectory_root=tmp_path)
            engine = StepEngine(steps, approver, InputPerformer(X11Input(capture=capture)), capture, settings)
            box.append(engine)
            result = engine.run("two clicks, stopped between them")
        events = log.events()
    finally:
        capture.close()
        log.close()
    assert result.outcome is Outcome.STOPPED, result.detail
    assert [kind for kind, _ in events] == ["press", "release"]  # the second click never went out
    (folder,) = iter_session_folders(tmp_path)
    second = {step["index"]: step for step in read_session(folder).steps}[2]
    # An approved step that ended without acting says so; a resultless approved step reads as lost.
    assert second["decision"] == "approve"
    assert second["result"] == {"ok": False, "detail": "stopped before the action began: nothing was performed"}
