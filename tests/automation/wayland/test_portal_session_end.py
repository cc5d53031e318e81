"""When the desktop ends the portal session, capture and input fail in words and nothing acts.

The test plays the desktop: it rotates the only monitor through mutter's DisplayConfig API, which
makes mutter close the screen cast (the monitor it showed is gone) and with it the remote-desktop
session; the portal then sends Session.Closed, as when the user stops sharing from GNOME's menu.
The stream just goes quiet then, so without Closed the last frame would be served for ever.
This module has its own stack (the rotation ends every screen cast on it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jeepney import DBusAddress, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

from bench.rigs.gnome_stack import GnomeStack, answer_consent
from bench.rigs.mutter_remote import MutterRemote
from holodesk.automation.actions import Click, Point
from holodesk.automation.errors import CaptureError, ExecutionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.capture import WaylandCapture
from holodesk.automation.wayland.portal import SHARING_STOPPED
from holodesk.automation.wayland.session import WaylandSession
from tests.automation.wayland.conftest import CONSENT_TIMEOUT_S, WaylandTarget, start_with_answer
from tests.support.wayland_target import PAD_COLOUR

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack

DISPLAY_CONFIG = "org.gnome.Mutter.DisplayConfig"
ROTATED_90 = 1


def rotate_the_monitor(stack: GnomeStack) -> None:
    """Turn the only monitor by 90 degrees, as a user would in Settings > Displays."""
    address = DBusAddress("/org/gnome/Mutter/DisplayConfig", bus_name=DISPLAY_CONFIG, interface=DISPLAY_CONFIG)
    with open_dbus_connection(stack.bus_address) as bus:
        serial, monitors, _logical, _props = bus.send_and_get_reply(
            new_method_call(address, "GetCurrentState"), timeout=5
        ).body
        connector, mode = monitors[0][0][0], monitors[0][1][0][0]
        layout = [(0, 0, 1.0, ROTATED_90, True, [(connector, mode, {})])]
        reply = bus.send_and_get_reply(
            new_method_call(address, "ApplyMonitorsConfig", "uua(iiduba(ssa{sv}))a{sv}", (serial, 1, layout, {})),
            timeout=5,
        )
        assert reply.header.message_type == MessageType.method_return, reply.body


@pytest.fixture(scope="module")
def session(gnome_stack: GnomeStack, mutter_remote: MutterRemote) -> Iterator[WaylandSession]:
    wayland = WaylandSession(consent_timeout_s=CONSENT_TIMEOUT_S)
    error = start_with_answer(wayland, lambda: answer_consent(mutter_remote))
    if error is not None:
        pytest.fail(f"the portal session did not start: {error}\n{gnome_stack.log_tail()}", pytrace=False)
    try:
        yield wayland
    finally:
        wayland.close()


def test_a_session_the_desktop_ended_fails_capture_and_input_in_words(
    gnome_stack: GnomeStack, session: WaylandSession, wayland_target: WaylandTarget, tmp_path: Path
) -> None:
    capture, input_performer = WaylandCapture(session), InputPerformer(PortalInput(session))
    left, top, _, _ = wayland_target.ready["layout"]["pad"]
    deadline = time.monotonic() + 10
    while capture.grab(1).pixel_rgb(left + 5, top + 5) != PAD_COLOUR:
        assert time.monotonic() < deadline, "the target never showed"
        time.sleep(0.1)
    rotate_the_monitor(gnome_stack)
    deadline = time.monotonic() + 5
    while True:
        try:
            capture.grab(1)
        except CaptureError as exc:
            assert str(exc) == SHARING_STOPPED
            break
        assert time.monotonic() < deadline, "capture kept serving the last frame after the desktop ended sharing"
        time.sleep(0.05)
    wayland_target.drain()
    with pytest.raises(ExecutionError, match=SHARING_STOPPED):
        input_performer.execute(Click(Point(left + 5, top + 5)))
    with pytest.raises(CaptureError, match=SHARING_STOPPED):
        capture.grab(None)
    time.sleep(0.3)
    assert [record for record in wayland_target.drain() if record["event"] == "press"] == []
