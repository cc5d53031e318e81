"""Capture on headless KWin 5.27: the stream is linked and streaming, KWin sends no frame, and Holodesk says so.

KWin 5.27 records a screen cast of an output only when the output's backend emits
Output::outputChange, which only its DRM and nested-Wayland OpenGL backends do; both need a DRM render
node this machine has not (docs/testing.md, "KDE: what blocks a headless test here"). This test pins
both halves: KWin's own log shows the PipeWire stream streaming (so the pipeline Holodesk built is
linked and waiting), and Holodesk's WaylandCapture refuses in words within its bound instead of
hanging or handing the model a blank picture. A KWin that sends frames fails this test (no refusal):
the KDE capture tests can then be written.
"""

from __future__ import annotations

import time

import pytest

from bench.rigs.kwin_stack import STREAMING_LOGGED, KwinStack
from holodesk.automation.errors import CaptureError
from holodesk.automation.wayland.capture import WaylandCapture
from holodesk.automation.wayland.session import WaylandSession

pytestmark = [pytest.mark.display, pytest.mark.kde]

FIRST_FRAME_TIMEOUT_S = 3.0


def test_no_frame_from_kwin_is_refused_in_words(kwin_stack: KwinStack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", kwin_stack.bus_address)  # WaylandSession's bus
    notices: list[str] = []
    session = WaylandSession(None, notices.append, consent_timeout_s=30, first_frame_timeout_s=FIRST_FRAME_TIMEOUT_S)
    capture = WaylandCapture(session)
    started = time.monotonic()
    try:
        with pytest.raises(CaptureError) as refused:
            capture.grab_monitor(1)
    finally:
        capture.close()
    took = time.monotonic() - started
    assert "no frame from PipeWire node" in str(refused.value)
    assert took < 4 * FIRST_FRAME_TIMEOUT_S, f"the refusal took {took:.1f} s"
    assert not session.is_started  # nothing half-built is kept for the next grab
    assert notices, "the user was told nothing before the portal was asked"
    kwin_log = (kwin_stack.logs / "kwin.log").read_text(errors="replace")
    assert STREAMING_LOGGED in kwin_log, "KWin never streamed: the block is elsewhere" + kwin_stack.log_tail()
